"""Where a float network leaves the MAX7800x accelerator: the first operator it cannot run (or
whose size is beyond its limits). The operators before it (less a trailing flatten, which the
CPU reads for free) are the accelerator's prefix; the rest, read from one tensor of the prefix,
runs on the Cortex-M4. A network the accelerator runs whole is not split (it compiles as
before), nor is one whose first refused operator the CPU part cannot run either (the
accelerator's own refusal names it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.sim.unary import UNARY
from edgesynth.targets.max7800x.device import Device
from edgesynth.wording import plural

CPU_ACTIVATIONS = ("relu", *UNARY)  # the rest one table each (`simulate.activation_table`)
PLACEMENT = "placement refuses the accelerator's part from here on"  # a split's reason
CPU_OPERATORS = (
    "Linear (Gemm/MatMul), 2-D convolution (transposed too), max/average pooling (unpadded), "
    "global pooling, ReLU, LeakyReLU, Sigmoid, Tanh, HardSigmoid, HardSwish, Swish (SiLU), "
    "Mish, Softplus, Add/Sub/Mul of two tensors of one shape, "
    "channel Concat, Flatten/Reshape and a final Softmax"
)


@dataclass
class Split:
    prefix: g.Graph  # the accelerator's part (float), its output the cut tensor
    suffix: list[g.Node]  # the CPU's part, in order
    cut: str  # the tensor the CPU part reads
    reason: str  # why the first CPU operator left the accelerator
    back: g.Graph | None = None  # what runs on the accelerator again (None: the CPU part
    # runs to the end), reading `result` (as C x H x W: a vector as C x 1 x 1, flattened)
    result: str | None = None  # the CPU part's result, when the accelerator takes it back
    refused: str | None = None  # the operator the accelerator's rules refused (the split may
    # come before it, where the rest reads one tensor of the accelerator's part)


# What the accelerator's quantizer takes from a float graph (the rest of its rules decide later)
_ACCELERATOR = (g.Conv, g.Linear, g.Pool, g.GlobalPool, g.Flatten, g.Reshape, g.Concat, g.Slice)


def accelerator_refusal(graph: g.Graph, node: g.Node, device: Device) -> str | None:
    """Why the accelerator cannot run `node` (None: it may; its own rules decide the rest)."""
    if isinstance(node, g.Activation) and node.kind != "relu":
        return f"the accelerator has no {node.kind} activation"
    if isinstance(node, g.LeakyRelu):
        return "the accelerator has no leaky ReLU"
    runs = isinstance(node, _ACCELERATOR) or (
        isinstance(node, g.Eltwise) and node.kind in ("add", "sub")
    )
    if not runs and not isinstance(node, g.Activation | g.Clip):
        return (
            f"the accelerator has no `{node.kind if isinstance(node, g.Eltwise) else node.op}` here"
        )
    if isinstance(node, g.Clip) and node.lo > 0:
        return "the accelerator has no clip above zero"
    if isinstance(node, g.Conv) and node.out_channels > device.max_channels:
        limit = device.max_channels
        return f"{node.out_channels:,} output channels, more than the accelerator's {limit:,}"
    if isinstance(node, g.Linear):
        out_features, in_features = node.weight.shape
        if out_features > device.max_channels:
            return f"{out_features:,} outputs, more than the accelerator's {device.max_channels:,}"
        if in_features > device.max_linear_features:
            return (
                f"{in_features:,} inputs, more than the accelerator's "
                f"{device.max_linear_features:,}"
            )
    return None


def cpu_runs(node: g.Node, last: bool, graph: g.Graph | None = None) -> bool:
    """Can the CPU part run `node` (`last`: the network's final operator; `graph`: the graph
    it is in, which element-wise operators and concatenations need)?"""
    if isinstance(node, g.Eltwise):  # two tensors of one shape
        shapes = {graph.tensors[t].shape for t in node.inputs} if graph else set()
        return node.kind in ("add", "sub", "mul") and len(node.inputs) == 2 and len(shapes) == 1
    if isinstance(node, g.Concat):
        return graph is not None and all(len(graph.tensors[t].shape) in (1, 3)
                                         for t in node.inputs)  # fmt: skip
    if isinstance(node, g.Activation):
        return node.kind in CPU_ACTIVATIONS
    if isinstance(node, g.Softmax):
        return last and not node.log
    if isinstance(node, g.Conv):
        return node.rank == 2
    if isinstance(node, g.Pool):
        return (len(node.kernel) == 2 and node.kind in ("max", "avg") and not any(node.pads)
                and not node.ceil)  # fmt: skip
    if isinstance(node, g.GlobalPool):
        return node.kind in ("max", "avg")
    return isinstance(node, g.Linear | g.LeakyRelu | g.Flatten | g.Reshape)


def find_split(graph: g.Graph, device: Device) -> Split | None:
    """The split of a float graph (None: the accelerator runs it whole, or refuses it itself)."""
    nodes = graph.nodes
    last = len(nodes) - 1
    first, reason = next(
        (
            (i, why)
            for i, n in enumerate(nodes)
            if not (i == last and isinstance(n, g.Softmax))
            and (why := accelerator_refusal(graph, n, device))
        ),
        (None, ""),
    )
    return None if first is None else _split_at_or_before(graph, first, device, reason)


class _SeveralCuts(EdgesynthError):
    """The operators from a split point read several tensors of the accelerator's part."""


