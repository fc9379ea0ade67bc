"""Exact arithmetic on ONNX values before they become graph operators.

The integer dialects spell one requantization as a chain of elementwise ONNX nodes (NEMO:
`Mul(kappa) Add(lambda) Cast Mul(m) Div(D) Cast Clip`; Quantlab: `Mul Add Div Floor Clip`).
Each such value is kept as a `Sym`: an exact rational function of graph tensors,

    value = clip(R((sum_k tensor_k * mul_k + add) / div), lo, hi)

with R the rounding the chain asked for (None while the value is still exact). Only when a
value is consumed by something other than elementwise arithmetic (a convolution, a pooling, a
graph output) is it written into the graph (`Builder.materialize`): as one `Requantize` for a
single tensor, or per-term scalings + `Eltwise(add)` + `Requantize` for a sum. All arithmetic is
on Python integers, so nothing is rounded or wrapped before the graph says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from math import gcd

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.rounding import divide

WIDE = 1 << 62  # clip bounds of a Requantize that does not clip


def as_object(a: np.ndarray | int) -> np.ndarray:
    """An integer array (or scalar) as an object array of Python ints (exact, never wraps)."""
    arr = np.asarray(a)
    if arr.dtype == object:
        return arr
    return np.vectorize(int, otypes=[object])(arr) if arr.size else arr.astype(object)


def simplify(v: np.ndarray) -> np.ndarray | int:
    """A per-channel array whose entries are all equal becomes that scalar; int64 when it fits."""
    arr = np.asarray(v, dtype=object)
    if arr.ndim == 0:
        return int(arr)
    if arr.size and all(x == arr.flat[0] for x in arr.flat):
        return int(arr.flat[0])
    if all(-(1 << 63) <= int(x) < (1 << 63) for x in arr.flat):
        return arr.astype(np.int64)
    return arr


@dataclass
class Term:
    tensor: str
    mul: np.ndarray  # object array: shape () or (C,)


@dataclass
class Sym:
    """A value of the ONNX graph not yet written as graph operators (see the module doc)."""

    terms: list[Term]
    add: np.ndarray  # object array: shape () or (C,)
    div: int
    shape: tuple[int, ...]  # per sample
    integer_domain: bool  # the ONNX element type is an integer type (Div truncates)
    onnx_name: str  # the ONNX tensor this value is
    nodes: list[str] = field(default_factory=list)  # ONNX nodes folded into it
    rounding: str | None = None
    lo: int | None = None
    hi: int | None = None
    pads: tuple[int, ...] | None = None  # a pending zero `Pad` (spatial before..., after...)
    origin: str | None = None  # the ONNX node that added the terms (a sum's name)

    @property
    def closed(self) -> bool:
        """Rounded or clipped: further arithmetic needs the value written first."""
        return self.rounding is not None or self.lo is not None or self.hi is not None

    @property
    def is_bare(self) -> bool:
        """Exactly one graph tensor, unchanged."""
        return (
            len(self.terms) == 1
            and _is_one(self.terms[0].mul)
            and _is_zero(self.add)
            and self.div == 1
            and not self.closed
        )

    @property
    def channels(self) -> int:
        return self.shape[0] if self.shape else 1


def _is_one(v: np.ndarray) -> bool:
    return all(x == 1 for x in np.asarray(v, dtype=object).flat)


def _is_zero(v: np.ndarray) -> bool:
    return all(x == 0 for x in np.asarray(v, dtype=object).flat)


def bare(tensor: str, shape: tuple[int, ...], integer_domain: bool, onnx_name: str) -> Sym:
    one = np.asarray(1, dtype=object)
    zero = np.asarray(0, dtype=object)
    return Sym([Term(tensor, one)], zero, 1, tuple(shape), integer_domain, onnx_name)


def rational(value: float, what: str) -> Fraction:
    """A float constant as the exact fraction it stores; refuse huge denominators."""
    f = Fraction(float(value))
    if f.denominator >= 1 << 32:
        raise EdgesynthError(f"{what}: the constant {value!r} is not a ratio of integers")
    return f


def scale(s: Sym, factor: np.ndarray | Fraction, node: str) -> Sym:
    """s * factor (factor: an integer per-channel object array, or a scalar fraction)."""
    if isinstance(factor, Fraction):
        num, den = factor.numerator, factor.denominator
        terms = [Term(t.tensor, t.mul * num) for t in s.terms]
        return replace(s, terms=terms, add=s.add * num, div=s.div * den, nodes=[*s.nodes, node])
    terms = [Term(t.tensor, _broadcast_mul(t.mul, factor)) for t in s.terms]
    return replace(s, terms=terms, add=_broadcast_mul(s.add, factor), nodes=[*s.nodes, node])


def _broadcast_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.asarray(a, dtype=object) * np.asarray(b, dtype=object), dtype=object)


def offset(s: Sym, const: np.ndarray | Fraction, node: str) -> Sym:
    """s + const."""
    if isinstance(const, Fraction):
        num, den = const.numerator, const.denominator
        terms = [Term(t.tensor, t.mul * den) for t in s.terms]
        add = s.add * den + num * s.div
        return replace(s, terms=terms, add=add, div=s.div * den, nodes=[*s.nodes, node])
    add = np.asarray(s.add + np.asarray(const, dtype=object) * s.div, dtype=object)
    return replace(s, add=add, nodes=[*s.nodes, node])


def combine(a: Sym, b: Sym, sign: int, node: str, onnx_name: str) -> Sym:
    """a + b (sign 1) or a - b (sign -1), both open, exactly."""
    terms = [Term(t.tensor, t.mul * b.div) for t in a.terms]
    terms += [Term(t.tensor, t.mul * a.div * sign) for t in b.terms]
    add = np.asarray(a.add * b.div + b.add * a.div * sign, dtype=object)
    return Sym(
        terms,
        add,
        a.div * b.div,
        a.shape,
        a.integer_domain and b.integer_domain,
        onnx_name,
        [*a.nodes, *b.nodes, node],
        origin=node,
    )


def reduce(s: Sym) -> Sym:
    """Divide every multiplier, the offset and the divisor by their common factor (exact)."""
    common = s.div
    for t in s.terms:
        for x in np.asarray(t.mul, dtype=object).flat:
            common = gcd(common, int(x))
    for x in np.asarray(s.add, dtype=object).flat:
        common = gcd(common, int(x))
    if common <= 1:
        return s
    terms = [Term(t.tensor, np.asarray(t.mul // common, dtype=object)) for t in s.terms]
    return replace(
        s, terms=terms, add=np.asarray(s.add // common, dtype=object), div=s.div // common
    )


# -- integer ranges -----------------------------------------------------------------------------


def qtype_for(lo: int, hi: int, where: str) -> g.QType:
    """The narrowest integer type holding [lo, hi]."""
    if lo >= 0:
        bits = max(1, int(hi).bit_length())
        signed = False
    else:
        bits = 1 + max(int(-lo - 1).bit_length(), int(hi).bit_length() if hi > 0 else 0)
        signed = True
    if bits > 64:
        raise EdgesynthError(f"{where}: values reach {lo}..{hi}, beyond 64 bits")
    return g.QType(bits, signed)


def requantize_range(
    lo: int,
    hi: int,
    mul: np.ndarray | int,
    add: np.ndarray | int,
    div: int,
    rounding: str,
    clip_lo: int,
    clip_hi: int,
) -> tuple[int, int]:
    """The range of clip(R((x*mul + add)/div)) for x in [lo, hi] (R is monotone)."""
    m = np.atleast_1d(np.asarray(mul, dtype=object))
    a = np.atleast_1d(np.asarray(add, dtype=object))
    ends = [lo * m + a, hi * m + a]
    nmin = min(min(e.flat) for e in ends)
    nmax = max(max(e.flat) for e in ends)
    qlo = int(divide(nmin, div, rounding))
    qhi = int(divide(nmax, div, rounding))
    return max(qlo, clip_lo), min(qhi, clip_hi)
