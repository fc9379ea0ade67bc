"""Handlers of element-wise ONNX arithmetic, folded into pending `Sym` values: Mul, Add, Sub,
Div (truncating on integer tensors, exact on float ones), Floor, Round, Cast, Clip, Relu,
Identity. An addition of two activations becomes a sum of terms (or Quantlab's addition when its
node carries the requantization attributes); a product of two activations a graph operator."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edgesynth.frontends.onnx_int import symbolic as sy
from edgesynth.frontends.onnx_int.builder import FLOAT_TYPES, INT_TYPES, Builder
from edgesynth.frontends.onnx_int.ops_dialects import quantlab_add
from edgesynth.frontends.onnx_int.reader import OnnxNode
from edgesynth.frontends.onnx_int.symbolic import Sym
from edgesynth.ir import graph as g


def mul(b: Builder, node: OnnxNode) -> None:
    left, right = b.value(node, 0), b.value(node, 1)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        b.set(node, np.asarray(left * right))
        return
    if isinstance(left, Sym) and isinstance(right, Sym):
        _product(b, node)
        return
    s, c = (left, right) if isinstance(left, Sym) else (right, left)
    s = b.open(s, node)
    factor = b.per_channel(node, c, s)
    out = sy.scale(s, factor, node.name)
    out.integer_domain = s.integer_domain and np.issubdtype(np.asarray(c).dtype, np.integer)
    out.onnx_name = node.outputs[0]
    b.set(node, out)


def _product(b: Builder, node: OnnxNode) -> None:
    """The element-wise product of two activations of one shape: a graph operator."""
    (x, xs), (y, ys) = b.tensor_of(node, 0), b.tensor_of(node, 1)
    if xs.shape != ys.shape:
        raise b.fail(node, f"multiplies {xs.shape} and {ys.shape}: broadcasting is not supported")
    ends = [p * q for p in b.ranges[x] for q in b.ranges[y]]
    name = b.graph.unique_name(node.outputs[0])
    op = g.Eltwise(name=node.name, inputs=[x, y], outputs=[name], source=node.name, kind="mul")
    out = b.add_node(op, xs.shape, min(ends), max(ends))
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, xs.shape, True, node.outputs[0]))


def _add_sub(b: Builder, node: OnnxNode, sign: int) -> None:
    left, right = b.value(node, 0), b.value(node, 1)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        b.set(node, np.asarray(left + sign * right))
        return
    if isinstance(left, Sym) and isinstance(right, Sym):
        if any(k.startswith("in1_") for k in node.attrs):
            quantlab_add(b, node)
            return
        a, c = b.open(left, node), b.open(right, node)
        if a.shape != c.shape:
            raise b.fail(node, f"adds {a.shape} and {c.shape}: broadcasting is not supported")
        b.set(node, sy.combine(a, c, sign, node.name, node.outputs[0]))
        return
    if isinstance(left, Sym):
        s = b.open(left, node)
        const = b.per_channel(node, right, s)
        if sign < 0:
            const = -const
    else:
        s = b.open(right, node)
        if sign < 0:
            s = sy.scale(s, np.asarray(-1, dtype=object), node.name)
        const = b.per_channel(node, left, s)
    out = sy.offset(s, const, node.name)
    out.onnx_name = node.outputs[0]
    b.set(node, out)


def add(b: Builder, node: OnnxNode) -> None:
    _add_sub(b, node, 1)


def sub(b: Builder, node: OnnxNode) -> None:
    _add_sub(b, node, -1)


def div(b: Builder, node: OnnxNode) -> None:
    left, right = b.value(node, 0), b.value(node, 1)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        b.set(node, np.asarray(left / right))
        return
    if not isinstance(left, Sym) or isinstance(right, Sym):
        raise b.fail(node, "only activations divided by a constant are supported")
    d = np.asarray(right)
    if d.size != 1:
        raise b.fail(node, "division by a per-channel constant is not supported")
    s = b.open(left, node)
    value = d.reshape(()).item()
    f = sy.rational(value, f"ONNX node {node.name}")
    if f <= 0:
        raise b.fail(node, f"division by {value}: the divisor must be positive")
    out = sy.scale(s, 1 / f, node.name)
    out.onnx_name = node.outputs[0]
    if s.integer_domain and np.issubdtype(d.dtype, np.integer):
        out.rounding = "trunc"  # ONNX integer division truncates toward zero
    b.set(node, out)


def _round(b: Builder, node: OnnxNode, mode: str) -> None:
    s = b.sym(node, 0)
    if s.pads is not None:
        raise b.fail(node, "rounding a padded value is not supported")
    if s.rounding is None:
        s = replace(s, rounding=mode)
    b.set(node, replace(s, onnx_name=node.outputs[0], nodes=[*s.nodes, node.name]))


def floor(b: Builder, node: OnnxNode) -> None:
    _round(b, node, "floor")


def round_(b: Builder, node: OnnxNode) -> None:
    _round(b, node, "half_even")


def cast(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    to = int(node.attrs.get("to", 1))
    if isinstance(v, np.ndarray):
        b.set(node, v)
        return
    s = v
    if to in INT_TYPES:
        if s.rounding is None and s.div != 1:
            s = replace(s, rounding="trunc")  # float -> int conversion truncates
        s = replace(s, integer_domain=True)
    elif to in FLOAT_TYPES:
        s = replace(s, integer_domain=False)
    else:
        raise b.fail(node, f"cast to ONNX type {to} is not supported")
    b.set(node, replace(s, onnx_name=node.outputs[0], nodes=[*s.nodes, node.name]))


def _bound(b: Builder, node: OnnxNode, x: object, low: bool) -> int | None:
    v = float(np.asarray(x).reshape(-1)[0])
    if abs(v) >= 1e30:
        return None
    if v != int(v):
        raise b.fail(node, f"clip bound {v} is not an integer")
    return int(v)


def clip(b: Builder, node: OnnxNode) -> None:
    s = b.sym(node, 0)
    a = node.attrs
    if "min" in a or "max" in a:
        lo = _bound(b, node, a.get("min", -1e38), True)
        hi = _bound(b, node, a.get("max", 1e38), False)
    else:
        has = [k < len(node.inputs) and node.inputs[k] for k in (1, 2)]
        lo = _bound(b, node, b.const(node, 1), True) if has[0] else None
        hi = _bound(b, node, b.const(node, 2), False) if has[1] else None
    _clip(b, node, s, lo, hi)


def relu(b: Builder, node: OnnxNode) -> None:
    _clip(b, node, b.sym(node, 0), 0, None)


def _clip(b: Builder, node: OnnxNode, s: Sym, lo: int | None, hi: int | None) -> None:
    if s.pads is not None:
        raise b.fail(node, "clipping a padded value is not supported")
    if s.rounding is None and s.div == 1:
        s = replace(s, rounding="floor")  # an integer: rounding does nothing
    new_lo = lo if s.lo is None else (s.lo if lo is None else max(s.lo, lo))
    new_hi = hi if s.hi is None else (s.hi if hi is None else min(s.hi, hi))
    b.set(
        node,
        replace(s, lo=new_lo, hi=new_hi, onnx_name=node.outputs[0], nodes=[*s.nodes, node.name]),
    )


def identity(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    if isinstance(v, Sym):
        v = replace(v, onnx_name=node.outputs[0])
    b.set(node, v)
