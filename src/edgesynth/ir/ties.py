"""Which tensors must share one step, and each group's largest magnitude: the second step of
the quantization pass (after `sim.observe`).

Operators that pass codes through unchanged (pooling, reshapes, concatenation, an addition of
codes) need their inputs and output on one step. A target names those operators in its number
format (`NumberFormat.ties`, by `op` name); `graph_links` reads them off a graph, or a target
that ties its own fused commands passes `(output, inputs)` links directly. The groups are a
union-find (`ir.unionfind`); a group's magnitude is the largest of its members' ranges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from edgesynth.ir import graph as g
from edgesynth.ir.unionfind import UnionFind


def shares_step(node: g.Node, ties: Sequence[str]) -> bool:
    """Whether `node` is named in `ties`, by its `op` alone or with its kind (`Node.op_names`)."""
    return any(name in ties for name in node.op_names)


def graph_links(nodes: Iterable[g.Node], ties: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(output, inputs) of every operator whose inputs and output share one step."""
    return [(n.output, list(n.inputs)) for n in nodes if shares_step(n, ties)]


def tie(links: Iterable[tuple[str, Sequence[str]]], members: Iterable[str] = ()) -> UnionFind:
    """The groups of tensors joined by `links` (each output with its inputs); `members` are
    registered first, each a group of its own until linked."""
    groups = UnionFind()
    for name in members:
        groups.find(name)
    for output, inputs in links:
        groups.union(output, *inputs)
    return groups


def group_maxabs(
    groups: UnionFind, maxabs: Mapping[str, float], tensors: Iterable[str] | None = None
) -> dict[str, float]:
    """Each group's largest magnitude (by representative), over `tensors` (default: every
    tensor of `maxabs`)."""
    out: dict[str, float] = {}
    for t in maxabs if tensors is None else tensors:
        root = groups.find(t)
        out[root] = max(out.get(root, 0.0), maxabs[t])
    return out
