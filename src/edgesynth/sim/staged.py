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


def wrap(x: np.ndarray, bits: int, *, out: np.ndarray | None = None) -> np.ndarray:
    """Keep the low `bits` bits, read as two's complement (into `out`, an int64 array of the
    same shape, when given)."""
    top = np.int64(1) << np.int64(bits - 1)
    out = np.add(np.asarray(x, dtype=np.int64), top, out=out)
    np.bitwise_and(out, (top << 1) - 1, out=out)
    return np.subtract(out, top, out=out)


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
    """The pipeline above on int64 data; per-channel parameters run along `channel_axis`. One
    new array (`acc` is not changed), each stage computed into it."""
    a = np.asarray(acc, dtype=np.int64)
    nd = a.ndim
    p, s, q, b = (_per_channel(v, nd, channel_axis) for v in (pre, scale, post, bias))
    x = wrap(a, acc_bits) if acc_bits < 64 else a.copy()
    top = 1 << (bits - 1)
    np.right_shift(x, p, out=x)
    np.clip(x, -top, top - 1, out=x)
    np.multiply(x, s, out=x)
    np.right_shift(x, q, out=x)
    wrap(x, bits, out=x)
    np.add(x, b, out=x)
    np.clip(x, -top, top - 1, out=x)
    if lo is not None or hi is not None:
        np.clip(x, lo, hi, out=x)
    return x
