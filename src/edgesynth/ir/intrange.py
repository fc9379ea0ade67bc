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
    w = weight.reshape(weight.shape[0], -1).astype(object)
    pos = np.where(w > 0, w, 0).sum(axis=1)
    neg = np.where(w < 0, w, 0).sum(axis=1)
    top, bottom = pos * hi + neg * lo, pos * lo + neg * hi
    if bias is not None:
        top, bottom = top + bias.astype(object), bottom + bias.astype(object)
    return int(min(bottom)), int(max(top))
