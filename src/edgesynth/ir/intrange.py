"""Integer ranges, written once: what a `bits`-wide integer holds, and what a convolution's (or
a fully connected layer's) accumulator can reach over inputs in a range.

Used by the graph's types (`QType.lo`/`hi`), the targets' storage types and host-side
quantization, and the range analyses that choose accumulator widths (the integer ONNX front
end, the PULP lowering).
"""

from __future__ import annotations

import numpy as np


def int_range(bits: int, signed: bool) -> tuple[int, int]:
    """The smallest and largest value of a `bits`-wide integer (two's complement if `signed`)."""
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def accumulator_range(
    weight: np.ndarray, bias: np.ndarray | None, lo: int, hi: int, padded: bool
) -> tuple[int, int]:
    """The smallest and largest value, over all output channels, of sum(w * x) + bias for
    inputs x in [lo, hi] (`weight` has the output channels first; with `padded`, zeros are
    inputs too). Exact: computed with Python integers."""
    if padded:
        lo, hi = min(lo, 0), max(hi, 0)
    w = weight.reshape(weight.shape[0], -1)
    if not _fits_int64(w, bias, lo, hi):
        w = w.astype(object)
    pos = np.where(w > 0, w, 0).sum(axis=1)
    neg = np.where(w < 0, w, 0).sum(axis=1)
    top, bottom = pos * hi + neg * lo, pos * lo + neg * hi
    if bias is not None:
        b = bias.astype(top.dtype)
        top, bottom = top + b, bottom + b
    return int(min(bottom)), int(max(top))


def _fits_int64(w: np.ndarray, bias: np.ndarray | None, lo: int, hi: int) -> bool:
    """Whether every partial sum of the accumulator bound stays far inside int64 (then NumPy's
    int64 arithmetic is exact and much faster than Python integers)."""
    if w.dtype.kind not in "iu" or (bias is not None and bias.dtype.kind not in "iu"):
        return False
    if w.size == 0:
        return True
    limit = 1 << 62
    largest_w = max(abs(int(w.min())), abs(int(w.max())))
    if largest_w * w.shape[1] >= limit:
        return False
    largest_x = max(abs(lo), abs(hi))
    largest_b = (
        0 if bias is None or bias.size == 0 else max(abs(int(bias.min())), abs(int(bias.max())))
    )
    return largest_w * w.shape[1] * largest_x + largest_b < limit
