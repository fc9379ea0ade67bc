"""The generated softmax.c against its NumPy reference (emit/softmax.py), bit for bit.

(check_output(), cnn_unload() and the softmax of every corpus network are checked on the PC by
tests/conformance/test_codegen_corpus.py with harness/kat_harness.c.)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import needs
from edgesynth.targets.max7800x.emit.softmax import softmax_q17p14_q15

CC = shutil.which("gcc") or "gcc"


@pytest.fixture(scope="module")
def softmax_driver(tmp_path_factory) -> Path:
    """The project's softmax.c with a driver that reads vectors from stdin."""
    needs.tool("gcc")
    from edgesynth.targets.max7800x.emit.project import render

    work = tmp_path_factory.mktemp("softmax")
    (work / "softmax.c").write_text(render("softmax.c.j2", name="t"))
    (work / "cnn.h").write_text(
        "#include <stdint.h>\ntypedef int32_t q31_t;\ntypedef int16_t q15_t;\n"
        "typedef int8_t q7_t;\n#define CNN_NUM_OUTPUTS 256\n"
        "void softmax_q17p14_q15(const q31_t *, const uint16_t, q15_t *);\n"
        "void softmax_shift_q17p14_q15(q31_t *, const uint16_t, uint8_t, q15_t *);\n"
        "void softmax_q7_q15(const q7_t *, const uint16_t, q15_t *);\n"
    )
    (work / "mxc.h").write_text("")
    (work / "driver.c").write_text(
        '#include <stdio.h>\n#include "cnn.h"\n'
        "int main(void) {\n  int n, shift, i; q31_t v[256]; q15_t p[256];\n"
        '  while (scanf("%d %d", &n, &shift) == 2) {\n'
        '    for (i = 0; i < n; i++) scanf("%d", &v[i]);\n'
        "    if (shift) softmax_shift_q17p14_q15(v, n, shift, p);\n"
        "    else softmax_q17p14_q15(v, n, p);\n"
        '    for (i = 0; i < n; i++) printf("%d ", p[i]);\n    printf("\\n");\n  }\n'
        "  return 0;\n}\n"
    )
    binary = work / "driver"
    subprocess.run(
        [
            CC,
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{work}",
            str(work / "softmax.c"),
            str(work / "driver.c"),
            "-o",
            str(binary),
        ],
        check=True,
    )
    return binary


@settings(max_examples=60, deadline=None)
@given(
    vectors=st.lists(
        st.tuples(
            st.lists(st.integers(-(2**24), 2**24), min_size=1, max_size=64),
            st.integers(0, 6),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_softmax_matches_the_reference(softmax_driver: Path, vectors) -> None:
    lines = []
    for values, shift in vectors:
        lines.append(f"{len(values)} {shift} " + " ".join(map(str, values)))
    run = subprocess.run(
        [str(softmax_driver)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    got = [list(map(int, line.split())) for line in run.stdout.strip().splitlines()]
    for (values, shift), out in zip(vectors, got, strict=True):
        np.testing.assert_array_equal(out, softmax_q17p14_q15(np.array(values), shift))


def test_softmax_reference_known_values() -> None:
    # One dominant class: 2^16 of 2^16 + 2^12 + ..., the largest maps to 32767 (clipped).
    out = softmax_q17p14_q15(np.array([16 << 14, 12 << 14, 0]))
    assert out[0] == 30840 and out[1] == 1927 and out[2] == 0
    assert softmax_q17p14_q15(np.array([5, 5])).tolist() == [16384, 16384]
