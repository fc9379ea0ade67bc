"""Max pooling computed tap by tap equals PyTorch's max_pool2d (floor and ceil mode, padding,
dilation) and the maximum over the simulator's own windows, value for value."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.sim import ops


@st.composite
def pools(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    h = draw(st.integers(dh * (kh - 1) + 1, 12))
    w = draw(st.integers(dw * (kw - 1) + 1, 12))
    ceil = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    x = np.random.default_rng(seed).normal(size=(2, 3, h, w))
    return x, (kh, kw), (sh, sw), (dh, dw), (ph, pw, ph, pw), ceil


@settings(max_examples=150, deadline=None)
@given(pools())
def test_max_pool_equals_pytorch_and_the_windows(case) -> None:
    x, kernel, stride, dilation, pads, ceil = case
    got = ops.max_pool_batch(
        x, kernel, stride, dilation=dilation, pads=pads, ceil=ceil, fill=-np.inf
    )
    expected = torch.nn.functional.max_pool2d(
        torch.from_numpy(x), kernel, stride, padding=pads[:2], dilation=dilation, ceil_mode=ceil
    ).numpy()
    np.testing.assert_array_equal(got, expected)
    windows, _ = ops.pool_windows_batch(
        x, kernel, stride, dilation=dilation, pads=pads, ceil=ceil, fill=-np.inf
    )
    np.testing.assert_array_equal(got, windows.max(axis=-1))


def test_integer_max_pool_keeps_the_type() -> None:
    x = np.arange(2 * 3 * 5 * 5, dtype=np.int64).reshape(2, 3, 5, 5) - 70
    got = ops.max_pool_batch(x, (2, 2), (2, 2), ceil=True, fill=np.iinfo(np.int64).min)
    assert got.dtype == np.int64
    assert got.shape == (2, 3, 3, 3)
    assert got[0, 0, 2, 2] == x[0, 0, 4, 4]


@st.composite
def in_flight_pools(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    # at least one output: the window fits, and the vendor's length formula (pool + dilation
    # - 1 for the span) is positive
    h = draw(st.integers(max(dh * (kh - 1) + 1, kh + dh - 1), 14))
    w = draw(st.integers(max(dw * (kw - 1) + 1, kw + dw - 1), 14))
    dtype = draw(st.sampled_from([np.int8, np.int64]))
    seed = draw(st.integers(0, 2**16))
    x = np.random.default_rng(seed).integers(-128, 128, size=(3, h, w)).astype(dtype)
    return x, (kh, kw), (sh, sw), (dh, dw), draw(st.booleans()), draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(in_flight_pools())
def test_in_flight_pooling_equals_the_reduction_over_its_windows(case) -> None:
    """pool2d, one whole-layer maximum or sum per window position, gives the values and type
    of the maximum or average over the vendor's windows (which may overrun the data)."""
    x, pool, stride, dilation, average, rounding = case
    if pool == (1, 1):
        return
    got = ops.pool2d(x, pool, stride, average_pool=average, dilation=dilation, rounding=rounding)
    windows = ops._pool_windows(x, pool, stride, dilation)
    if average:
        expected = ops.average(windows.sum(axis=(-2, -1)), pool[0] * pool[1], rounding)
    else:
        expected = windows.max(axis=(-2, -1))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
