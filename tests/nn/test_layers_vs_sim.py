"""Property tests: every edgesynth.nn layer kind in 8-bit mode equals the simulator, bit for bit.

Random layers (pooling, kernel, padding, dilation, weight bits, shift, bias, activation, wide
output) get random integer weights; the layer's output on random 8-bit data must equal the
composition of `edgesynth.sim.ops` the synthesizer uses for the same configuration.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.sim import ops
from edgesynth.targets.max7800x.compat.pooling import vendor_pool1d

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ints(rng: np.random.Generator, lo: int, hi: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64)


def _run(layer: torch.nn.Module, x: np.ndarray, device: str = "MAX78000", rounding=False):
    with enn.use(device, simulate=True, avg_pool_rounding=rounding), torch.no_grad():
        y = layer(torch.from_numpy(x).double()[None])[0]
    assert torch.equal(y, torch.round(y)), "8-bit mode must return integers"
    return y.numpy().astype(np.int64)


def _finish(acc: np.ndarray, shift: int, activation: str | None, wide: bool) -> np.ndarray:
    return acc if wide else ops.activate(ops.requantize(acc, shift), activation)


def _params(rng, layer, bits, with_bias, out_channels):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    w = _ints(rng, lo, hi, tuple(layer.op.weight.shape))
    b = _ints(rng, -128, 127, (out_channels,)) if with_bias else None
    return w, b


common = {
    "bits": st.sampled_from([1, 2, 4, 8]),
    "shift": st.integers(-3, 6),
    "with_bias": st.booleans(),
    "activation": st.sampled_from([None, "relu", "abs"]),
    "wide": st.booleans(),
    "seed": st.integers(0, 2**31),
}


@SETTINGS
@given(
    cin=st.integers(1, 6),
    cout=st.integers(1, 6),
    k=st.sampled_from([1, 3]),
    pad=st.integers(0, 2),
    pooling=st.sampled_from([None, "max", "avg"]),
    pool=st.integers(1, 3),
    pool_stride=st.integers(1, 3),
    hw=st.integers(4, 9),
    rounding=st.booleans(),
    **common,
)
def test_conv2d(
    cin,
    cout,
    k,
    pad,
    pooling,
    pool,
    pool_stride,
    hw,
    rounding,
    bits,
    shift,
    with_bias,
    activation,
    wide,
    seed,
) -> None:
    rng = np.random.default_rng(seed)
    if wide:
        activation = None
    layer = enn.Conv2d(
        cin,
        cout,
        k,
        padding=pad,
        pooling=pooling,
        pool_size=pool,
        pool_stride=pool_stride,
        activation=activation,
        wide=wide,
        bias=with_bias,
    )
    w, b = _params(rng, layer, bits, with_bias, cout)
    layer.set_integer_parameters(
        torch.from_numpy(w), None if b is None else torch.from_numpy(b), shift, bits
    )
    x = _ints(rng, -128, 127, (cin, hw, hw))
    data = x
    if pooling:
        data = ops.pool2d(
            x,
            (pool, pool),
            (pool_stride, pool_stride),
            average_pool=pooling == "avg",
            rounding=rounding,
        )
    assume(data.shape[1] + 2 * pad >= k)
    acc = ops.conv2d(data, w, None if b is None else b * 128, pad=(pad, pad))
    expected = _finish(acc, shift, activation, wide)
    np.testing.assert_array_equal(_run(layer, x, rounding=rounding), expected)


@SETTINGS
@given(
    cin=st.integers(1, 6),
    cout=st.integers(1, 6),
    k=st.integers(1, 9),
    pad=st.integers(0, 2),
    dilation=st.integers(1, 4),
    pooling=st.sampled_from([None, "max", "avg"]),
    pool=st.integers(1, 4),
    pool_stride=st.integers(1, 3),
    length=st.integers(8, 40),
    rounding=st.booleans(),
    **common,
)
def test_conv1d(
    cin,
    cout,
    k,
    pad,
    dilation,
    pooling,
    pool,
    pool_stride,
    length,
    rounding,
    bits,
    shift,
    with_bias,
    activation,
    wide,
    seed,
) -> None:
    rng = np.random.default_rng(seed)
    if wide:
        activation = None
    if (k - 1) * dilation >= 9 and (k > 3 or pad > 0):
        dilation = 1
    layer = enn.Conv1d(
        cin,
        cout,
        k,
        padding=pad,
        dilation=dilation,
        pooling=pooling,
        pool_size=pool,
        pool_stride=pool_stride,
        activation=activation,
        wide=wide,
        bias=with_bias,
    )
    w, b = _params(rng, layer, bits, with_bias, cout)
    layer.set_integer_parameters(
        torch.from_numpy(w), None if b is None else torch.from_numpy(b), shift, bits
    )
    x = _ints(rng, -128, 127, (cin, length))
    data = x
    if pooling:
        data = vendor_pool1d(x, pool, pool_stride, average_pool=pooling == "avg")
    assume(data.shape[1] + 2 * pad >= dilation * (k - 1) + 1)
    acc = ops.conv1d(data, w, None if b is None else b * 128, pad=pad, dilation=dilation)
    expected = _finish(acc, shift, activation, wide)
    np.testing.assert_array_equal(_run(layer, x, rounding=rounding), expected)


@SETTINGS
@given(
    cin=st.integers(1, 5),
    cout=st.integers(1, 5),
    pad=st.integers(0, 2),
    pooling=st.sampled_from([None, "max", "avg"]),
    hw=st.integers(2, 6),
    **common,
)
def test_conv_transpose2d(
    cin, cout, pad, pooling, hw, bits, shift, with_bias, activation, wide, seed
) -> None:
    rng = np.random.default_rng(seed)
    if wide:
        activation = None
    layer = enn.ConvTranspose2d(
        cin,
        cout,
        3,
        padding=pad,
        pooling=pooling,
        pool_size=2,
        pool_stride=2,
        activation=activation,
        wide=wide,
        bias=with_bias,
    )
    w, b = _params(rng, layer, bits, with_bias, cout)
    layer.set_integer_parameters(
        torch.from_numpy(w), None if b is None else torch.from_numpy(b), shift, bits
    )
    x = _ints(rng, -128, 127, (cin, 2 * hw, 2 * hw) if pooling else (cin, hw, hw))
    data = x
    if pooling:
        data = ops.pool2d(x, (2, 2), (2, 2), average_pool=pooling == "avg")
    # the simulator takes the kernel in convolution form: in/out swapped, flipped
    conv_form = np.flip(w.transpose(1, 0, 2, 3), axis=(2, 3))
    acc = ops.conv_transpose2d(
        data, np.ascontiguousarray(conv_form), None if b is None else b * 128, pad=(pad, pad)
    )
    expected = _finish(acc, shift, activation, wide)
    np.testing.assert_array_equal(_run(layer, x), expected)


@SETTINGS
@given(fin=st.integers(1, 64), fout=st.integers(1, 16), **common)
def test_linear(fin, fout, bits, shift, with_bias, activation, wide, seed) -> None:
    rng = np.random.default_rng(seed)
    if wide:
        activation = None
    layer = enn.Linear(fin, fout, activation=activation, wide=wide, bias=with_bias)
    w, b = _params(rng, layer, bits, with_bias, fout)
    layer.set_integer_parameters(
        torch.from_numpy(w), None if b is None else torch.from_numpy(b), shift, bits
    )
    x = _ints(rng, -128, 127, (fin,))
    acc = ops.conv2d(
        x.reshape(fin, 1, 1), w.reshape(fout, fin, 1, 1), None if b is None else b * 128
    )
    expected = _finish(acc, shift, activation, wide).reshape(fout)
    np.testing.assert_array_equal(_run(layer, x), expected)


@SETTINGS
@given(
    kind=st.sampled_from(["MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d"]),
    size=st.integers(1, 5),
    stride=st.integers(1, 5),
    channels=st.integers(1, 4),
    extent=st.integers(5, 17),
    rounding=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_pooling(kind, size, stride, channels, extent, rounding, seed) -> None:
    rng = np.random.default_rng(seed)
    layer = getattr(enn, kind)(size, stride)
    one_d = kind.endswith("1d")
    avg = kind.startswith("Avg")
    if one_d:
        x = _ints(rng, -128, 127, (channels, extent))
        expected = vendor_pool1d(x, size, stride, average_pool=avg)
    else:
        x = _ints(rng, -128, 127, (channels, extent, extent + 1))
        expected = ops.pool2d(
            x, (size, size), (stride, stride), average_pool=avg, rounding=rounding
        )
    np.testing.assert_array_equal(_run(layer, x, rounding=rounding), expected)


@SETTINGS
@given(
    kind=st.sampled_from(["Add", "Sub", "BitwiseOr", "BitwiseXor"]),
    operands=st.integers(2, 16),
    seed=st.integers(0, 2**31),
)
def test_eltwise(kind, operands, seed) -> None:
    rng = np.random.default_rng(seed)
    xs = [_ints(rng, -128, 127, (3, 4, 5)) for _ in range(operands)]
    op = {"Add": "add", "Sub": "sub", "BitwiseOr": "or", "BitwiseXor": "xor"}[kind]
    expected = ops.clip8(ops.eltwise(op, xs))
    layer = getattr(enn, kind)()
    with enn.use(simulate=True):
        y = layer(*[torch.from_numpy(x).double() for x in xs])
    np.testing.assert_array_equal(y.numpy().astype(np.int64), expected)


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_depthwise_on_max78002_only(device: str) -> None:
    rng = np.random.default_rng(1)
    with enn.use(device):
        if device == "MAX78000":
            with pytest.raises(EdgesynthError, match="depthwise"):
                enn.Conv2d(4, 4, 3, groups=4)
            return
        layer = enn.FusedConv2dReLU(4, 4, 3, groups=4, padding=1)
    w = _ints(rng, -128, 127, (4, 1, 3, 3))
    layer.set_integer_parameters(torch.from_numpy(w), None, 2)
    x = _ints(rng, -128, 127, (4, 6, 6))
    expected = ops.activate(ops.requantize(ops.conv2d(x, w, pad=(1, 1), groups=4), 2), "relu")
    np.testing.assert_array_equal(_run(layer, x, device), expected)
