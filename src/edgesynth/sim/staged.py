"""Staged fixed-point requantization: shifts, a narrow multiplier and saturations in between,
as a DSP pipeline computes it (Xilinx xDNN's stages after the systolic array).

    acc  -> wrap to `acc_bits`                         (the accumulator)
         -> >> pre, saturate to `bits`                  (pre-scale right shift)
         -> x scale                                     (unsigned multiplier, exact)
         -> >> post, keep the low `bits` (wrap)         (post-scale right shift)
         -> + bias, saturate to `bits`                  (bias)
         -> clip to [lo, hi]                            (the stored range, e.g. 8-bit values)

Every shift is arithmetic (toward minus infinity); nothing rounds. `Requantize` cannot say this:
it has one rounding and one clip at the end, while here a saturation and a wrap sit between
the stages.
"""

from __future__ import annotations

import numpy as np


def _per_channel(v: np.ndarray | int, ndim: int, axis: int) -> np.ndarray:
    a = np.asarray(v, dtype=np.int64)
    if a.ndim == 0:
        return a
    shape = [1] * ndim
    shape[axis] = -1
    return a.reshape(shape)


def wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Keep the low `bits` bits, read as two's complement."""
    top = np.int64(1) << np.int64(bits - 1)
    return ((np.asarray(x, dtype=np.int64) + top) & ((top << 1) - 1)) - top


def saturate(x: np.ndarray, bits: int) -> np.ndarray:
    top = 1 << (bits - 1)
    return np.clip(x, -top, top - 1)


def shift_scale_bias(
    acc: np.ndarray,
    *,
    pre: np.ndarray | int,
    scale: np.ndarray | int,
    post: np.ndarray | int,
    bias: np.ndarray | int = 0,
    bits: int = 16,
    acc_bits: int = 48,
    lo: int | None = None,
    hi: int | None = None,
    channel_axis: int = 1,
) -> np.ndarray:
    """The pipeline above on int64 data; per-channel parameters run along `channel_axis`."""
    a = np.asarray(acc, dtype=np.int64)
    nd = a.ndim
    p, s, q, b = (_per_channel(v, nd, channel_axis) for v in (pre, scale, post, bias))
    if acc_bits < 64:
        a = wrap(a, acc_bits)
    x = saturate(a >> p, bits)
    x = wrap((x * s) >> q, bits)
    x = saturate(x + b, bits)
    if lo is not None or hi is not None:
        x = np.clip(x, lo, hi)
    return x.astype(np.int64)
