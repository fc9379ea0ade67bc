"""Lowering: the integer graph to DORY-style layers, and what each layer stores.

A layer is what one generated C function computes with one L2->L1 loop nest:

- `conv`: a convolution (standard, depthwise or grouped, 1-D as 1xL, dilated, strided, padded)
- `linear`: a fully connected layer (its input read flattened, whatever shape it had)
- `pool`: max pooling or an integer average (window sum then requantization)
- `eltwise`: an addition (or a product) of two tensors, each optionally requantized first;
  also a lone requantization of one tensor

(a channel concatenation is first rewritten as placement convolutions and additions:
`concat.expand_concats`)

each followed by the chain of requantizations/clips the graph applies to its result (fused, as
DORY fuses batch-norm, requantization and activation). Activations live in L2 in HWC order
(`Storage`: 2-, 4-, 8-, 16- or 32-bit containers; sub-byte values packed least significant
first); weights as [out channel][kh][kw][in channel of the group].
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Matcher, Pattern, pattern
from edgesynth.ir.intrange import accumulator_range, int_range
from edgesynth.sim.rounding import divide
from edgesynth.targets.pulp.concat import expand_concats

CONTAINERS = (2, 4, 8, 16, 32)
WIDE = 1 << 62  # a requantization bound that does not clip
SAFE = 1 << 62  # every int64 intermediate of the generated C stays below this
ALIAS_OPS = (g.Flatten, g.Reshape)
STEP_OPS = (g.Requantize, g.Clip, g.Activation)

# What one layer fuses (`ir.fusion`): a convolution, fully connected layer or pooling, an
# element-wise operation, or a requantization of its own, each with the requantizations and
# clips (ReLU) that follow it.
_STEPS = "[requantize|clip|activation:relu]*"
FUSION_PATTERNS: dict[str, Pattern] = {
    p.name: p
    for p in (
        pattern("layer", f"conv|linear|pool {_STEPS}"),
        pattern("addition", f"eltwise {_STEPS}"),
        pattern("requantization", f"requantize|clip|activation {_STEPS}"),
    )
}


@dataclass(frozen=True)
class Storage:
    """How a tensor's integers are stored: a `bits`-wide container, signed or not."""

    bits: int
    signed: bool

    def nbytes(self, elements: int) -> int:
        return (elements * self.bits + 7) // 8

    @property
    def lo(self) -> int:
        return int_range(self.bits, self.signed)[0]

    @property
    def hi(self) -> int:
        return int_range(self.bits, self.signed)[1]

    @property
    def align(self) -> int:
        """Elements per byte boundary: a tile's channel count must be a multiple of this."""
        return 8 // self.bits if self.bits < 8 else 1

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'uint'}{self.bits}"


def storage_for(lo: int, hi: int, elements_per_pixel: int) -> Storage:
    """The narrowest container holding [lo, hi] whose pixels start on byte boundaries."""
    signed = lo < 0
    for bits in CONTAINERS:
        s = Storage(bits, signed)
        if s.lo <= lo and hi <= s.hi and (elements_per_pixel * bits) % 8 == 0:
            return s
    raise EdgesynthError(f"values {lo}..{hi} need more than 32 bits")


@dataclass
class Step:
    """y = clip(R((x * mul + add) / div), lo, hi); `mul`/`add` scalars or per output channel."""

    mul: int | np.ndarray
    add: int | np.ndarray
    div: int
    rounding: str
    lo: int | None
    hi: int | None
    source: str = ""

    def apply_range(self, lo: int, hi: int) -> tuple[int, int, int]:
        """Output range for inputs in [lo, hi], and the largest |x*mul + add| on the way."""
        m = np.atleast_1d(np.asarray(self.mul, dtype=object))
        a = np.atleast_1d(np.asarray(self.add, dtype=object))
        ends = [lo * m + a, hi * m + a]
        nmin = min(min(e.flat) for e in ends)
        nmax = max(max(e.flat) for e in ends)
        qlo, qhi = (
            int(divide(nmin, self.div, self.rounding)),
            int(divide(nmax, self.div, self.rounding)),
        )
        if self.lo is not None:
            qlo, qhi = max(qlo, self.lo), max(qhi, self.lo)
        if self.hi is not None:
            qlo, qhi = min(qlo, self.hi), min(qhi, self.hi)
        return qlo, qhi, max(abs(int(nmin)), abs(int(nmax)))

    @property
    def per_channel(self) -> list[np.ndarray]:
        return [v for v in (self.mul, self.add) if isinstance(v, np.ndarray)]


