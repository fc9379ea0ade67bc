"""Passthrough copies for tensors read in two layouts.

A MAX7800x layer finds its input where it reads it: a tensor read alone sits on its own
processors; the parts of a concatenation (`in_sequences`) sit on consecutive processors, each
from a memory instance of its own, and a tensor read alone there is found as it is; the operands
of an element-wise layer (and the parts of a concatenation read in several passes) are
interleaved word by word on the same processors, where a layer reads one of them alone only
with a gap (`read_gap`, the MAX78002's, for the first operand). A tensor that two layers read in
layouts that do not fit together (alone and interleaved, in two different groups, twice in one
group) gets a copy: a passthrough layer (`operation: none`, the vendor's way) that writes it to
a new place for the readers of the other layout. The copy runs just before its first reader,
and placement places it like any other layer. On the MAX78002, the layers reading alone the
first operand of one element-wise layer read it with a gap instead (no copy).

Layers whose reading or writing the graph's placement hints fix (a vendor description's
`processors`, offsets, write gaps) get no copy: the description placed them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgesynth.ir import graph as g
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.lower import HwLayer

PLACEMENT_KEYS = ("processors", "output_processors", "in_offset", "out_offset", "write_gap")
Group = tuple[str, tuple[str, ...]]  # how one layer reads several tensors: kind, the tensors


def _group(graph: g.Graph, device: Device, layer: HwLayer) -> Group | None:
    """How `layer` reads its inputs: None (one tensor, alone), "eltwise" (operands, interleaved),
    "passes" (a concatenation wider than one pass, interleaved too) or "concat"."""
    if len(layer.inputs) == 1:
        return None
    if layer.eltwise is not None:
        return "eltwise", tuple(layer.inputs)
    width = sum(graph.tensors[t].shape[0] for t in layer.inputs)
    return ("passes" if width > device.processors else "concat"), tuple(layer.inputs)


def _needs_copies(t: str, alone: bool, groups: list[Group]) -> bool:
    """Do the readers of `t` need it in more than one place?"""
    if not groups:
        return False
    if len(groups) > 1 or groups[0][1].count(t) > 1:
        return True
    return alone and groups[0][0] != "concat"


def _keeper(t: str, groups: list[Group]) -> Group | None:
    """The group that reads `t` where it is (the copies read it alone): a concatenation, whose
    parts are found alone as they are."""
    return next((grp for grp in groups if grp[0] == "concat" and grp[1].count(t) == 1), None)


def _fixed(graph: g.Graph, names: list[str]) -> bool:
    """Do the graph's placement hints place one of these layers?"""
    return any(graph.hints.get(n, {}).get(key) is not None for n in names for key in PLACEMENT_KEYS)


def _gap_reads(
    graph: g.Graph, device: Device, t: str, groups: list[Group], alone: list[HwLayer]
) -> bool:
    """Can the layers reading `t` alone read it with `read_gap` where the one element-wise
    layer reading it finds it (its first operand, interleaved with the others)? The MAX78002
    reads every (g + 1)-th word so, as the vendor's residual networks there do; a reader that
    pools or flattens gets a copy instead."""
    if not device.supports_read_gap or t in graph.inputs or len(groups) != 1:
        return False
    kind, tensors = groups[0]
    plain = all(r.pool is None and not r.flatten and r.in_dim is None for r in alone)
    narrow = graph.tensors[t].shape[0] <= device.processors
    return kind == "eltwise" and tensors[0] == t and tensors.count(t) == 1 and plain and narrow


@dataclass
class _Reads:
    """Per tensor: the layers reading it alone, the groups reading it, every reader's name."""

    alone: dict[str, list[HwLayer]] = field(default_factory=dict)
    groups: dict[str, list[Group]] = field(default_factory=dict)
    first: dict[Group, int] = field(default_factory=dict)  # group -> its first reader
    names: dict[str, list[str]] = field(default_factory=dict)


def _reads(graph: g.Graph, layers: list[HwLayer], device: Device) -> _Reads:
    reads = _Reads()
    for index, layer in enumerate(layers):
        grp = _group(graph, device, layer)
        if grp is not None:
            reads.first.setdefault(grp, index)
        for t in layer.inputs:
            reads.names.setdefault(t, []).append(layer.name)
            if grp is None:
                reads.alone.setdefault(t, []).append(layer)
            elif grp not in reads.groups.setdefault(t, []):
                reads.groups[t].append(grp)
    return reads


def _copies_needed(
    graph: g.Graph, layers: list[HwLayer], device: Device
) -> dict[tuple[str, Group, int], int]:
    """(tensor, group, slot) -> the first layer reading that group, for each tensor slot of a
    group that must read a copy; the layers that read with a gap instead get their `read_gap`."""
    producer = {layer.output: layer.name for layer in layers}
    reads = _reads(graph, layers, device)
    needed: dict[tuple[str, Group, int], int] = {}
    for t, grps in reads.groups.items():
        alone = reads.alone.get(t, [])
        names = [*reads.names[t], producer.get(t, "")]
        if not _needs_copies(t, bool(alone), grps) or _fixed(graph, names):
            continue
        if _gap_reads(graph, device, t, grps, alone):
            for reader in alone:
                reader.read_gap = len(grps[0][1]) - 1
            continue
        keeper = _keeper(t, grps)
        for grp in grps:
            for slot, u in enumerate(grp[1]):
                if u == t and not (grp == keeper and slot == grp[1].index(t)):
                    needed[(t, grp, slot)] = reads.first[grp]
    return needed


def with_copies(graph: g.Graph, layers: list[HwLayer], device: Device) -> list[HwLayer]:
    """`layers` with a passthrough copy before the first reader of each tensor slot that must
    read a copy (see the module doc); the readers read the copies."""
    needed = _copies_needed(graph, layers, device)
    producer = {layer.output: layer.name for layer in layers}
    names = {layer.name for layer in layers}
    before: dict[int, list[HwLayer]] = {}
    copy_of: dict[tuple[str, Group, int], str] = {}
    for (t, grp, slot), at in needed.items():
        base = f"{producer.get(t, 'input')}_copy"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}{n}"
        names.add(name)
        copy = HwLayer(name=name, inputs=[t], output=f"{t}#{name}")
        before.setdefault(at, []).append(copy)
        copy_of[(t, grp, slot)] = copy.output
    out: list[HwLayer] = []
    for index, layer in enumerate(layers):
        out += before.get(index, [])
        grp = _group(graph, device, layer)
        if grp is not None:
            layer.inputs = [copy_of.get((t, grp, k), t) for k, t in enumerate(layer.inputs)]
        out.append(layer)
    return out
