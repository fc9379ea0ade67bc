"""Lower an integer network graph to MAX7800x hardware layers, described as the vendor's network
description (the YAML document, in memory) with synthetic weights and biases.

One hardware layer does, in order: read its inputs (`in_sequences`, concatenated), an
element-wise operation of its operands before or after pooling, in-flight pooling, flatten, one
convolution or linear operation (or none), the output shift and an activation. The fusion pass
(`fuse`) groups graph operators into such layers:

    [Concat] [Eltwise -> Clip(-128, 127)] [Pool] [Eltwise -> Clip] [Flatten/Reshape]
    Conv | Linear  ->  Requantize (power of two, half up, int8)  ->  [Activation [Clip]]

or, without a Conv/Linear, a passthrough layer of pooling and element-wise operations (a graph
whose output is its input: one passthrough layer that copies it). The chip activates only a
convolution's output: a passthrough layer with an activation (`relu(a + b)`) convolves with 1x1
identity kernels, exactly (`_Fuser.identity`). A concatenation, whole or sliced into equal
operands, is the layer's reading of several `in_sequences`. An accumulator that is a graph
output stays 32 bits wide (`output_width: 32`).

Placement: what the graph's hints give (a vendor YAML's processors, offsets and write gaps) is
kept, except a `processors` map too small for the layer on the whole chip (made for the vendor's
`--max-proc`); the rest is left out of the description, for the synthesizer's planner
(`placement/`) to choose.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import yaml

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Edge, Guard, Matcher, TreePattern, pattern, tree
from edgesynth.ir.intrange import int_range
from edgesynth.targets.max7800x.device import Device, passes

INPUT_LAYER = -1
T = TypeVar("T")


@dataclass
class HwLayer:
    """One hardware layer assembled from graph operators."""

    name: str
    nodes: list[str] = field(default_factory=list)  # graph operators fused into this layer
    inputs: list[str] = field(default_factory=list)  # graph tensors read, in order
    operands: int = 1
    eltwise: str | None = None
    pool_first: bool = True
    pool: g.Pool | None = None
    flatten: bool = False
    op: g.Conv | g.Linear | None = None
    shift: int = 0  # total shift applied to the accumulator (2**(shift-7))
    wide: bool = False
    activation: str | None = None
    output: str = ""  # the graph tensor this layer produces
    in_dim: tuple[int, ...] | None = None  # the input read as another shape (`in_dim`)
    read_gap: int = 0  # reads every (read_gap + 1)-th word: an interleaved operand (`read_gap`)

    @property
    def operation(self) -> str:
        if self.op is None:
            return "none"
        if isinstance(self.op, g.Linear):
            return "linear"
        if self.op.transposed:
            return "convtranspose2d"
        return "conv1d" if self.op.rank == 1 else "conv2d"


# What one hardware layer runs from its operation (or, in a passthrough layer, its last pooling
# or clip) forward (`ir.fusion` chains). The activation must be a ReLU or Abs and the clip must
# not narrow the int8 range of a ReLU (`_Fuser.outputs`).
FUSION_PATTERNS = (
    pattern("activated", "conv|linear|pool|clip [requantize] activation [clip]"),
    pattern("operation", "conv|linear|pool|clip [requantize]"),
)

# What it reads before the operation, backward from the operation's input (`ir.fusion` trees),
# step by step: a flatten or reshape to a vector (`flat`); an element-wise operation saturated
# to int8 (`int8`) of operands each pooled alike or not at all (`alike`), or a pooling without
# padding (`padless`) of such an operation or of the input; then for each operand a reshape
# (`in_dim`); operands sliced evenly from one tensor read that tensor (`_Fuser.cut_evenly`);
# and a concatenation read only by the layer (`inside`) is its reading of several
# `in_sequences`. Element-wise operations the chip has: `device` (`_Fuser.guards`, `refuse`).
FLATTEN = tree("flatten", "flatten|reshape?flat")
READS = (
    tree("pooled operands", "clip?int8(eltwise!device([pool!alike]*))"),
    tree("pooling", "pool!padless([clip?int8(eltwise!device)])"),
)
IN_DIM = tree("in_dim", "[reshape?in_dim]*")
SPLIT = tree("split", "slice&*")
SEQUENCES = tree("in_sequences", "[concat&?inside]*")
READ_PATTERNS = (FLATTEN, *READS, IN_DIM, SPLIT, SEQUENCES)


_ELTWISE = ("add", "sub", "xor", "or")  # the element-wise operations a layer runs


def _layer_name(node_name: str) -> str:
    """A hardware layer's name from its operator's: the first path part (`conv1` of
    `/conv1/Conv`, `layer3` of `layer3/conv2d`)."""
    parts = [p for p in node_name.split("/") if p]
    return parts[0] if parts else node_name


class _Refused(EdgesynthError):
    """An operator the lowering refuses, and its name."""

    def __init__(self, node: g.Node, message: str) -> None:
        self.node = node.name
        where = f" ({node.source})" if node.source else ""
        super().__init__(f"operator `{node.name}`{where}: {message}")


def _fail(node: g.Node, message: str) -> EdgesynthError:
    return _Refused(node, message)


def _pow2(value: int) -> int | None:
    return value.bit_length() - 1 if value > 0 and value & (value - 1) == 0 else None


class _Fuser:
    def __init__(self, graph: g.Graph, device: Device | None = None) -> None:
        self.graph = graph
        self.device = device  # what the identity convolutions depend on (`identity`)
        self.used: set[str] = set()
        self.errors: list[EdgesynthError] = []  # every operator refused so far
        self.near_refused: set[str] = set()  # refused operators and their neighbours
        self.matcher = Matcher(graph)

    def producer(self, tensor: str) -> g.Node | None:
        node = self.matcher.producers.get(tensor)
        return None if node is None or node.name in self.used else node

    def take(self, layer: HwLayer, node: g.Node) -> None:
        self.used.add(node.name)
        layer.nodes.append(node.name)

    # -- backward from the operation: flatten, pooling, element-wise, concatenation ---------
    def guards(self, layer: HwLayer) -> dict[str, Guard]:
        """`READ_PATTERNS`' guards: what a member's operator must be to join `layer`."""
        outputs = self.graph.outputs

        def inside(node: g.Node, matched: Collection[str]) -> bool:  # read by `layer` only
            readers = self.graph.consumers(node.output)
            return node.output not in outputs and all(
                n.name in layer.nodes or n.name in matched for n in readers
            )

        return {
            "int8": lambda node, _: isinstance(node, g.Clip) and (node.lo, node.hi) == (-128, 127),
            "flat": lambda node, _: not isinstance(node, g.Reshape) or len(node.shape) == 1,
            "in_dim": lambda node, _: isinstance(node, g.Reshape) and len(node.shape) >= 2,
            "inside": inside,
        }

    def refuse(self, layer: HwLayer, name: str, node: g.Node) -> None:
        """`READ_PATTERNS`' refusals: an operator a layer would take but the chip cannot run."""
        if name not in ("padless", "device", "alike"):
            raise ValueError(f"no refusal `{name}` (padless, device, alike)")
        why = None
        if name == "padless" and isinstance(node, g.Pool) and (any(node.pads) or node.ceil):
            why = "in-flight pooling has no padding or ceil mode"
        elif name == "device" and isinstance(node, g.Eltwise) and node.kind not in _ELTWISE:
            why = f"element-wise `{node.kind}` has no MAX7800x operation"
        elif name == "alike" and layer.pool is not None and node.params() != layer.pool.params():
            why = "operands pooled differently"
        if why is not None:
            raise _fail(node, why)

    def absorb(self, layer: HwLayer, node: g.Node) -> None:
        """Take a matched operator into `layer`, with what it says about the layer."""
        self.take(layer, node)
        if isinstance(node, g.Pool):
            layer.pool = node
        elif isinstance(node, g.Eltwise):  # a pooling taken before it pools its result
            layer.eltwise, layer.operands = node.kind, len(node.inputs)
            layer.pool_first = layer.pool is None
        elif isinstance(node, g.Reshape):
            layer.in_dim = tuple(node.shape[1:])

    def read(self, layer: HwLayer, pats: tuple[TreePattern, ...], edges: list[Edge]) -> list[Edge]:
        """The first of `pats` matching backward from `edges`, taken into `layer`: the edges it
        reads then (`edges` where none matches)."""
        match = self.matcher.first(pats, edges, self.used, self.guards(layer))
        if match is None:
            return edges
        match.take(
            lambda name, node: self.refuse(layer, name, node),
            lambda node: self.absorb(layer, node),
        )
        return list(match.leaves)

    def inputs(self, layer: HwLayer, edge: Edge) -> None:
        """Operands (element-wise before or after pooling) and their sources."""
        self.sources(layer, self.read(layer, READS, [edge]))

    def sources(self, layer: HwLayer, edges: list[Edge]) -> None:
        edges = self.read(layer, (IN_DIM,), edges)
        split = self.matcher.match(SPLIT, edges, self.used)
        if split is not None and self.cut_evenly(split.nodes):
            split.take(lambda name, node: None, lambda node: self.take(layer, node))
            edges = list(split.leaves[:1])  # the hardware splits the tensor into its operands
        layer.inputs = [t for t, _ in self.read(layer, (SEQUENCES,), edges)]

    def cut_evenly(self, slices: Sequence[g.Node]) -> bool:
        """Do `slices` cut one tensor into their number of equal, consecutive channel ranges
        (the hardware splits a layer's input into its operands)?"""
        if len(slices) < 2:
            return False
        source = slices[0].inputs[0]
        size = self.graph.tensors[source].shape[0]
        per = size // len(slices)
        for k, s in enumerate(slices):
            assert isinstance(s, g.Slice)
            if (s.inputs[0], s.axis, s.start, s.stop, s.step) != (
                source,
                0,
                k * per,
                (k + 1) * per,
                1,
            ):
                return False
        return per * len(slices) == size

    # -- forward from the operation: requantization and activation ------------------------
    def outputs(self, layer: HwLayer, last: g.Node) -> None:
        """What follows the layer's operation (or its last pooling or clip, `last`): its
        `FUSION_PATTERNS`, checked."""
        match = self.matcher.longest(last, FUSION_PATTERNS)
        chain = list(match.nodes[1:]) if match is not None else []
        layer.output = last.output
        if chain and isinstance(chain[0], g.Requantize):
            rq = chain.pop(0)
            self.requantize(layer, rq)
            self.take(layer, rq)
            layer.output = rq.output
        elif layer.op is not None:
            layer.wide = True
        if chain:
            self.activation(layer, chain)

    def requantize(self, layer: HwLayer, rq: g.Requantize) -> None:
        mul, div, add = (np.asarray(v) for v in (rq.mul, rq.div, rq.add))
        if mul.ndim or div.ndim or add.ndim or int(add) != 0:
            raise _fail(rq, "MAX7800x requantizes by one power of two per layer (no offsets)")
        up, down = _pow2(int(mul)), _pow2(int(div))
        if up is None or down is None or rq.rounding != "half_up" or (rq.lo, rq.hi) != (-128, 127):
            raise _fail(
                rq,
                "MAX7800x requantizes to int8 by a power of two, rounding half up; this one "
                f"multiplies by {int(mul)}/{int(div)} ({rq.rounding}, {rq.lo}..{rq.hi})",
            )
        layer.shift = up - down + 7

    def activation(self, layer: HwLayer, chain: list[g.Node]) -> None:
        """The activation and the clip after it (`chain`)."""
        act = chain[0]
        assert isinstance(act, g.Activation)
        if act.kind not in ("relu", "abs"):
            raise _fail(act, f"activation `{act.kind}` has no MAX7800x equivalent (ReLU, Abs)")
        self.take(layer, act)
        layer.activation, layer.output = act.kind, act.output
        clip = chain[1] if len(chain) > 1 else None
        if isinstance(clip, g.Clip) and clip.lo <= 0 and clip.hi >= 127:  # saturates at 127
            self.take(layer, clip)  # anyway
            layer.output = clip.output

    def copy_layer(self, tensor: str) -> HwLayer:
        """A graph whose output is its input computes nothing: one passthrough layer copies the
        input to the output. Its name is the one placement hint's (a vendor description of one
        `operation: none` layer), or `copy`."""
        hints = list(self.graph.hints)
        layer = HwLayer(name=hints[0] if len(hints) == 1 else "copy")
        layer.inputs, layer.output = [tensor], tensor
        return layer

    # -- the pass -------------------------------------------------------------------------
    def op_layer(self, node: g.Conv | g.Linear) -> HwLayer:
        """The hardware layer of one convolution or linear operator, with what it absorbs."""
        layer = HwLayer(name=_layer_name(node.name))
        self.take(layer, node)
        layer.op = node
        edge = Edge(node.inputs[0], node)
        flat = self.matcher.match(FLATTEN, [edge], self.used, self.guards(layer))
        if flat is not None:
            self.take(layer, flat.nodes[0])
            edge = flat.leaves[0]
            layer.flatten = (
                isinstance(node, g.Linear) and len(self.graph.tensors[edge.tensor].shape) > 1
            )
        else:
            shape = self.graph.tensors[edge.tensor].shape
            layer.flatten = isinstance(node, g.Linear) and len(shape) == 3 and shape[1:] != (1, 1)
        if layer.flatten and isinstance(self.producer(edge.tensor), g.Pool):
            self.sources(layer, [edge])  # the chip cannot pool and flatten at once:
        else:  # the pooling becomes a passthrough layer of its own (below)
            self.inputs(layer, edge)
        self.outputs(layer, node)
        return layer

    def passthrough(self, node: g.Pool | g.Clip) -> list[HwLayer]:
        """A layer of pooling and element-wise operations only, ending at `node`; with an
        activation after it, a layer that convolves with identity kernels (`identity`), or two
        (`apart`). Not where a vendor description gives the layer (its placement hints): that
        layer is the user's, `operation: none`, and the device rules refuse its activation."""
        layer = HwLayer(name=_layer_name(node.name))
        self.inputs(layer, Edge(node.output, None))
        if not layer.nodes:
            raise _fail(node, "a lone clip has no MAX7800x layer")
        ahead = len(layer.nodes)
        self.outputs(layer, node)
        if layer.activation is None or layer.name in self.graph.hints:
            return [layer]
        self.identity(layer, node)
        return self.apart(layer, ahead, node.output)

    def apart(self, layer: HwLayer, ahead: int, combined: str) -> list[HwLayer]:
        """Where the chip cannot convolve the combined operands in the same layer
        (`convolves_operands`), the element-wise operation stays a passthrough layer writing
        `combined` (its first `ahead` operators), and the identity convolution with the
        activation is a layer of its own reading it."""
        if layer.op is None or layer.operands < 2 or self.convolves_operands(layer, combined):
            return [layer]
        assert layer.activation is not None
        tail = HwLayer(name=f"{layer.name}_{layer.activation}", nodes=layer.nodes[ahead:],
                       inputs=[combined], op=layer.op, shift=layer.shift,
                       activation=layer.activation, output=layer.output)  # fmt: skip
        layer.nodes, layer.op, layer.activation = layer.nodes[:ahead], None, None
        layer.shift, layer.output = 0, combined
        return [layer, tail]

    def convolves_operands(self, layer: HwLayer, combined: str) -> bool:
        """Can the layer's convolution read its combined operands? Not a Conv1d (1-D data), and
        not on the MAX78000 over several passes, except 2 operands x 2 passes (the rest it runs
        as a data move)."""
        shape = self.graph.tensors[combined].shape
        if len(shape) == 2:
            return False
        device = self.device
        if device is None or not device.emulates_multipass_eltwise:
            return True
        n, p = layer.operands, passes(shape[0], device.processors)
        return p < 2 or n * p == n + p

    def identity(self, layer: HwLayer, last: g.Node) -> None:
        """The chip activates only a convolution's output: a layer of pooling and element-wise
        operations with an activation (`relu(a + b)`, a residual block's sum) convolves its
        combined operands (`last`'s output) with 1x1 identity kernels, depthwise where the
        device runs depthwise convolutions. Each output channel is its own input channel times
        1 (2-bit weights), shifted by 2**0 (total shift 7), so y = floor(x + 1/2) = x for every
        int8 x, then the activation. 1-D data takes weight 64 (8-bit weights, total shift 1):
        a Conv1d over several passes with narrow weights misses its known answer on the virtual
        MAX78000 (plain convolutions too: a defect outside this lowering)."""
        shape = self.graph.tensors[last.output].shape
        rank, channels = len(shape) - 1, shape[0]
        if rank not in (1, 2):
            return  # a vector: the device rules refuse the activation, naming the layer
        ones, one = (1,) * rank, 64 if rank == 1 else 1
        if self.device is not None and self.device.supports_depthwise:
            weight, groups = np.ones((channels, 1, *ones), np.int64), channels
        else:
            weight, groups = np.eye(channels, dtype=np.int64).reshape(channels, channels, *ones), 1
        nodes = [self.graph.node(n) for n in layer.nodes]
        act = next(n for n in nodes if isinstance(n, g.Activation))
        layer.op = g.Conv(
            name=f"{last.name}/identity", inputs=[last.output], outputs=[], source=act.source,
            weight=weight * one, stride=ones, pads=(0,) * 2 * rank, dilation=ones, groups=groups,
        )  # fmt: skip
        if not any(isinstance(n, g.Requantize) for n in nodes):
            layer.shift = 7  # the accumulator as it is (a requantization sets its own)
        layer.shift -= one.bit_length() - 1  # ... divided by the weight

    def attempt(self, node: g.Node, build: Callable[[Any], T]) -> T | None:
        """`build(node)`, or None with its refusal noted (the pass goes on to report them all);
        the nodes next to a refused one are not refused again for having no layer."""
        try:
            return build(node)
        except EdgesynthError as err:
            self.errors.append(err)
            self.used.add(node.name)
            self.near_refused |= self.neighbours(
                err.node if isinstance(err, _Refused) else node.name
            )
            return None

    def neighbours(self, name: str) -> set[str]:
        """The operators that produce an input of `name`, or read one of its outputs."""
        node = self.graph.node(name)
        near = {p.name for t in node.inputs if (p := self.graph.producer(t)) is not None}
        for t in node.outputs:
            near |= {c.name for c in self.graph.consumers(t)}
        return near | {name}

    def run(self) -> list[HwLayer]:
        layers: list[tuple[int, HwLayer]] = []
        position = {n.name: i for i, n in enumerate(self.graph.nodes)}
        for node in self.graph.nodes:
            if isinstance(node, g.Conv | g.Linear) and node.name not in self.used:
                layer = self.attempt(node, self.op_layer)
                if layer is not None:
                    layers.append((position[node.name], layer))
        # What no operation absorbed: passthrough layers (pooling and element-wise only).
        for node in reversed(self.graph.nodes):
            if node.name not in self.used and isinstance(node, g.Pool | g.Clip):
                parts = self.attempt(node, self.passthrough) or []
                layers += [(position[node.name], layer) for layer in parts]
        for node in self.graph.nodes:
            if node.name in self.used or isinstance(node, g.Reshape | g.Flatten):
                continue
            if not self.errors or node.name not in self.near_refused:
                self.errors.append(
                    _fail(node, f"`{node.op}` has no place in a MAX7800x layer here")
                )
        # A refused read is met again when its operator is tried as a passthrough layer: the
        # same message once.
        errors = list({str(e): e for e in self.errors}.values())
        if errors:
            raise errors[0] if len(errors) == 1 else MultipleErrors(errors)
        if self.graph.outputs[0] in self.graph.inputs:
            layers.append((len(self.graph.nodes), self.copy_layer(self.graph.outputs[0])))
        ordered = [layer for _, layer in sorted(layers, key=lambda p: p[0])]
        seen: dict[str, int] = {}
        for layer in ordered:  # YAML layer names must be unique
            count = seen.get(layer.name, 0)
            seen[layer.name] = count + 1
            if count:
                layer.name = f"{layer.name}_{count}"
        return ordered