@dataclass
class PulpLayer:
    index: int
    name: str  # the ONNX node of the main operator
    kind: str  # conv | linear | pool | eltwise
    inputs: list[str]
    output: str
    in_shapes: list[tuple[int, int, int]]  # (C, H, W); 1-D data is (C, 1, L)
    out_shape: tuple[int, int, int]
    in_storage: list[Storage]
    out_storage: Storage
    steps: list[Step]  # applied to the accumulator / pooled value / sum
    pre_steps: list[list[Step]] = field(default_factory=list)  # eltwise: per input
    weight: np.ndarray | None = None  # (Cout, kh, kw, Cin/groups)
    w_storage: Storage | None = None
    bias: np.ndarray | None = None
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    groups: int = 1
    pool_kind: str = ""  # max | sum
    eltwise_op: str = "add"  # add | mul (two inputs)
    acc_range: tuple[int, int] = (0, 0)  # the value the steps start from
    wide_acc: bool = False  # the accumulator needs 64 bits
    nodes: list[str] = field(default_factory=list)  # graph operators fused
    sources: list[str] = field(default_factory=list)  # ONNX nodes fused
    acc_tensor: str | None = None  # the graph tensor of the accumulators (before the steps)

    @property
    def cin(self) -> int:
        return self.in_shapes[0][0]

    @property
    def cout(self) -> int:
        return self.out_shape[0]

    @property
    def macs(self) -> int:
        if self.kind not in ("conv", "linear"):
            return 0
        c, h, w = self.out_shape
        return c * h * w * int(np.prod(self.weight.shape[1:]))

    @property
    def op_label(self) -> str:
        if self.kind == "conv":
            kind = "depthwise" if self.groups == self.cin and self.groups > 1 else "conv"
            return f"{kind} {self.kernel[0]}x{self.kernel[1]}"
        if self.kind == "pool":
            kind = "maxpool" if self.pool_kind == "max" else "avgpool"
            return f"{kind} {self.kernel[0]}x{self.kernel[1]}"
        if self.kind == "eltwise":
            return self.eltwise_op if len(self.inputs) == 2 else "requant"
        return "linear"

    def params(self) -> list[tuple[str, np.ndarray]]:
        """The per-output-channel arrays the kernel reads beside the weights, in order."""
        out: list[tuple[str, np.ndarray]] = []
        if self.bias is not None:
            out.append(("bias", self.bias))
        for k, step in enumerate(self.steps):
            for what in ("mul", "add"):
                v = getattr(step, what)
                if isinstance(v, np.ndarray):
                    out.append((f"s{k}_{what}", v))
        return out


# -- ranges -----------------------------------------------------------------------------------


def qrange(t: g.Tensor) -> tuple[int, int]:
    if t.qtype is None:
        raise EdgesynthError(f"tensor {t.name} is not an integer tensor")
    return t.qtype.lo, t.qtype.hi


# -- lowering ----------------------------------------------------------------------------------