def _split_at_or_before(graph: g.Graph, first: int, device: Device, reason: str) -> Split | None:
    """The split at operator `first`; where the operators from there read several tensors of
    the accelerator's part, at the latest operator before it from which they read one (the
    split at `first` refused as it is where there is none). The split notes the operator."""
    try:
        return _split_from(graph, first, device, reason)
    except _SeveralCuts as several:
        for start in range(first - 1, 0, -1):
            try:
                split = _split_from(graph, start, device, reason)
            except EdgesynthError:
                continue
            if split is not None:
                split.refused = name = graph.nodes[first].name
                split.reason = (f"`{name}`: {reason}; it reads several tensors of the "
                                "accelerator's part, so the split comes before it")  # fmt: skip
                return split
        raise several from None


def split_at_refusal(
    graph: g.Graph, err: EdgesynthError, layers: list[list[str]], device: Device
) -> Split | None:
    """The split at the earliest operator the accelerator's lowering or rules refused (`err`,
    naming operators or hardware layers; `layers`: each hardware layer's operators), when the
    Cortex-M4 part can run it and the rest (None: the refusal stands)."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    found = []  # (the operator's place in the graph, why)
    for one in err.errors if isinstance(err, MultipleErrors) else [err]:
        name = getattr(one, "node", None)
        if name is None and one.layer is not None and 0 <= one.layer < len(layers):
            # the hardware layer's operator (a split there moves a pool fused before it too,
            # should the refusal be the pool's: the next try's); where the quantizer named
            # it, the layer's first graph operator
            names = [n for n in layers[one.layer] if n in order]
            name = (
                layers[one.layer][0]
                if layers[one.layer][0] in order
                else min(names, key=order.__getitem__, default=None)
            )
        if name in order:
            found.append((order[name], one.message.rstrip(".")))
    if not found:
        return None
    first, message = min(found)
    try:
        split = _split_at_or_before(graph, first, device, f"the accelerator refuses it: {message}")
    except _SeveralCuts:  # no split point reads one tensor: the accelerator's refusal stands
        return None
    return split


def placement_splits(
    graph: g.Graph, layers: list[list[str]], err: EdgesynthError, device: Device
) -> Iterator[Split]:
    """The splits to try, latest first, when placement refuses the accelerator's part (`err`;
    `layers`: each hardware layer's operators): before each hardware layer but the first, where
    the Cortex-M4 part can run the rest."""
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    starts = sorted({order[names[0]] for names in layers if names and names[0] in order})
    reason = f"{PLACEMENT}: {err.message.rstrip('.')}"
    for first in reversed(starts[1:]):
        try:
            split = _split_from(graph, first, device, reason)
        except EdgesynthError:  # an operator after it neither side runs, or several cut tensors
            continue
        if split is not None:
            yield split


_STARTS = (g.Conv, g.Linear, g.Pool, g.GlobalPool, g.Flatten, g.Reshape)


def with_return(graph: g.Graph, split: Split, device: Device) -> Split | None:
    """`split` with the accelerator taking the network back after the last operator it
    refuses (the split's first among them), from the first convolution, linear layer, pooling
    or flatten where what follows reads one tensor of the CPU part and holds a convolution or
    a linear layer (None: there is none, or placement made the split)."""
    nodes, start = graph.nodes, graph.nodes.index(split.suffix[0])
    last = len(nodes) - 1
    moved = next(
        i for i in range(start, len(nodes)) if not isinstance(nodes[i], g.Flatten | g.Reshape)
    )
    if split.refused is not None:
        moved = max(moved, next(i for i, n in enumerate(nodes) if n.name == split.refused))
    refused = [moved] + [i for i in range(moved + 1, len(nodes))
                         if not (i == last and isinstance(nodes[i], g.Softmax))
                         and accelerator_refusal(graph, nodes[i], device)]  # fmt: skip
    if split.reason.startswith(PLACEMENT):  # the accelerator cannot take any of it back
        return None
    made = {t for n in nodes[start:] for t in n.outputs}
    for back in range(max(refused) + 1, len(nodes)):
        if not any(isinstance(n, g.Conv | g.Linear) for n in nodes[back:]):
            return None
        if not isinstance(nodes[back], _STARTS):  # the accelerator's layers start there
            continue
        try:
            cut = _cut_tensor(graph, back, nodes[back])
        except EdgesynthError:
            continue
        if cut in made:
            rest = _graph_of(graph, nodes[back:], cut)
            return Split(split.prefix, nodes[start:back], split.cut, split.reason, rest, cut,
                         split.refused)  # fmt: skip
    return None


def _graph_of(graph: g.Graph, nodes: list[g.Node], cut: str) -> g.Graph:
    """The float graph of `nodes` reading `cut` as its input (a vector of C values as C x 1 x
    1, flattened: the accelerator's input is an image), returning `graph`'s outputs."""
    part = g.Graph(name=graph.name, source=graph.source)
    part.hints, part.meta = dict(graph.hints), dict(graph.meta)
    shape = graph.tensors[cut].shape
    if len(shape) == 1:
        part.add_input(f"{cut}/chw", (*shape, 1, 1))
        flat = g.Flatten(name=f"{cut}/flatten", inputs=[f"{cut}/chw"], outputs=[cut])
        part.add(flat, shape)
    else:
        part.add_input(cut, shape, graph.tensors[cut].qtype)
    for node in nodes:
        part.add(node, graph.tensors[node.output].shape, graph.tensors[node.output].qtype)
    part.outputs = list(graph.outputs)
    return part


def _split_from(graph: g.Graph, first: int, device: Device, reason: str) -> Split | None:
    """The split moving operators `first`.. (and a flatten before them) to the Cortex-M4
    (None: it cannot run the first of them either)."""
    nodes = graph.nodes
    last = len(nodes) - 1
    node = nodes[first]
    if not cpu_runs(node, first == last, graph):
        return None
    while first > 0 and isinstance(nodes[first - 1], g.Flatten | g.Reshape):
        first -= 1
    for i in range(first, len(nodes)):
        if not cpu_runs(nodes[i], i == last, graph):
            raise _neither(graph, nodes[i], node, device)
    suffix = nodes[first:]
    cut = _cut_tensor(graph, first, node)
    return Split(_prefix(graph, first, cut), suffix, cut, reason)


def whole_network(graph: g.Graph, device: Device) -> Split:
    """`--cpu-only`: every operator on the Cortex-M4, reading the network's input (an operator
    the CPU part does not run is refused, naming it)."""
    last = len(graph.nodes) - 1
    for i, node in enumerate(graph.nodes):
        if not cpu_runs(node, i == last):
            kind = f" {node.kind}" if isinstance(node, g.Activation | g.Pool | g.Eltwise) else ""
            raise EdgesynthError(
                f"operator `{node.name}` ({node.op}{kind}): --cpu-only runs the whole network on "
                f"the {device.name}'s Cortex-M4, which runs {CPU_OPERATORS}",
                file=graph.source or None,
            )
    cut = _cut_tensor(graph, 0, graph.nodes[0])
    return Split(_prefix(graph, 0, cut), list(graph.nodes), cut, "--cpu-only")


def _neither(graph: g.Graph, node: g.Node, first: g.Node, device: Device) -> EdgesynthError:
    """`node`, after the split at `first`, is one the Cortex-M4 part does not run."""
    kind = f" {node.kind}" if isinstance(node, g.Activation | g.Pool | g.Eltwise) else ""
    return EdgesynthError(
        f"operator `{node.name}` ({node.op}{kind}): neither the {device.name}'s CNN accelerator "
        f"nor its Cortex-M4 part runs it here: the network leaves the accelerator at "
        f"`{first.name}`, and the Cortex-M4 part, which runs the rest, runs {CPU_OPERATORS}",
        file=graph.source or None,
    )


def _cut_tensor(graph: g.Graph, first: int, node: g.Node) -> str:
    """The one tensor of the prefix the suffix (from `first`, split at `node`) reads."""
    made = set(graph.inputs) | {t for n in graph.nodes[first:] for t in n.outputs}
    read = {t for n in graph.nodes[first:] for t in n.inputs if t not in made}
    read |= {t for t in graph.inputs if any(t in n.inputs for n in graph.nodes[first:])}
    kept = {t for t in graph.outputs if t not in made}
    if len(read) != 1 or kept:
        also = f", and the network returns {len(kept)} of them too" if kept else ""
        tensors = plural(len(read), "tensor")
        raise (EdgesynthError if kept or not read else _SeveralCuts)(
            f"operator `{node.name}` ({node.op}): the network would leave the accelerator here, "
            f"but the operators from here on read {tensors} of the accelerator's "
            f"part{also}; the Cortex-M4 part reads exactly one, its result (not supported yet)",
            file=graph.source or None,
        )
    return read.pop()


def _prefix(graph: g.Graph, first: int, cut: str) -> g.Graph:
    """The float graph of the first `first` operators, returning `cut`."""
    prefix = g.Graph(name=graph.name, source=graph.source)
    prefix.hints, prefix.meta = dict(graph.hints), dict(graph.meta)
    prefix.warnings = list(graph.warnings)
    for t in graph.inputs:
        prefix.add_input(t, graph.tensors[t].shape, graph.tensors[t].qtype)
    for node in graph.nodes[:first]:
        prefix.add(node, graph.tensors[node.output].shape, graph.tensors[node.output].qtype)
    prefix.outputs = [cut]
    return prefix
