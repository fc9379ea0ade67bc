"""NumPy float evaluation of an imported graph (what ONNX Runtime computes), for calibration.

Evaluates the fused layers with ONNX semantics: convolution, bias, activation, pooling (exact
averages, -inf padding for max). `float_forward` returns every layer's output, and the largest
magnitude before the activation (for sigmoid/tanh input scaling).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from edgesynth.targets.gati.chain import FusedLayer, LayerChain, PoolSpec


def _windows(
    x: np.ndarray,
    k: tuple[int, int],
    s: tuple[int, int],
    pads: tuple[int, int, int, int],
    out_hw: tuple[int, int],
    fill: float,
) -> np.ndarray:
    """(B, C, OH, OW, kh, kw) windows of a padded (B, C, H, W) tensor."""
    t, left, b, r = pads
    oh, ow = out_hw
    need_h = (oh - 1) * s[0] + k[0]
    need_w = (ow - 1) * s[1] + k[1]
    h, w = x.shape[2], x.shape[3]
    extra_b = max(need_h - (h + t + b), 0)
    extra_r = max(need_w - (w + left + r), 0)
    xp = np.pad(x, ((0, 0), (0, 0), (t, b + extra_b), (left, r + extra_r)), constant_values=fill)
    win = sliding_window_view(xp, k, axis=(2, 3))
    return win[:, :, : need_h - k[0] + 1 : s[0], : need_w - k[1] + 1 : s[1]]


def conv2d(x: np.ndarray, layer: FusedLayer) -> np.ndarray:
    assert layer.weight is not None and layer.bias is not None
    _, oh, ow = layer.conv_shape
    kh, kw = layer.weight.shape[2:]
    win = _windows(x, (kh, kw), layer.strides, layer.pads, (oh, ow), 0.0)
    y = np.einsum("bchwij,ocij->bohw", win, layer.weight, optimize=True)
    return y + layer.bias[None, :, None, None]


def pool2d(x: np.ndarray, pool: PoolSpec) -> np.ndarray:
    if pool.type == "global_avg":
        return x.mean(axis=(2, 3), keepdims=True)
    if pool.type == "max":
        win = _windows(x, pool.kernel, pool.strides, pool.pads, pool.out_hw, -np.inf)
        return win.max(axis=(4, 5))
    win = _windows(x, pool.kernel, pool.strides, pool.pads, pool.out_hw, 0.0)
    ones = np.ones((1, 1, *x.shape[2:]))
    if pool.count_include_pad:
        t, left, b, r = pool.pads
        ones = np.pad(ones, ((0, 0), (0, 0), (t, b), (left, r)), constant_values=1.0)
        count = _windows(ones, pool.kernel, pool.strides, (0, 0, 0, 0), pool.out_hw, 0.0)
    else:
        count = _windows(ones, pool.kernel, pool.strides, pool.pads, pool.out_hw, 0.0)
    return win.sum(axis=(4, 5)) / count.sum(axis=(4, 5))


def activate(x: np.ndarray, kind: str | None) -> np.ndarray:
    if kind == "relu":
        return np.maximum(x, 0.0)
    if kind == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if kind == "tanh":
        return np.tanh(x)
    return x


def layer_forward(x: np.ndarray, layer: FusedLayer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pre-activation, activation before pooling, output) of one layer for a float batch."""
    if layer.kind == "conv":
        pre = conv2d(x, layer)
    elif layer.kind == "linear":
        assert layer.weight is not None and layer.bias is not None
        pre = x.reshape(x.shape[0], -1) @ layer.weight.T + layer.bias
    else:
        pre = x
    act = activate(pre, layer.activation)
    y = pool2d(act, layer.pool) if layer.pool is not None else act
    return pre, act, y


def iter_layers(
    graph: LayerChain, x: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    h = np.asarray(x, dtype=np.float64)
    for layer in graph.layers:
        pre, act, h = layer_forward(h, layer)
        yield pre, act, h


def float_forward(graph: LayerChain, x: np.ndarray) -> np.ndarray:
    """The graph's float output for a batch (host post-processing included)."""
    outs = [y for _, _, y in iter_layers(graph, x)]
    out = outs[-1].reshape(outs[-1].shape[0], *graph.output_shape)
    if graph.host_post is None:
        return out
    return host_post(graph.host_post, out.reshape(out.shape[0], -1))


def host_post(kind: str | None, y: np.ndarray) -> np.ndarray:
    if kind is None:
        return y
    z = y - y.max(axis=1, keepdims=True)
    if kind == "logsoftmax":
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def calibration_ranges(
    graph: LayerChain, x: np.ndarray, chunk: int = 128
) -> tuple[float, list[float], list[float]]:
    """(max |input|, per-layer max |pre-activation|, per-layer max |activation|).

    The activation is taken before pooling: that is where the tail block quantizes."""
    n = len(graph.layers)
    pre_max, act_max = [0.0] * n, [0.0] * n
    for start in range(0, x.shape[0], chunk):
        for i, (pre, act, _) in enumerate(iter_layers(graph, x[start : start + chunk])):
            pre_max[i] = max(pre_max[i], float(np.abs(pre).max(initial=0.0)))
            act_max[i] = max(act_max[i], float(np.abs(act).max(initial=0.0)))
    return float(np.abs(x).max(initial=0.0)), pre_max, act_max
