"""Exact division and requantization against Python fractions, for every rounding mode."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.sim.rounding import ROUNDING_MODES, divide, requantize, shift_requantize


def reference(num: int, den: int, mode: str) -> int:
    f = Fraction(num, den)
    if mode == "floor":
        return math.floor(f)
    if mode == "trunc":
        return math.trunc(f)
    if mode == "half_up":
        return math.floor(f + Fraction(1, 2))
    if mode == "half_away":
        magnitude = math.floor(abs(f) + Fraction(1, 2))
        return magnitude if f >= 0 else -magnitude
    return round(f)  # Fraction rounds half to even


BIG = 1 << 70


@given(
    st.lists(st.integers(-(1 << 40), 1 << 40), min_size=1, max_size=20),
    st.integers(1, 1 << 20),
    st.sampled_from(ROUNDING_MODES),
)
def test_divide_int64(nums: list[int], den: int, mode: str) -> None:
    got = divide(np.array(nums, dtype=np.int64), den, mode)
    assert [int(v) for v in got] == [reference(n, den, mode) for n in nums]


@given(st.integers(-BIG, BIG), st.integers(1, BIG), st.sampled_from(ROUNDING_MODES))
def test_divide_beyond_64_bits(num: int, den: int, mode: str) -> None:
    got = divide(np.array([num], dtype=object), den, mode)
    assert int(got[0]) == reference(num, den, mode)


@given(
    st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=3, max_size=3),
    st.lists(st.integers(-(1 << 31), 1 << 31), min_size=3, max_size=3),
    st.lists(st.integers(-(1 << 33), 1 << 33), min_size=3, max_size=3),
    st.integers(1, 1 << 31),
    st.sampled_from(ROUNDING_MODES),
)
def test_requantize_per_channel_64bit_intermediates(acc, mul, add, div, mode) -> None:
    """NEMO-like kappa x acc + lambda exceeds 32 bits (and, here, 63): still exact."""
    x = np.array(acc, dtype=np.int64)[:, None].repeat(2, axis=1)  # (C=3, 2)
    got = requantize(
        x, mul=np.array(mul), add=np.array(add), div=div, rounding=mode, lo=-128, hi=127
    )
    for c in range(3):
        want = min(max(reference(acc[c] * mul[c] + add[c], div, mode), -128), 127)
        assert list(got[c]) == [want, want]


@given(st.integers(-(1 << 40), 1 << 40), st.integers(-15, 15))
def test_shift_requantize_is_round_half_up(acc: int, shift: int) -> None:
    want = min(max(math.floor(Fraction(acc) * Fraction(2) ** shift + Fraction(1, 2)), -128), 127)
    assert int(shift_requantize(np.array([acc]), shift)[0]) == want