class Lowering:
    def __init__(self, graph: g.Graph) -> None:
        self.graph = graph
        self.producer = {t: n for n in graph.nodes for t in n.outputs}
        self.consumers: dict[str, list[g.Node]] = {}
        for n in graph.nodes:
            for t in n.inputs:
                self.consumers.setdefault(t, []).append(n)
        self.alias: dict[str, str] = {}
        self.errors: list[EdgesynthError] = []
        self.warnings: list[str] = []
        self.saturate_additions = False  # DORY's 8-bit storage of unclipped additions
        self.matcher = Matcher(graph)

    def where(self, node: g.Node) -> str:
        return f"ONNX node {node.source or node.name}"

    def fail(self, node: g.Node, message: str) -> None:
        self.errors.append(EdgesynthError(f"{self.where(node)}: {message}"))

    def root(self, tensor: str) -> str:
        while tensor in self.alias:
            tensor = self.alias[tensor]
        return tensor

    def shape3(self, tensor: str) -> tuple[int, int, int]:
        shape = self.graph.tensors[tensor].shape
        if len(shape) == 3:
            return (shape[0], shape[1], shape[2])
        if len(shape) == 2:
            return (shape[0], 1, shape[1])
        if len(shape) == 1:
            return (shape[0], 1, 1)
        raise EdgesynthError(f"tensor {tensor} of shape {shape} is not 1-D or 2-D data")

    def single_consumer(self, tensor: str) -> g.Node | None:
        users = self.consumers.get(tensor, [])
        if len(users) == 1 and tensor not in self.graph.outputs:
            return users[0]
        return None

    def chain(self, head: g.Node, kind: str, taken: set[str]) -> list[g.Node]:
        """The requantization/clip nodes that follow `head` one after another, each the only
        reader of the previous value (the pattern `kind` of `FUSION_PATTERNS`)."""
        return self.matcher.follow(head, FUSION_PATTERNS[kind], taken)[1:]

    def bits(self, tensor: str) -> int:
        t = self.graph.tensors[tensor]
        lo, hi = qrange(t)
        return storage_for(lo, hi, self.shape3(tensor)[0]).bits

    def cut_before_eltwise(self, start: str, chain: list[g.Node]) -> list[g.Node]:
        """When the chain ends in an addition, store the narrowest value on the way (the first
        one, on ties) and leave the rest to the addition as its input requantization."""
        end = chain[-1].output if chain else start
        reader = self.single_consumer(end)
        if not chain or not isinstance(reader, g.Eltwise):
            return chain
        tensors = [start, *(n.output for n in chain)]
        widths = [self.bits(t) for t in tensors]
        return chain[: widths.index(min(widths))]


def addition_chain(chain: list[g.Node]) -> list[g.Node]:
    """What an element-wise layer fuses after its sum: its own requantization (the first node)
    and the clips (ReLU) that follow; a later rescaling requantization is a layer of its own (the
    exporters record its output as a layer: NEMO's `relu` module after an `add`)."""
    for k, node in enumerate(chain[1:], start=1):
        if not _is_clip(node):
            return chain[:k]
    return chain


def _is_clip(node: g.Node) -> bool:
    if isinstance(node, g.Clip | g.Activation):
        return True
    if isinstance(node, g.Requantize):
        scalar = not isinstance(node.mul, np.ndarray) and not isinstance(node.add, np.ndarray)
        return scalar and int(node.mul) == int(node.div) and int(node.add) == 0
    return False


def to_step(node: g.Node) -> Step:
    src = node.source or node.name
    if isinstance(node, g.Requantize):
        lo = None if node.lo <= -WIDE else int(node.lo)
        hi = None if node.hi >= WIDE else int(node.hi)
        mul = node.mul if isinstance(node.mul, np.ndarray) else int(node.mul)
        add = node.add if isinstance(node.add, np.ndarray) else int(node.add)
        div = node.div
        if isinstance(div, np.ndarray):
            if np.all(div == div.flat[0]):
                div = int(div.flat[0])
            else:
                raise EdgesynthError(f"ONNX node {src}: per-channel divisors are not supported")
        if isinstance(mul, np.ndarray):
            mul = mul.astype(np.int64) if mul.dtype != object else mul
        if isinstance(add, np.ndarray):
            add = add.astype(np.int64) if add.dtype != object else add
        return Step(mul, add, int(div), node.rounding, lo, hi, src)
    if isinstance(node, g.Clip):
        return Step(1, 0, 1, "floor", int(node.lo), int(node.hi), src)
    if isinstance(node, g.Activation) and node.kind == "relu":
        return Step(1, 0, 1, "floor", 0, None, src)
    raise EdgesynthError(f"{node.name}: `{node.op}` is not a requantization")