def fuse(graph: g.Graph, device: Device | None = None) -> list[HwLayer]:
    """Group an integer graph's operators into MAX7800x hardware layers (see the module doc).
    The identity convolution a passthrough layer with an activation takes depends on `device`:
    depthwise where it runs depthwise convolutions, a layer of its own where it cannot convolve
    the combined operands; without `device`, a full 1x1 convolution in the same layer (but for
    1-D data)."""
    if not graph.is_integer:
        raise EdgesynthError(
            f"graph {graph.name} is not quantized: MAX7800x runs integer graphs (quantize it "
            "first: `edgesynth compile ... --calibration DATA.npy`)"
        )
    if len(graph.inputs) != 1:
        raise EdgesynthError(
            f"MAX7800x networks take one input; {graph.name} has {len(graph.inputs)}"
        )
    return _Fuser(graph, device).run()


# -- the vendor description ---------------------------------------------------------------------


def _pair(values: tuple[int, ...]) -> int | list[int]:
    return values[0] if len(set(values)) == 1 else list(values)


def weight_bits(w: np.ndarray) -> int:
    """The narrowest weight width (1, 2, 4 or 8 bits) that holds every weight exactly: narrow
    weights take less kernel memory and compute the same."""
    lo, hi = int(w.min(initial=0)), int(w.max(initial=0))
    for bits in (1, 2, 4):
        low, high = int_range(bits, True)
        if low <= lo and hi <= high:
            return bits
    return 8


