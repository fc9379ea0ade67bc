"""Exact integer division with a named rounding, and the requantization every target shares.

All functions take integer NumPy arrays (or Python ints) and compute with exact integers: int64
where the operands provably fit, Python integers (object arrays) beyond that, so a 64-bit
intermediate such as NEMO's kappa x accumulator + lambda is never wrapped.
"""

from __future__ import annotations

import numpy as np

ROUNDING_MODES = ("floor", "trunc", "half_up", "half_away", "half_even")
_SAFE = 1 << 62


def _as_int(x: np.ndarray | int) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == object or a.dtype == np.uint64:  # Python ints beyond int64
        return a.astype(object)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"exact integer arithmetic needs integers, not {a.dtype}")
    return a.astype(np.int64, copy=False)


def _bound(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    if a.dtype == object:
        return int(max(abs(int(v)) for v in a.flat))
    return int(np.abs(a.astype(np.int64)).max())


def _widen(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(a.astype(object) for a in arrays)


def divide(num: np.ndarray | int, den: np.ndarray | int, mode: str) -> np.ndarray:
    """num / den rounded as `mode` says, exactly. `den` must be positive.

    floor: toward -inf; trunc: toward zero; half_up: nearest, ties toward +inf; half_away:
    nearest, ties away from zero; half_even: nearest, ties to the even quotient.
    """
    if mode not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, not {mode!r}")
    n, d = _as_int(num), _as_int(den)
    if np.any(d <= 0):
        raise ValueError("the divisor must be positive")
    if max(_bound(n), 1) * 2 + _bound(d) * 2 >= _SAFE:
        n, d = _widen(n, d)
    if mode == "floor":
        q = n // d
    elif mode == "trunc":
        q = np.sign(n) * (abs(n) // d)
    elif mode == "half_up":
        q = (2 * n + d) // (2 * d)
    elif mode == "half_away":
        q = np.sign(n) * ((2 * abs(n) + d) // (2 * d))
    else:  # half_even
        q = n // d
        r2 = 2 * (n - q * d)
        q = q + ((r2 > d) | ((r2 == d) & (q % 2 == 1)))
    return q


def requantize(
    x: np.ndarray,
    *,
    mul: np.ndarray | int = 1,
    add: np.ndarray | int = 0,
    div: np.ndarray | int = 1,
    rounding: str = "half_up",
    lo: int = -128,
    hi: int = 127,
    channel_axis: int = 0,
) -> np.ndarray:
    """clip(R((x * mul + add) / div), lo, hi), exactly; per-channel `mul`/`add`/`div` arrays run
    along `channel_axis` of `x`."""
    a = _as_int(x)

    def per_channel(v: np.ndarray | int) -> np.ndarray:
        v = _as_int(v)
        if v.ndim == 0:
            return v
        shape = [1] * a.ndim
        shape[channel_axis] = -1
        return v.reshape(shape)

    m, b, d = per_channel(mul), per_channel(add), per_channel(div)
    if _bound(a) * max(_bound(m), 1) + _bound(b) >= _SAFE:
        a, m, b = _widen(a, m, b)
    q = divide(a * m + b, d, rounding)
    return np.clip(q, lo, hi).astype(np.int64)


def shift_requantize(acc: np.ndarray, shift: int, bits: int = 8) -> np.ndarray:
    """A power-of-two requantization, acc x 2**shift rounded half up to `bits` (signed)."""
    mul, div = (1 << shift, 1) if shift >= 0 else (1, 1 << -shift)
    top = 1 << (bits - 1)
    a = np.asarray(acc)
    if a.size and a.dtype.kind in "iu" and a.dtype != np.uint64:
        bound = max(-int(a.min()), int(a.max()))
        if (bound << max(shift, 0)) + div < _SAFE:  # int64 holds every intermediate
            # x * 2**s; or (2x + d) // 2d = (x + d/2) >> k for d = 2**k (arithmetic shift), in
            # one new int64 array (a large layer's accumulators are tens of MB: each copy costs)
            if shift >= 0:
                q = np.left_shift(a, shift, dtype=np.int64)
            else:
                q = np.add(a, div >> 1, dtype=np.int64)
                np.right_shift(q, -shift, out=q)
            return np.clip(q, -top, top - 1, out=q)
    return requantize(acc, mul=mul, div=div, rounding="half_up", lo=-top, hi=top - 1)
