"""A channel concatenation as the kernels gap8 already has: each input placed into its slice
of the output channels by a 1x1 convolution whose weights are 0 and 1 (input channel c to
output channel offset + c, zeros elsewhere), the placed inputs summed by additions, each sum
clipped to the inputs' codes. Every output value is one input value plus zeros, so the result
is the concatenation exactly, computed by the tiled convolution and addition kernels (and
proved against the same graph the simulator runs)."""

from __future__ import annotations

import numpy as np

from edgesynth.ir import graph as g
from edgesynth.ir.intrange import int_range


def expand_concats(graph: g.Graph) -> None:
    """Replace every `Concat` of `graph` (in place) by placement convolutions and additions
    writing the same output tensor."""
    nodes: list[g.Node] = []
    pending = list(graph.nodes)
    graph.nodes = nodes  # `graph.add` appends: the expansion lands where the Concat was
    for node in pending:
        if isinstance(node, g.Concat) and len(node.inputs) > 1:
            _expand(graph, node)
        else:
            nodes.append(node)


def _expand(graph: g.Graph, node: g.Concat) -> None:
    out = graph.tensors[node.output]
    lo, hi = _union(graph, node.inputs)
    lo, hi = min(lo, 0), max(hi, 0)
    source = node.source or node.name
    placed = [_place(graph, node, k, source) for k in range(len(node.inputs))]
    current = placed[0]
    for k, part in enumerate(placed[1:], start=1):
        name = graph.unique_name(f"{node.output}_join{k}")
        add = g.Eltwise(
            name=name, inputs=[current, part], outputs=[name], source=source, kind="add"
        )
        graph.add(add, out.shape, _qtype(2 * lo, 2 * hi))
        last = k == len(placed) - 1
        clipped = node.output if last else graph.unique_name(f"{node.output}_joined{k}")
        clip = g.Clip(
            name=graph.unique_name(f"{clipped}_clip"),
            inputs=[name],
            outputs=[clipped],
            source=source,
            lo=lo,
            hi=hi,
        )
        if last:  # the Concat's own output tensor, already defined
            graph.nodes.append(clip)
        else:
            graph.add(clip, out.shape, out.qtype)
        current = clipped


def _place(graph: g.Graph, node: g.Concat, k: int, source: str) -> str:
    """Input `k` in its slice of the output channels (zeros elsewhere): a 1x1 convolution, or
    a linear layer on vectors."""
    out = graph.tensors[node.output]
    t = node.inputs[k]
    offset = sum(graph.tensors[x].shape[0] for x in node.inputs[:k])
    channels = graph.tensors[t].shape[0]
    spatial = len(out.shape) - 1
    weight = np.zeros((out.shape[0], channels) + (1,) * spatial, dtype=np.int64)
    weight[offset + np.arange(channels), np.arange(channels)] = 1
    name = graph.unique_name(f"{node.output}_place{k}")
    common = dict(name=name, inputs=[t], outputs=[name], source=source, weight=weight)
    if spatial:
        ones = (1,) * spatial
        op: g.Node = g.Conv(**common, stride=ones, pads=(0,) * (2 * spatial), dilation=ones)
    else:
        op = g.Linear(**common)
    tlo, thi = _union(graph, [t])
    graph.add(op, out.shape, _qtype(min(tlo, 0), max(thi, 0)))
    return name


def _union(graph: g.Graph, tensors: list[str]) -> tuple[int, int]:
    """The smallest and largest code of the tensors' integer types."""
    types = [graph.tensors[t].qtype for t in tensors]
    return min(q.lo for q in types if q), max(q.hi for q in types if q)


def _qtype(lo: int, hi: int) -> g.QType:
    """The narrowest 8-, 16-, 32- or 64-bit type holding [lo, hi]."""
    signed = lo < 0
    bits = 8
    while bits < 64 and (lo < int_range(bits, signed)[0] or hi > int_range(bits, signed)[1]):
        bits *= 2
    return g.QType(bits, signed)