@dataclass
class Description:
    """The vendor description of a lowered program: the YAML document (the mapping a network
    description file holds) and its synthetic weights and biases (one array per layer)."""

    document: dict[str, Any]
    weights: list[np.ndarray]
    biases: list[np.ndarray]
    layers: list[HwLayer]
    warnings: list[str] = field(default_factory=list)

    @property
    def yaml_text(self) -> str:
        """The document as `compile` writes it (`network.yaml`)."""
        text = "---\n# Written by edgesynth compile: the network as MAX7800x hardware layers.\n"
        return text + yaml.safe_dump(
            self.document, sort_keys=False, default_flow_style=False, width=100
        )


def entry_lines(text: str) -> list[int]:
    """The line (1-based) of each layer entry's `- ` in a `Description.yaml_text`: `layers` is
    its last key, a block list whose entries start at the first column."""
    lines = text.splitlines()
    start = lines.index("layers:")
    return [i + 1 for i, line in enumerate(lines) if i > start and line.startswith("- ")]


def tensor_shape(graph: g.Graph, layers: list[HwLayer], tensor: str) -> tuple[int, ...]:
    """The shape of a graph tensor, or of a passthrough copy's output (its source's)."""
    while tensor not in graph.tensors:
        tensor = next(layer.inputs[0] for layer in layers if layer.output == tensor)
    return graph.tensors[tensor].shape


