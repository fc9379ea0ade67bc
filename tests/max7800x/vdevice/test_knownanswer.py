"""Known answers: sampleoutput.h and kat.npz spellings of the same words."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.targets.max7800x.vdevice.knownanswer import from_blocks, load_kat

blocks = st.lists(
    st.tuples(
        st.integers(0x50400000 // 4, 0x51FFFFF0 // 4).map(lambda w: 4 * w),
        st.integers(1, 2**32 - 1),
        st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=8),
    ),
    min_size=1,
    max_size=5,
)


def _header(items) -> str:
    values: list[int] = []
    for addr, mask, data in items:
        values += [addr, mask, len(data), *data]
    lines = [", ".join(f"0x{v:08x}" for v in values[i : i + 8]) for i in range(0, len(values), 8)]
    body = ", \\\n  ".join([*lines, "0x00000000"])
    return f"// generated\n#define SAMPLE_OUTPUT {{ \\\n  {body} \\\n}}\n"


@settings(max_examples=50, deadline=None)
@given(blocks)
def test_header_and_npz_agree(tmp_path_factory, items):
    folder = tmp_path_factory.mktemp("kat")
    header = folder / "sampleoutput.h"
    header.write_text(_header(items))
    npz = folder / "kat.npz"
    np.savez(
        npz,
        addr=np.array([a for a, _, _ in items], dtype=np.uint32),
        mask=np.array([m for _, m, _ in items], dtype=np.uint32),
        length=np.array([len(d) for _, _, d in items], dtype=np.uint32),
        data=np.array([v for _, _, d in items for v in d], dtype=np.uint32),
    )
    a, b = load_kat(header), load_kat(npz)
    for name in ("addr", "mask", "expected"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert a.addr.size == sum(len(d) for _, _, d in items)


def test_blocks_expand_to_words():
    kat = from_blocks(
        np.array([0x50401000, 0x50409000]),
        np.array([0xFF, 0xFFFF]),
        np.array([2, 1]),
        np.array([7, 8, 9]),
    )
    assert kat.addr.tolist() == [0x50401000, 0x50401004, 0x50409000]
    assert kat.mask.tolist() == [0xFF, 0xFF, 0xFFFF]
    assert kat.expected.tolist() == [7, 8, 9]
