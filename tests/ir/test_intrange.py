"""`ir.intrange` against independent references: every bit pattern decoded by hand, and every
input vector of a small convolution tried."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from edgesynth.ir.graph import QType
from edgesynth.ir.intrange import accumulator_range, int_range


def _decode(pattern: int, bits: int, signed: bool) -> int:
    """A bit pattern read as an integer: the top bit weighs -2**(bits-1) when signed."""
    value = sum(1 << i for i in range(bits) if pattern >> i & 1)
    if signed and pattern >> (bits - 1) & 1:
        value -= 2 << (bits - 1)
    return value


@given(st.integers(1, 12), st.booleans())
def test_int_range_is_the_smallest_and_largest_bit_pattern(bits: int, signed: bool) -> None:
    values = [_decode(p, bits, signed) for p in range(2**bits)]
    assert int_range(bits, signed) == (min(values), max(values))


@given(st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32]))
def test_int_range_matches_numpy_integer_types(dtype: type) -> None:
    info = np.iinfo(dtype)
    assert int_range(info.bits, info.min < 0) == (int(info.min), int(info.max))


@given(st.integers(1, 64), st.booleans())
def test_qtype_reads_its_range_from_int_range(bits: int, signed: bool) -> None:
    lo, hi = int_range(bits, signed)
    assert (QType(bits, signed).lo, QType(bits, signed).hi) == (lo, hi)
    assert hi - lo + 1 == 2**bits


@st.composite
def _layer(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray | None, int, int, bool]:
    out = draw(st.integers(1, 3))
    shape = (out, draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    weight = draw(hnp.arrays(np.int64, shape, elements=st.integers(-9, 9)))
    bias = draw(st.none() | hnp.arrays(np.int64, (out,), elements=st.integers(-50, 50)))
    lo = draw(st.integers(-4, 3))
    hi = draw(st.integers(lo, 4))
    return weight, bias, lo, hi, draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(_layer())
def test_accumulator_range_is_reached_by_some_input_and_never_passed(layer) -> None:
    weight, bias, lo, hi, padded = layer
    values = sorted(set(range(lo, hi + 1)) | ({0} if padded else set()))
    w = weight.reshape(weight.shape[0], -1)
    sums = [
        int(row @ np.array(x)) + (int(bias[c]) if bias is not None else 0)
        for x in itertools.product(values, repeat=w.shape[1])
        for c, row in enumerate(w)
    ]
    assert accumulator_range(weight, bias, lo, hi, padded) == (min(sums), max(sums))


def test_accumulator_range_is_exact_beyond_int64() -> None:
    weight = np.full((1, 4), 1 << 62, dtype=np.int64)
    assert accumulator_range(weight, None, 0, 3, padded=False) == (0, 12 << 62)


def _python_bound(weight: np.ndarray, bias: np.ndarray | None, lo: int, hi: int) -> tuple[int, int]:
    """The bound with Python integers only: each weight takes the input end that helps it."""
    tops, bottoms = [], []
    for c, row in enumerate(weight.reshape(weight.shape[0], -1).tolist()):
        b = int(bias[c]) if bias is not None else 0
        tops.append(b + sum(v * (hi if v > 0 else lo) for v in row))
        bottoms.append(b + sum(v * (lo if v > 0 else hi) for v in row))
    return min(bottoms), max(tops)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 62),
    st.integers(1, 40),
    st.integers(-(1 << 40), 0),
    st.integers(0, 1 << 40),
    st.booleans(),
    st.integers(0, 1),
)
def test_accumulator_range_is_exact_at_every_magnitude(
    w_bits: int, width: int, lo: int, hi: int, with_bias: bool, seed: int
) -> None:
    """Large weights and wide inputs (where int64 arithmetic would wrap) give the same bound
    as Python integers: the fast int64 path is taken only where it is exact."""
    rng = np.random.default_rng(seed + w_bits * 7 + width)
    top = (1 << w_bits) - 1
    weight = rng.integers(-top, top, size=(3, width), dtype=np.int64, endpoint=True)
    bias = rng.integers(-top, top, size=3, dtype=np.int64, endpoint=True) if with_bias else None
    assert accumulator_range(weight, bias, lo, hi, padded=False) == _python_bound(
        weight, bias, lo, hi
    )
