"""Handlers of the dialects' own nodes: Deeploy's `RequantShift` and Quantlab's requantizing
`Add` (its `in<k>_*` / `out_*` attributes)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from edgesynth.frontends.onnx_int import symbolic as sy
from edgesynth.frontends.onnx_int.builder import Builder
from edgesynth.frontends.onnx_int.reader import OnnxNode
from edgesynth.frontends.onnx_int.symbolic import Sym
from edgesynth.ir import graph as g


def requant_shift(b: Builder, node: OnnxNode) -> None:
    """Deeploy's RequantShift(x, mul, add): clip(floor((x*mul + add + div/2) / div)). On a
    value still divided exactly (an AveragePool: the window sum over its size) the division
    joins the requantization's, so the average is never rounded on its own."""
    pending = b.sym(node, 0)
    if pending.div != 1 and not pending.closed and pending.pads is None:
        base = pending
    else:
        x, xs = b.tensor_of(node, 0)
        if xs.pads is not None:
            raise b.fail(node, "a padded value cannot be requantized")
        base = sy.bare(x, xs.shape, True, node.outputs[0])
    a = node.attrs
    d = float(np.asarray(a.get("div", 1)).reshape(-1)[0])
    if d <= 0 or d != int(d):
        raise b.fail(node, f"div={d}: expected a positive integer")
    dv = int(d)
    levels = int(float(np.asarray(a.get("n_levels_out", a.get("n_levels", 256))).reshape(-1)[0]))
    signed = bool(float(np.asarray(a.get("signed", 1)).reshape(-1)[0]))
    mul_ = b.per_channel(node, b.const(node, 1), base)
    add_ = b.per_channel(node, b.const(node, 2), base)
    if isinstance(mul_, Fraction) or isinstance(add_, Fraction):
        raise b.fail(node, "mul and add must be integers")
    lo, hi = (-(levels // 2), levels // 2 - 1) if signed else (0, levels - 1)
    scaled = sy.scale(base, mul_, node.name)
    offset = np.asarray(add_ + dv // 2, dtype=object)
    s = Sym(
        scaled.terms,
        np.asarray(scaled.add + offset * base.div, dtype=object),
        dv * base.div,
        base.shape,
        True,
        node.outputs[0],
        scaled.nodes,
        rounding="floor",
        lo=lo,
        hi=hi,
    )
    b.set(node, s)


def quantlab_add(b: Builder, node: OnnxNode) -> None:
    """Quantlab's integer addition: each input requantized by its own `in<k>_mul/_add/_shift`
    (when `in<k>_rq`) and clipped to `in<k>_n_levels`, summed, then requantized by `out_*` (when
    `out_rq`) and clipped to `out_n_levels`. Rounding is floor (a right shift)."""
    a = node.attrs
    terms: list[str] = []
    for k in (1, 2):
        x, xs = b.tensor_of(node, k - 1)
        lo, hi = b.ranges[x]
        if int(a.get(f"in{k}_rq", 0)):
            levels = int(a.get(f"in{k}_n_levels", 256))
            clo, chi = (0, levels - 1) if lo >= 0 else (-(levels // 2), levels // 2 - 1)
            m, ad = int(a[f"in{k}_mul"]), int(a[f"in{k}_add"])
            dv = 1 << int(a[f"in{k}_shift"])
            rlo, rhi = sy.requantize_range(lo, hi, m, ad, dv, "floor", clo, chi)
            name = b.graph.unique_name(f"{node.outputs[0]}_in{k}")
            op = g.Requantize(
                name=name,
                inputs=[x],
                outputs=[name],
                source=node.name,
                mul=m,
                add=ad,
                div=dv,
                rounding="floor",
                lo=clo,
                hi=chi,
            )
            x = b.add_node(op, xs.shape, rlo, rhi, sy.qtype_for(clo, chi, name))
        terms.append(x)
    shape = b.sym(node, 0).shape
    lo = sum(b.ranges[t][0] for t in terms)
    hi = sum(b.ranges[t][1] for t in terms)
    name = b.graph.unique_name(f"{node.outputs[0]}_sum")
    op = g.Eltwise(
        name=b.graph.unique_name(node.name),
        inputs=terms,
        outputs=[name],
        source=node.name,
        kind="add",
    )
    total = b.add_node(op, shape, lo, hi)
    levels = int(a.get("out_n_levels", 256))
    clo, chi = (0, levels - 1) if lo >= 0 else (-(levels // 2), levels // 2 - 1)
    if int(a.get("out_rq", 0)):
        m, ad, dv = int(a["out_mul"]), int(a["out_add"]), 1 << int(a["out_shift"])
    else:
        m, ad, dv = 1, 0, 1
    rlo, rhi = sy.requantize_range(lo, hi, m, ad, dv, "floor", clo, chi)
    out_name = b.graph.unique_name(node.outputs[0])
    op = g.Requantize(
        name=b.graph.unique_name(f"{node.name}_out"),
        inputs=[total],
        outputs=[out_name],
        source=node.name,
        mul=m,
        add=ad,
        div=dv,
        rounding="floor",
        lo=clo,
        hi=chi,
    )
    out = b.add_node(op, shape, rlo, rhi, sy.qtype_for(clo, chi, node.name))
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, shape, False, node.outputs[0]))
