"""The CPU part's convolution and pooling in NumPy (int64, exact), on batches (N, C, H, W):
part of the reference `simulate` is (the generated C loops over the same windows)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edgesynth.targets.max7800x.cpu.program import CpuLayer


def _windows(x: np.ndarray, layer: CpuLayer):  # type: ignore[no-untyped-def]
    """(kernel row, kernel column, the input values that tap reads for every output)."""
    top, left, bottom, right = layer.pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    (sh, sw), (dh, dw) = layer.stride, layer.dilation
    _, oh, ow = layer.out_shape
    for i in range(layer.kernel[0]):
        for j in range(layer.kernel[1]):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            yield i, j, xp[:, :, rows, cols]


def conv2d(layer: CpuLayer, x: np.ndarray) -> np.ndarray:
    """The accumulators (N, O, OH, OW): bias + the sum over the window and the group's inputs.
    A transposed convolution (`convt`) is the convolution with stride 1 of the input zero-stuffed
    by its `stride` (its weight is in convolution form)."""
    assert layer.weight is not None and layer.bias is not None
    if layer.kind == "convt":
        (sh, sw), (n, c, h, w) = layer.stride, x.shape
        stuffed = np.zeros((n, c, (h - 1) * sh + 1, (w - 1) * sw + 1), np.int64)
        stuffed[:, :, ::sh, ::sw] = x
        x, layer = stuffed, replace(layer, stride=[1, 1])
    w = np.asarray(layer.weight, np.int64)
    out_c, per_group = w.shape[0], w.shape[1]
    per_out = out_c // layer.groups
    acc = np.zeros((len(x), out_c, *layer.out_shape[1:]), np.int64)
    for i, j, tap in _windows(x, layer):
        for grp in range(layer.groups):
            o = slice(grp * per_out, (grp + 1) * per_out)
            c = slice(grp * per_group, (grp + 1) * per_group)
            acc[:, o] += np.einsum("nchw,oc->nohw", tap[:, c], w[o, :, i, j])
    return acc + np.asarray(layer.bias, np.int64)[None, :, None, None]


def pool2d(layer: CpuLayer, x: np.ndarray) -> np.ndarray:
    """Max, or the window's sum (the average's requantization is the caller's)."""
    taps = [tap for _, _, tap in _windows(x, layer)]
    return np.max(taps, axis=0) if layer.pool == "max" else np.sum(taps, axis=0)