def _input_channels(graph: g.Graph, layers: list[HwLayer], layer: HwLayer) -> int:
    """The channels of one operand of the layer's input, as the hardware reads it."""
    shapes = [tensor_shape(graph, layers, t) for t in layer.inputs]
    channels = sum(shape[0] for shape in shapes)
    if layer.in_dim is not None:
        channels = sum(int(np.prod(shape)) for shape in shapes) // int(np.prod(layer.in_dim))
    return channels // layer.operands


def _fitting_hints(
    graph: g.Graph,
    layers: list[HwLayer],
    layer: HwLayer,
    hints: dict[str, Any],
    device: Device,
    warnings: list[str],
) -> dict[str, Any]:
    """The layer's placement hints, less a `processors` map too small for its input on the
    whole chip (a vendor description made for `--max-proc`, which spreads the channels over more
    passes): the planner chooses the processors instead, and a warning says so."""
    processors = hints.get("processors")
    if processors is None:
        return hints
    channels = _input_channels(graph, layers, layer)
    need = device.processors_for(channels)
    if int(processors).bit_count() >= need:
        return hints
    warnings.append(
        f"layer {layer.name}: the placement hint `processors` 0x{int(processors):016x} enables "
        f"{int(processors).bit_count()} processors, fewer than the {need} that {channels} input "
        "channels take on the whole chip (a description for the vendor's `--max-proc`): the "
        "planner chooses the processors"
    )
    return {key: value for key, value in hints.items() if key != "processors"}