def lower_graph(
    graph: g.Graph, *, saturate_additions: bool = False
) -> tuple[list[PulpLayer], g.Graph, list[str]]:
    """Fuse `graph` into layers. Returns the layers, the graph they compute (a copy of `graph`,
    with the saturations storage adds) and warnings. Raises MultipleErrors naming every node the
    target cannot run."""
    graph = copy.copy(graph)
    graph.nodes = [copy.copy(n) for n in graph.nodes]
    graph.tensors = {k: copy.copy(v) for k, v in graph.tensors.items()}
    graph.outputs = list(graph.outputs)
    expand_concats(graph)
    lw = Lowering(graph)
    lw.saturate_additions = saturate_additions
    taken: set[str] = set()
    groups: list[tuple[g.Node, list[g.Node], list[g.Node]]] = []  # main, pre, chain

    for node in graph.nodes:
        if isinstance(node, ALIAS_OPS):
            lw.alias[node.output] = node.inputs[0]
            taken.add(node.name)
    for node in graph.nodes:
        if isinstance(node, g.Conv | g.Linear | g.Pool):
            chain = lw.chain(node, "layer", taken)
            chain = lw.cut_before_eltwise(node.output, chain)
            taken.update(n.name for n in chain)
            taken.add(node.name)
            groups.append((node, [], chain))
    for node in graph.nodes:
        if isinstance(node, g.Eltwise) and node.name not in taken:
            pre: list[list[g.Node]] = []
            for t in node.inputs:
                steps: list[g.Node] = []
                reader: g.Node = node
                p = lw.producer.get(t)
                while (
                    isinstance(p, STEP_OPS)
                    and p.name not in taken
                    and lw.single_consumer(p.output) is reader
                ):
                    steps.insert(0, p)
                    reader, p = p, lw.producer.get(p.inputs[0])
                taken.update(n.name for n in steps)
                pre.append(steps)
            chain = lw.chain(node, "addition", taken)
            chain = addition_chain(chain)
            taken.update(n.name for n in chain)
            taken.add(node.name)
            groups.append((node, pre, chain))
    for node in graph.nodes:
        if isinstance(node, STEP_OPS) and node.name not in taken:
            chain = lw.chain(node, "requantization", taken)
            chain = addition_chain([node, *chain])
            taken.update(n.name for n in chain)
            groups.append((node, [], chain))
    for node in graph.nodes:
        if node.name not in taken:
            lw.fail(node, f"`{node.op}` is not supported by the gap8 target")
    position = {n.name: i for i, n in enumerate(graph.nodes)}
    groups.sort(key=lambda grp: position[grp[0].name])

    layers: list[PulpLayer] = []
    produced = set(graph.inputs)
    for main, pre, chain in groups:
        try:
            layer = _make_layer(lw, len(layers), main, pre, chain)
        except EdgesynthError as err:
            lw.errors.append(err)
            continue
        for t in layer.inputs:
            if t not in produced:
                lw.errors.append(
                    EdgesynthError(
                        f"ONNX node {layer.name}: reads {t}, which no layer stores (a reshape "
                        "between layers is not supported by the gap8 target)"
                    )
                )
        produced.add(layer.output)
        layers.append(layer)
    for out in graph.outputs:
        if lw.root(out) not in produced:
            lw.errors.append(EdgesynthError(f"graph output {out} is not stored by any layer"))
    if lw.errors:
        raise MultipleErrors(lw.errors)
    graph.outputs = [lw.root(t) for t in graph.outputs]
    return layers, graph, lw.warnings


