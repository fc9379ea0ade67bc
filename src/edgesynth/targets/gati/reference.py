"""edgesynth's integer reference of a quantized Gati network: plain NumPy on NCHW tensors.

Written from the quantized IR and the documented tail semantics only; it never looks at
instructions, DRAM layouts or tiles (that is what the functional model does), so equality
between the two is evidence that the compiler and the functional model agree with the
documentation. Matrix products run in float64 and are exact: every partial sum is an integer
far below 2**53.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from edgesynth.ir.network import Layer
from edgesynth.targets.gati import hw, isa
from edgesynth.targets.gati.model import GatiLayer, GatiModel
from edgesynth.targets.gati.onnx_import import pool_out

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _exact_int(a: np.ndarray) -> np.ndarray:
    assert np.abs(a).max(initial=0) < 2.0**52
    return np.rint(a).astype(np.int64)


def _side_pads(amount: int, sides: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from a pad amount and a PadSides bit vector."""
    return (
        amount if sides & isa.PAD_TOP else 0,
        amount if sides & isa.PAD_LEFT else 0,
        amount if sides & isa.PAD_BOTTOM else 0,
        amount if sides & isa.PAD_RIGHT else 0,
    )


def conv(x: np.ndarray, layer: Layer, g: GatiLayer) -> np.ndarray:
    """Integer convolution, tap by tap: sum over (i, j) of shifted input slices x weights."""
    assert layer.weights is not None
    w = layer.weights.astype(np.float64)
    kh, kw = layer.kernel_size
    s = layer.stride[0]
    top, left, bottom, right = _side_pads(g.pad, g.pad_sides)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh, ow = layer.out_dim
    acc = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            sl = xp[:, :, i : i + (oh - 1) * s + 1 : s, j : j + (ow - 1) * s + 1 : s]
            acc += np.einsum("bchw,oc->bohw", sl, w[:, :, i, j], optimize=True)
    return _exact_int(acc)


def requantize(acc: np.ndarray, scale: int, shift: int) -> np.ndarray:
    """(acc * scale) / 2**shift rounded half up, saturated to int8."""
    prod = acc.astype(np.int64) * scale
    if shift:
        prod = (prod + (1 << (shift - 1))) >> shift
    return np.clip(prod, INT8_MIN, INT8_MAX)


def lookup_activation(q: np.ndarray, kind: str, exponent: int) -> np.ndarray:
    v = q.astype(np.float64) * 2.0**-exponent
    f = 1.0 / (1.0 + np.exp(-v)) if kind == "sigmoid" else np.tanh(v)
    out = np.floor(f * 2.0**hw.ACT_OUT_FRACTION_BITS + 0.5)
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int64)


def tree_average(values: list[np.ndarray]) -> np.ndarray:
    """Gati's pairwise-average tree: pair averages of consecutive inputs (an odd last input
    passes as is) enter a FIFO; the two oldest entries are averaged and the result re-queued
    until one value is left. Each average is (a + b) >> 1."""
    fifo: deque[np.ndarray] = deque()
    for k in range(0, len(values) - 1, 2):
        fifo.append((values[k] + values[k + 1]) >> 1)
    if len(values) % 2:
        fifo.append(values[-1])
    while len(fifo) > 1:
        a = fifo.popleft()
        b = fifo.popleft()
        fifo.append((a + b) >> 1)
    return fifo[0]


def pool(x: np.ndarray, layer: Layer, g: GatiLayer) -> np.ndarray:
    b, c, h, w = x.shape
    if g.pool_global:
        kh, kw, s = h, w, 1
        top = left = bottom = right = 0
        ceil = False
    else:
        kh, kw = layer.pool
        s = layer.pool_stride[0]
        top, left, bottom, right = _side_pads(g.pool_pad, g.pool_pad_sides)
        ceil = g.pool_ceil
    oh = pool_out(h, kh, s, top, bottom, ceil)
    ow = pool_out(w, kw, s, left, right, ceil)
    # zero padding, also for ceil-mode windows running past the input
    ph = max((oh - 1) * s + kh - h - top, 0)
    pw = max((ow - 1) * s + kw - w - left, 0)
    xp = np.pad(x, ((0, 0), (0, 0), (top, ph), (left, pw)))
    out = np.zeros((b, c, oh, ow), dtype=np.int64)
    for r in range(oh):
        for q in range(ow):
            win = xp[:, :, r * s : r * s + kh, q * s : q * s + kw]
            if layer.pool_type == "max":
                out[:, :, r, q] = np.maximum(
                    win.max(axis=(2, 3)), 0
                )  # the max register starts at 0
            else:
                rows = [tree_average([win[:, :, i, j] for j in range(kw)]) for i in range(kh)]
                out[:, :, r, q] = tree_average(rows)
    return out


def layer_forward(x: np.ndarray, layer: Layer, g: GatiLayer) -> np.ndarray:
    if layer.operation == "conv2d":
        acc = conv(x, layer, g)
    elif layer.operation == "linear":
        assert layer.weights is not None
        flat = x.reshape(x.shape[0], -1).astype(np.float64)
        acc = _exact_int(flat @ layer.weights.T.astype(np.float64))
    else:
        acc = x.astype(np.int64)
    if layer.bias is not None:
        shape = (1, -1) + (1,) * (acc.ndim - 2)
        acc = acc + layer.bias.reshape(shape)
    assert np.abs(acc).max(initial=0) <= INT32_MAX
    if g.quant_en:
        y = requantize(acc, g.quant_scale, g.quant_shift)
    else:
        y = acc
    if layer.activation == "relu":
        y = np.maximum(y, 0)
    elif layer.activation in ("sigmoid", "tanh"):
        y = lookup_activation(y, layer.activation, g.act_param)
    if layer.pool_type is not None:
        y = pool(y, layer, g)
    return y


def reference_layers(model: GatiModel, xq: np.ndarray) -> list[np.ndarray]:
    """Every layer's integer output (NCHW or (B, F)) for an int8 input batch."""
    h = np.asarray(xq).astype(np.int64)
    outs = []
    for layer, g in model.pairs():
        h = layer_forward(h, layer, g)
        outs.append(h)
    return outs


def reference_forward(model: GatiModel, xq: np.ndarray) -> np.ndarray:
    """The last layer's integer output for an int8 input batch."""
    return reference_layers(model, xq)[-1]