def describe(
    graph: g.Graph, layers: list[HwLayer], device: Device, *, arch: str, dataset: str
) -> Description:
    """The YAML document (with `bias:` naming the synthetic biases) for fused layers."""
    tensor_layer = {layer.output: i for i, layer in enumerate(layers)}
    tensor_layer[graph.inputs[0]] = INPUT_LAYER
    entries: list[dict[str, Any]] = []
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    warnings: list[str] = []
    refused: list[EdgesynthError] = []  # every layer's refusal, raised together
    for i, layer in enumerate(layers):
        try:
            entry: dict[str, Any] = {"name": layer.name}
            hints = graph.hints.get(layer.name, {})
            sources = []
            for t in layer.inputs:
                if t not in tensor_layer:
                    raise EdgesynthError(
                        f"layer {layer.name}: reads `{t}`, which no layer produces"
                    )
                sources.append(tensor_layer[t])
            hints = _fitting_hints(graph, layers, layer, hints, device, warnings)
            for key in ("processors", "output_processors", "in_offset", "out_offset", "write_gap"):
                if hints.get(key) is not None:
                    entry[key] = hints[key]
            if i == 0:
                entry["data_format"] = hints.get("data_format") or "HWC"
            if layer.in_dim is not None:
                entry["in_dim"] = list(layer.in_dim)
            if layer.read_gap:
                entry["read_gap"] = layer.read_gap
            if sources != [i - 1] and not (i == 0 and sources == [INPUT_LAYER]):
                entry["in_sequences"] = sources
            if layer.eltwise:
                entry["eltwise"] = layer.eltwise
                entry["operands"] = layer.operands
                if not layer.pool_first:
                    entry["pool_first"] = False
            if layer.pool is not None:
                pool = layer.pool
                kernel = pool.kernel
                key = "avg_pool" if pool.kind == "avg" else "max_pool"
                entry[key] = _pair(kernel)
                entry["pool_stride"] = _pair(pool.stride)
                if any(d > 1 for d in pool.dilation):
                    entry["pool_dilation"] = _pair(pool.dilation)
            op = layer.op
            entry["operation"] = {"linear": "mlp"}.get(layer.operation, layer.operation)
            if layer.flatten:
                entry["flatten"] = True
            if isinstance(op, g.Conv):
                k = op.kernel
                entry["kernel_size"] = k[0] if op.rank == 1 else f"{k[0]}x{k[1]}"
                n = op.rank
                pads = op.pads
                if op.transposed:
                    pads = (
                        tuple(
                            d * (kk - 1) - p
                            for d, kk, p in zip(op.dilation, k, pads[:n], strict=True)
                        )
                        * 2
                    )
                if pads[:n] != pads[n:]:
                    raise _fail(op, f"MAX7800x pads both sides alike, not {pads}")
                entry["pad"] = _pair(pads[:n])
                if not op.transposed and any(s > 1 for s in op.stride):
                    entry["stride"] = _pair(op.stride)
                elif op.transposed and any(s != device.transpose_stride for s in op.stride):
                    up = device.transpose_stride
                    raise _fail(op, f"a transposed convolution upsamples by {up} only, not "
                                    f"{_pair(op.stride)}")  # fmt: skip
                if any(d > 1 for d in op.dilation):
                    entry["dilation"] = _pair(op.dilation)
                if op.groups > 1:
                    entry["groups"] = op.groups
            if op is not None:
                w = np.asarray(op.weight, dtype=np.int64)
                if isinstance(op, g.Conv) and op.transposed:
                    # synthetic transposed weights are the convolution form's values, shaped
                    # (out / groups, in, kh, kw): the builder reads `in` from the second axis
                    groups, (out, per_group, kh, kw) = op.groups, w.shape
                    w = w.reshape(out // groups, groups * per_group, kh, kw)
                if w.min(initial=0) < -128 or w.max(initial=0) > 127:
                    raise _fail(op, "weights must be 8-bit integers (-128..127)")
                weights.append(w.reshape(*w.shape, 1, 1) if isinstance(op, g.Linear) else w)
                out_channels = np.shape(op.weight)[0]
                bias = np.zeros(out_channels, np.int64) if op.bias is None else np.asarray(op.bias)
                if np.any(bias % device.bias_div):
                    raise _fail(
                        op, f"the bias must be a multiple of {device.bias_div} accumulator units"
                    )
                bias = bias // device.bias_div
                if bias.min(initial=0) < -128 or bias.max(initial=0) > 127:
                    raise _fail(op, "the bias does not fit 8 bits after the chip's x128 scaling")
                biases.append(bias)
                bits = weight_bits(w)
                if bits != 8:
                    entry["quantization"] = bits
                entry["output_shift"] = layer.shift - (8 - bits)
            if layer.wide:
                entry["output_width"] = 32
            entry["activate"] = {"relu": "ReLU", "abs": "Abs"}.get(layer.activation or "", "None")
        except _Refused as err:  # go on: report every layer's
            refused.append(err)
            continue
        entries.append(entry)
    if refused:
        raise refused[0] if len(refused) == 1 else MultipleErrors(refused)
    document: dict[str, Any] = {"arch": arch, "dataset": dataset}
    if biases:
        document["bias"] = dataset
    document["layers"] = entries
    return Description(document, weights, biases, layers, warnings)
