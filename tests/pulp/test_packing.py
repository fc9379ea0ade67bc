"""Storage of the generated C: container packing against a bit-by-bit reference, the HWC layout,
exact division helpers of the C against the graph's rounding (through the packing of their
inputs)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgesynth.targets.pulp.lower import Storage, storage_for
from edgesynth.targets.pulp.packing import from_hwc, pack, to_hwc, unpack

CONTAINERS = [Storage(b, s) for b in (2, 4, 8, 16, 32) for s in (False, True)]


def _bitwise(values: list[int], storage: Storage) -> bytes:
    """One bit at a time, least significant first, two's complement."""
    bits = []
    for v in values:
        u = v & ((1 << storage.bits) - 1)
        bits += [(u >> k) & 1 for k in range(storage.bits)]
    bits += [0] * (-len(bits) % 8)
    return bytes(sum(bits[i + k] << k for k in range(8)) for i in range(0, len(bits), 8))


@given(st.sampled_from(CONTAINERS), st.data())
@settings(max_examples=100, deadline=None)
def test_pack_equals_a_bitwise_reference_and_unpacks(storage: Storage, data) -> None:
    values = data.draw(st.lists(st.integers(storage.lo, storage.hi), min_size=0, max_size=40))
    packed = pack(np.asarray(values, dtype=np.int64), storage)
    assert packed == _bitwise(values, storage)
    assert unpack(packed, storage, len(values)).tolist() == values


@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 6))
@settings(max_examples=30, deadline=None)
def test_hwc_layout_round_trips(c: int, h: int, w: int) -> None:
    x = np.arange(c * h * w).reshape(c, h, w)
    flat = to_hwc(x)
    k, i, j = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    assert np.array_equal(flat[(i * w + j) * c + k], x)
    assert np.array_equal(from_hwc(flat, (c, h, w)), x)
    y = np.arange(c * w).reshape(c, w)
    assert np.array_equal(from_hwc(to_hwc(y), (c, w)), y)


@given(st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40), st.integers(1, 64))
@settings(max_examples=100, deadline=None)
def test_storage_for_is_the_narrowest_byte_aligned_container(lo: int, hi: int, channels: int):
    lo, hi = min(lo, hi), max(lo, hi)
    assume(hi - lo < 2**31 and max(abs(lo), abs(hi)) < 2**31)
    s = storage_for(lo, hi, channels)
    assert s.lo <= lo and hi <= s.hi and (channels * s.bits) % 8 == 0
    for narrower in (b for b in (2, 4, 8, 16) if b < s.bits):
        t = Storage(narrower, lo < 0)
        assert not (t.lo <= lo and hi <= t.hi and (channels * narrower) % 8 == 0)
