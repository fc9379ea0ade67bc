"""The simulator's operators against the independent reference in `simref`, value for value."""

from __future__ import annotations

import numpy as np
import pytest
import simref

from edgesynth.sim import ops
from edgesynth.targets.max7800x.compat.pooling import vendor_pool1d

RNG = np.random.default_rng(7)


def data(*shape: int, low: int = -128, high: int = 128) -> np.ndarray:
    return RNG.integers(low, high, size=shape, dtype=np.int64)


@pytest.mark.parametrize("pad", [(0, 0), (1, 1), (1, 0), (2, 2)])
@pytest.mark.parametrize("groups", [1, 4])
def test_conv2d(pad, groups) -> None:
    x, w, b = data(4, 7, 6), data(8, 4 // groups, 3, 3), data(8)
    expected = simref.conv2d(x, w, b, pad=pad, groups=groups)
    np.testing.assert_array_equal(ops.conv2d(x, w, b * 128, pad=pad, groups=groups), expected)


@pytest.mark.parametrize("dilation", [1, 2, 5])
@pytest.mark.parametrize("groups", [1, 3])
def test_conv1d_dilation_and_depthwise(dilation, groups) -> None:
    x, w, b = data(3, 40), data(3, 3 // groups, 5), data(3)
    expected = simref.conv1d(x, w, b, pad=2, dilation=dilation, groups=groups)
    got = ops.conv1d(x, w, b * 128, pad=2, dilation=dilation, groups=groups)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("pad", [0, 1, 2])
@pytest.mark.parametrize("groups", [1, 4])
def test_conv_transpose2d_matches_pytorch(pad, groups) -> None:
    """The builder's flip-and-swap form run as the hardware does (zero-stuffing) equals
    PyTorch's ConvTranspose2d on the checkpoint's weights, groups included."""
    x, w_torch, b = data(4, 5, 6), data(4, 8 // groups, 3, 3), data(8)
    expected = simref.conv_transpose2d(x, w_torch, b, pad=pad, groups=groups)
    # Per group: (in/g, out/g, kh, kw) -> (out/g, in/g, kh, kw) flipped, groups stacked.
    per_group = np.split(w_torch, groups, axis=0)
    w_conv = np.concatenate([np.flip(g, axis=(2, 3)).swapaxes(0, 1) for g in per_group], axis=0)
    got = ops.conv_transpose2d(x, w_conv, b * 128, pad=(pad, pad), groups=groups)
    np.testing.assert_array_equal(got, expected)


def test_requantize_rounds_half_up_for_negative_values_too() -> None:
    acc = np.arange(-3000, 3000, 7, dtype=np.int64)
    for shift in (-3, 0, 1, 7, 9):
        np.testing.assert_array_equal(ops.requantize(acc, shift), simref.requantize(acc, shift))
    # -64 / 128 = -0.5 rounds to 0, +64 / 128 = +0.5 rounds to 1.
    assert ops.requantize(np.array([-64, 64, -192]), 0).tolist() == [0, 1, -1]


def test_activations_clip_to_127_even_on_wide_values() -> None:
    wide = np.array([-100000, -5, 0, 5, 100000])
    np.testing.assert_array_equal(ops.activate(wide, "relu"), simref.relu(wide))
    np.testing.assert_array_equal(ops.activate(wide, "abs"), simref.absolute(wide))
    np.testing.assert_array_equal(ops.activate(wide, None), wide)


def test_unknown_activation_is_an_error_not_a_pass_through() -> None:
    with pytest.raises(ValueError, match="unknown activation `sigmoid`"):
        ops.activate(np.zeros(3, dtype=np.int64), "sigmoid")


POOLS_2D = [
    # pool, stride, dilation
    ((2, 2), (2, 2), (1, 1)),
    ((3, 3), (1, 1), (1, 1)),
    ((2, 3), (2, 2), (1, 1)),  # non-square pooling
    ((3, 1), (3, 3), (1, 1)),
    ((1, 4), (1, 1), (1, 1)),
    ((2, 2), (1, 1), (2, 2)),  # pool dilation
    ((2, 2), (2, 2), (3, 1)),
    ((3, 3), (3, 3), (2, 2)),
    # Dilated windows that reach past the last row/column (the vendor reads on in memory).
    ((3, 3), (1, 1), (2, 2)),
    ((4, 2), (1, 1), (2, 3)),
    ((3, 2), (2, 2), (2, 1)),
    ((5, 3), (2, 1), (3, 2)),
]


@pytest.mark.parametrize(("pool", "stride", "dilation"), POOLS_2D)
@pytest.mark.parametrize("kind", ["max", "avg", "avg-rounded"])
def test_pool2d(pool, stride, dilation, kind) -> None:
    x = data(3, 8, 9)
    average, rounding = kind != "max", kind == "avg-rounded"
    expected = simref.pool2d(x, pool, stride, average=average, dilation=dilation, rounding=rounding)
    got = ops.pool2d(x, pool, stride, average_pool=average, dilation=dilation, rounding=rounding)
    np.testing.assert_array_equal(got, expected)


def test_avg_pool_rounding_is_half_away_from_zero() -> None:
    """--avg-pool-rounding: -2.5 -> -3 and 2.5 -> 3 (half away from zero; the older vendor's
    np.round would give -2 and 2); without it the average truncates toward zero."""
    x = np.array([[[-2, -3], [2, 3]]])  # two 1x2 windows: -2.5 and 2.5
    assert ops.pool2d(x, (1, 2), (1, 2), average_pool=True, rounding=True).ravel().tolist() == [
        -3,
        3,
    ]
    assert ops.pool2d(x, (1, 2), (1, 2), average_pool=True).ravel().tolist() == [-2, 2]


POOLS_1D = [(2, 2, 1), (3, 1, 1), (4, 3, 1), (2, 1, 3), (3, 2, 2), (4, 4, 2), (1, 3, 1)]


@pytest.mark.parametrize(("pool", "stride", "dilation"), POOLS_1D)
@pytest.mark.parametrize("average", [False, True])
def test_pool1d(pool, stride, dilation, average) -> None:
    x = data(4, 23)
    if pool == 1:
        expected = x[:, ::stride]
    else:
        expected = simref.pool1d(x, pool, stride, average=average, dilation=dilation)
    got = vendor_pool1d(x, pool, stride, average_pool=average, dilation=dilation)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("operation", ["add", "sub", "xor", "or"])
def test_eltwise_is_left_to_right_and_wide(operation) -> None:
    a, b, c = data(2, 3, 3), data(2, 3, 3), data(2, 3, 3)
    fn = {"add": np.add, "sub": np.subtract, "xor": np.bitwise_xor, "or": np.bitwise_or}
    expected = fn[operation](fn[operation](a, b), c)
    np.testing.assert_array_equal(ops.eltwise(operation, [a, b, c]), expected)


@pytest.mark.parametrize(
    ("weight_range", "tight_type"), [(1, np.float32), (127, np.float64)], ids=["sparse", "dense"]
)
def test_integer_products_in_float32_where_each_outputs_weights_allow(
    weight_range: int, tight_type: type
) -> None:
    """8-bit data, 8-bit weights, 3x3x256 taps: max|w| x taps x max|x| is past 2**24, but with
    weights in [-1, 1] no output's partial sums can reach it (float32, exact); with weights
    up to 127 they can (float64). Either way the sums are the int64 sums."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(2, 256, 6, 6))
    w = rng.integers(-weight_range, weight_range + 1, size=(4, 256, 3, 3))
    w[0, 0, 0, 0] = 127  # the coarse bound: 127 x 2304 x 128 > 2**24
    kernels = w.reshape(1, 4, -1)
    assert 128 * 127 * kernels.shape[-1] >= ops.FLOAT32_EXACT_LIMIT  # the coarse bound misses
    assert ops._matmul_type(x, kernels) == tight_type
    got = ops.conv2d_batch(x, w, pads=(1, 1, 1, 1))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    want = np.einsum("nchwij,ocij->nohw", cols, w, dtype=np.int64)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