def _make_layer(
    lw: Lowering, index: int, main: g.Node, pre: list[list[g.Node]], chain: list[g.Node]
) -> PulpLayer:
    steps = [to_step(n) for n in chain if n is not main]
    common, in_ranges = _layer_io(lw, index, main, pre, chain)
    lo, hi = in_ranges[0]
    if isinstance(main, g.Conv):
        layer = _conv_layer(main, steps, lo, hi, common)
    elif isinstance(main, g.Linear):
        layer = _linear_layer(main, steps, lo, hi, common)
    elif isinstance(main, g.Pool):
        layer = _pool_layer(main, steps, lo, hi, common)
    elif isinstance(main, g.Eltwise):
        layer = _addition_layer(main, pre, steps, in_ranges, common)
    else:  # a lone requantization: an element-wise layer of one input
        layer = PulpLayer(
            kind="eltwise",
            out_storage=Storage(32, True),
            steps=[to_step(n) for n in chain],
            pre_steps=[[]],
            acc_range=(lo, hi),
            **common,
        )
    if isinstance(main, g.Conv | g.Linear | g.Pool) and layer.steps:
        layer.acc_tensor = main.output
    _finish_layer(lw, layer)
    return layer


def _layer_io(
    lw: Lowering, index: int, main: g.Node, pre: list[list[g.Node]], chain: list[g.Node]
) -> tuple[dict[str, Any], list[tuple[int, int]]]:
    """The fields every kind of layer has (name, inputs and output with their shapes and
    storage, the nodes fused), and the integer range of each input."""
    name = (
        main.name if not isinstance(main, STEP_OPS) else (main.source or main.name).split(", ")[-1]
    )
    out_tensor = chain[-1].output if chain else main.output
    pre_nodes = [n for steps in pre for n in steps]
    nodes = [n.name for n in pre_nodes] + [main.name] + [n.name for n in chain if n is not main]
    sources: list[str] = []
    for n in [*pre_nodes, main, *chain]:
        for src in (n.source or n.name).split(", "):
            if src not in sources:
                sources.append(src)
    inputs = [lw.root(t) for t in _raw_inputs(main, pre)]
    in_shapes = [lw.shape3(t) for t in inputs]
    in_ranges = [qrange(lw.graph.tensors[t]) for t in inputs]
    in_storage = [
        storage_for(lo, hi, s[0]) for (lo, hi), s in zip(in_ranges, in_shapes, strict=True)
    ]
    out_shape = lw.shape3(out_tensor)
    common = dict(
        index=index,
        name=name,
        inputs=inputs,
        output=out_tensor,
        in_shapes=in_shapes,
        in_storage=in_storage,
        out_shape=out_shape,
        nodes=nodes,
        sources=sources,
    )
    return common, in_ranges


def _raw_inputs(main: g.Node, pre: list[list[g.Node]]) -> list[str]:
    """The tensors the layer reads: before the input requantizations an addition fuses."""
    if isinstance(main, STEP_OPS):
        return [main.inputs[0]]
    if pre:
        return [
            steps[0].inputs[0] if steps else t for steps, t in zip(pre, main.inputs, strict=True)
        ]
    return list(main.inputs)


def _window(
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """A sliding window in two dimensions: 1-D data is one row, (C, 1, L)."""
    if len(kernel) == 1:
        return (1, kernel[0]), (1, stride[0]), (1, dilation[0]), (0, pads[0], 0, pads[1])
    return tuple(kernel), tuple(stride), tuple(dilation), tuple(pads)


def _conv_layer(
    main: g.Conv, steps: list[Step], lo: int, hi: int, common: dict[str, Any]
) -> PulpLayer:
    if main.transposed:
        raise EdgesynthError(f"ONNX node {common['name']}: transposed convolution is not supported")
    kernel, stride, dilation, pads = _window(main.kernel, main.stride, main.dilation, main.pads)
    weight = main.weight[:, :, None, :] if main.rank == 1 else main.weight
    weight = np.ascontiguousarray(weight.transpose(0, 2, 3, 1)).astype(np.int64)
    bias = None if main.bias is None else np.asarray(main.bias).astype(np.int64)
    acc = accumulator_range(main.weight, bias, lo, hi, padded=any(pads))
    return PulpLayer(
        kind="conv",
        out_storage=Storage(32, True),
        steps=steps,
        weight=weight,
        w_storage=_weight_storage(weight),
        bias=bias,
        kernel=kernel,
        stride=stride,
        dilation=dilation,
        pads=pads,
        groups=main.groups,
        acc_range=acc,
        **common,
    )


def _linear_layer(
    main: g.Linear, steps: list[Step], lo: int, hi: int, common: dict[str, Any]
) -> PulpLayer:
    """A fully-connected layer: its weights in the (C, H, W) order of the data it reads, which
    it reads as one vector."""
    c, h, w = common["in_shapes"][0]
    weight = main.weight.reshape(main.weight.shape[0], c, h, w).transpose(0, 2, 3, 1)
    weight = np.ascontiguousarray(weight.reshape(weight.shape[0], 1, 1, -1)).astype(np.int64)
    bias = None if main.bias is None else np.asarray(main.bias).astype(np.int64)
    acc = accumulator_range(main.weight, bias, lo, hi, padded=False)
    common["in_shapes"] = [(c * h * w, 1, 1)]
    return PulpLayer(
        kind="linear",
        out_storage=Storage(32, True),
        steps=steps,
        weight=weight,
        w_storage=_weight_storage(weight),
        bias=bias,
        acc_range=acc,
        **common,
    )


def _pool_layer(
    main: g.Pool, steps: list[Step], lo: int, hi: int, common: dict[str, Any]
) -> PulpLayer:
    """Max pooling, or a window sum (an integer average pool is a sum then a requantization)."""
    name = common["name"]
    if main.kind not in ("max", "sum"):
        raise EdgesynthError(
            f"ONNX node {name}: `{main.kind}` pooling with method {main.method} is not "
            "supported (integer average pooling is a window sum then a requantization)"
        )
    if main.ceil:
        raise EdgesynthError(f"ONNX node {name}: ceil_mode pooling is not supported")
    if main.max_floor is not None:
        raise EdgesynthError(f"ONNX node {name}: a max floor is not supported")
    kernel, stride, dilation, pads = _window(main.kernel, main.stride, main.dilation, main.pads)
    if main.kind == "sum":
        count = kernel[0] * kernel[1]
        padded = any(pads)
        acc = (count * (min(lo, 0) if padded else lo), count * (max(hi, 0) if padded else hi))
    else:
        acc = (lo, hi)
    return PulpLayer(
        kind="pool",
        out_storage=Storage(32, True),
        steps=steps,
        kernel=kernel,
        stride=stride,
        dilation=dilation,
        pads=pads,
        pool_kind=main.kind,
        acc_range=acc,
        **common,
    )


def _addition_layer(
    main: g.Eltwise,
    pre: list[list[g.Node]],
    steps: list[Step],
    in_ranges: list[tuple[int, int]],
    common: dict[str, Any],
) -> PulpLayer:
    """A two-input addition (or product), each input with its own requantization first."""
    name, in_shapes = common["name"], common["in_shapes"]
    if main.kind not in ("add", "mul"):
        raise EdgesynthError(f"ONNX node {name}: element-wise `{main.kind}` is not supported")
    if len(main.inputs) != 2:
        raise EdgesynthError(
            f"ONNX node {name}: additions of {len(main.inputs)} tensors are not supported"
        )
    if in_shapes[0] != in_shapes[1]:
        raise EdgesynthError(f"ONNX node {name}: adds {in_shapes[0]} and {in_shapes[1]}")
    pre_steps = [[to_step(n) for n in ps] for ps in pre]
    ranges = []
    for (a, b), ps in zip(in_ranges, pre_steps, strict=True):
        for s in ps:
            a, b, peak = s.apply_range(a, b)
            if 2 * peak + 2 * s.div >= SAFE:
                raise EdgesynthError(f"ONNX node {s.source}: intermediate beyond 64 bits")
        ranges.append((a, b))
    if main.kind == "mul":
        ends = [p * q for p in ranges[0] for q in ranges[1]]
        acc = (min(ends), max(ends))
    else:
        acc = (ranges[0][0] + ranges[1][0], ranges[0][1] + ranges[1][1])
    return PulpLayer(
        kind="eltwise",
        out_storage=Storage(32, True),
        steps=steps,
        pre_steps=pre_steps,
        acc_range=acc,
        eltwise_op=main.kind,
        **common,
    )


def _weight_storage(weight: np.ndarray) -> Storage:
    lo, hi = int(weight.min(initial=0)), int(weight.max(initial=0))
    per_channel = int(np.prod(weight.shape[1:]))
    return storage_for(min(lo, 0), hi, per_channel)


def _finish_layer(lw: Lowering, layer: PulpLayer) -> None:
    """Storage of the output, the accumulator width, and the proof that no 64-bit intermediate
    overflows. An addition the graph leaves unclipped is stored exactly, in a wider container
    when its range needs it (NEMO's integer add of two 8-bit values reaches 9 bits, and the
    exporters' own outputs show such values); with `saturate_additions` it is saturated to its
    inputs' width instead, as DORY stores it (`_saturate`)."""
    lo, hi = layer.acc_range
    if max(abs(lo), abs(hi)) >= SAFE:
        raise EdgesynthError(f"ONNX node {layer.name}: the accumulator can reach {lo}..{hi}")
    layer.wide_acc = lo < -(1 << 31) or hi > (1 << 31) - 1
    for step in layer.steps:
        lo, hi, peak = step.apply_range(lo, hi)
        if 2 * peak + 2 * step.div >= SAFE:
            raise EdgesynthError(
                f"ONNX node {step.source}: the requantization can reach {peak}, beyond 64-bit "
                "arithmetic"
            )
    tensor = lw.graph.tensors[layer.output]
    if tensor.qtype is not None:
        lo, hi = max(lo, tensor.qtype.lo), min(hi, tensor.qtype.hi)
    readers = lw.consumers.get(layer.output, [])
    requantized_next = any(isinstance(n, STEP_OPS) for n in readers)
    if (
        lw.saturate_additions
        and layer.kind == "eltwise"
        and layer.eltwise_op == "add"
        and len(layer.inputs) == 2
        and not requantized_next
    ):
        widest = max(s.bits for s in layer.in_storage)
        target = Storage(widest, lo < 0)
        if widest <= 8 and (lo < target.lo or hi > target.hi):
            _saturate(lw, layer, target)
            lo, hi = max(lo, target.lo), min(hi, target.hi)
    layer.out_storage = storage_for(lo, hi, layer.out_shape[0])


def _saturate(lw: Lowering, layer: PulpLayer, target: Storage) -> None:
    """Clip an addition the graph leaves unclipped to its inputs' width, in the layer and in the
    graph (so the reference computes what the C stores)."""
    graph = lw.graph
    lo, hi = target.lo, target.hi
    last = graph.node(layer.nodes[-1])
    if isinstance(last, g.Requantize):
        last.lo, last.hi = max(last.lo, lo), min(last.hi, hi)
        layer.steps[-1].lo = last.lo
        layer.steps[-1].hi = last.hi
    else:
        name = graph.unique_name(f"{layer.output}_saturated")
        node = g.Clip(
            name=name, inputs=[layer.output], outputs=[name], source=layer.name, lo=lo, hi=hi
        )
        graph.add_tensor(name, graph.tensors[layer.output].shape, graph.tensors[layer.output].qtype)
        for n in graph.nodes:
            n.inputs = [name if t == layer.output else t for t in n.inputs]
        graph.outputs = [name if t == layer.output else t for t in graph.outputs]
        for alias, root in lw.alias.items():
            if root == layer.output:
                lw.alias[alias] = name
        graph.nodes.insert(graph.nodes.index(last) + 1, node)
        layer.steps.append(Step(1, 0, 1, "floor", lo, hi, layer.name))
        layer.nodes.append(name)
        layer.output = name
    graph.tensors[layer.output].qtype = g.QType(target.bits, target.signed)
    lw.warnings.append(
        f"ONNX node {layer.name}: the addition is not clipped in the graph; its result is "
        f"saturated to {lo}..{hi} as DORY stores it"
    )
