"""The network graph: named tensors with shapes and quantization types, and operators with exact
semantics. Every front end produces one; every target lowers one.

Conventions:
- Shapes leave out the batch: (C, H, W) for images, (C, L) for sequences, (F,) for vectors.
  Data is channels-first.
- A tensor's `qtype` says how its integers are read: bits, signedness and the real value of one
  step (`scale`). A float tensor (before quantization) has `qtype=None`.
- Operators carry their parameters (weights, biases, multipliers) as NumPy arrays; an integer
  graph holds int64 arrays, a float graph float64. What each operator computes is defined once,
  in `edgesynth.sim.graph`, on top of `edgesynth.sim.ops`.
- Placement (processors, memory offsets, DRAM addresses, tiles) is never part of the graph: it is
  a target's plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.intrange import int_range

Shape = tuple[int, ...]
Pads = tuple[int, ...]  # per spatial axis (before..., after...): 2-D (top, left, bottom, right)

ROUNDING_MODES = ("floor", "trunc", "half_up", "half_away", "half_even")


@dataclass(frozen=True)
class QType:
    """An integer tensor type: `bits` wide, signed or not; real value = integer x `scale`."""

    bits: int
    signed: bool = True
    scale: float | None = None  # real value of one step; None when the graph does not know it

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 64:
            raise ValueError(f"QType bits must be 1..64, not {self.bits}")

    @property
    def lo(self) -> int:
        return int_range(self.bits, self.signed)[0]

    @property
    def hi(self) -> int:
        return int_range(self.bits, self.signed)[1]

    def with_scale(self, scale: float | None) -> QType:
        return replace(self, scale=scale)

    def __str__(self) -> str:
        kind = "int" if self.signed else "uint"
        scale = f"*{self.scale:.4g}" if self.scale is not None else ""
        return f"{kind}{self.bits}{scale}"


INT8 = QType(8)
INT32 = QType(32)


@dataclass
class Tensor:
    name: str
    shape: Shape
    qtype: QType | None = None  # None: float

    @property
    def is_float(self) -> bool:
        return self.qtype is None

    def __str__(self) -> str:
        return f"{self.name}[{'x'.join(map(str, self.shape))}:{self.qtype or 'float'}]"


# -- operators ----------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Node:
    """One operator. `inputs`/`outputs` name tensors; `name` is unique in the graph (front ends use
    the source's own names: ONNX node names, YAML layer names, module names)."""

    op: ClassVar[str] = "node"
    name: str
    inputs: list[str]
    outputs: list[str]
    source: str = ""  # where it came from, for messages (file:line, ONNX node, module)
    folded: list[str] = field(default_factory=list)  # operators a pass folded into this one

    @property
    def output(self) -> str:
        return self.outputs[0]

    @property
    def op_names(self) -> tuple[str, ...]:
        """The names tables of operators know it by: its `op`, and `op:kind` for operators with
        kinds (`eltwise:add`, `activation:relu`): fusion patterns, number formats' ties."""
        kind = getattr(self, "kind", None)
        return (self.op, f"{self.op}:{kind}") if isinstance(kind, str) else (self.op,)

    def params(self) -> dict[str, object]:
        """The operator's parameters (everything but names and wiring), for printing."""
        skip = {"name", "inputs", "outputs", "source", "folded"}
        out: dict[str, object] = {}
        for f in fields(self):
            if f.name in skip:
                continue
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value = f"array{tuple(value.shape)}"
            out[f.name] = value
        return out


@dataclass(kw_only=True)
class Conv(Node):
    """Convolution (1-D with a 3-D weight, 2-D with a 4-D weight): an exact sum of products plus
    `bias`, in the input x weight product's units (integer graphs: the accumulator).

    `weight` is (out, in/groups, kh[, kw]). `pads` zero-pads each spatial axis before and after.
    `transposed`: the fractionally strided convolution as a convolution runs it: zero-stuff the
    input by `stride`, then convolve with stride 1; `weight` is already in convolution form
    (channels swapped, kernel flipped) and `pads` are the convolution's pads after stuffing, the
    `output_padding` added at the end of each axis.
    """

    op: ClassVar[str] = "conv"
    weight: np.ndarray
    bias: np.ndarray | None = None
    stride: tuple[int, ...] = (1, 1)
    pads: Pads = (0, 0, 0, 0)
    dilation: tuple[int, ...] = (1, 1)
    groups: int = 1
    transposed: bool = False
    output_padding: tuple[int, ...] = (0, 0)

    @property
    def rank(self) -> int:
        return self.weight.ndim - 2

    @property
    def kernel(self) -> tuple[int, ...]:
        return tuple(int(k) for k in self.weight.shape[2:])

    @property
    def out_channels(self) -> int:
        return int(self.weight.shape[0])


@dataclass(kw_only=True)
class Linear(Node):
    """y = W x + bias on a vector (a (C, H, W) input is read flattened in C, H, W order)."""

    op: ClassVar[str] = "linear"
    weight: np.ndarray  # (out, in)
    bias: np.ndarray | None = None


@dataclass(kw_only=True)
class Pool(Node):
    """Max or average pooling over windows of `kernel` (1-D or 2-D), no implicit padding beyond
    `pads` (zeros). `sum`: the exact integer sum of each window (an integer average pooling
    before the requantization that divides it; padded positions add zero).

    Average methods: `trunc` (sum / count toward zero), `half_away` (rounded half away from zero),
    `floor`, `half_up`; `tree`: Gati's pairwise-average tree ((a + b) >> 1 repeatedly, see
    `sim.ops.tree_average`); `float` for float graphs. `count_include_pad`: padded zeros count.
    `max_floor`: the max starts from this value instead of the first element (a hardware max
    register reset to 0). `ceil`: output size rounds up (windows past the end see zeros).
    """

    op: ClassVar[str] = "pool"
    kind: str  # max | avg | sum
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...] = (1, 1)
    pads: Pads = (0, 0, 0, 0)
    ceil: bool = False
    method: str = "trunc"
    count_include_pad: bool = True
    max_floor: int | None = None


def pool_output_size(
    size: int,
    kernel: int,
    stride: int,
    pad_before: int,
    pad_after: int,
    ceil: bool,
    dilation: int = 1,
) -> int:
    """A `Pool`'s output length along one axis (ONNX/PyTorch rule: in ceil mode the last window
    must start inside the data or its leading padding); 0 when the window does not fit."""
    room = size + pad_before + pad_after - (dilation * (kernel - 1) + 1)
    if room < 0:
        return 0
    out = (-(-room // stride) if ceil else room // stride) + 1
    if ceil and (out - 1) * stride >= size + pad_before:
        out -= 1
    return out


@dataclass(kw_only=True)
class GlobalPool(Node):
    """Max or average over every spatial position: (C, ...) -> (C,) ... kept as (C, 1, 1)."""

    op: ClassVar[str] = "global_pool"
    kind: str  # max | avg
    method: str = "trunc"


@dataclass(kw_only=True)
class Eltwise(Node):
    """Left-to-right element-wise operation, exact (no clipping). The inputs have equal shapes,
    or broadcast against each other by NumPy's rules (a `Constant` of shape (C, 1, 1) against a
    (C, H, W) tensor: one value per channel)."""

    op: ClassVar[str] = "eltwise"
    kind: str  # add | sub | mul | xor | or


@dataclass(kw_only=True)
class Constant(Node):
    """A tensor fixed when the graph is built (no inputs): the bias, scale or offset an
    element-wise operator applies. `value` has the tensor's per-sample shape and is the same
    for every sample of a batch (it is evaluated with a batch axis of 1, which broadcasts)."""

    op: ClassVar[str] = "constant"
    value: np.ndarray


@dataclass(kw_only=True)
class Requantize(Node):
    """y = clip(R((x * mul + add) / div), lo, hi) in exact integers (64 bits and beyond).

    `mul` and `add` are integers, per channel (an array over axis 0) or scalar; `div` is a
    positive integer (not always a power of two). R is the rounding `rounding` names
    (`ROUNDING_MODES`). This one operator covers MAX7800x's output shift, Gati's tail block,
    NEMO's kappa/lambda/D, Quantlab's Mul/Add/Div/Floor and Deeploy's RequantShift.
    """

    op: ClassVar[str] = "requantize"
    mul: np.ndarray | int = 1
    add: np.ndarray | int = 0
    div: np.ndarray | int = 1
    rounding: str = "half_up"
    lo: int = -128
    hi: int = 127


@dataclass(kw_only=True)
class ShiftScaleBias(Node):
    """A DSP pipeline's staged requantization (xDNN after its systolic array), exactly:
    wrap to `acc_bits`, `>> pre` saturated to `bits`, `x scale`, `>> post` wrapped to `bits`,
    `+ bias` saturated to `bits`, then clipped to [lo, hi]. Shifts are arithmetic (floor); see
    `edgesynth.sim.staged`. `pre`, `scale`, `post`, `bias` are per channel (axis 0) or scalar.
    """

    op: ClassVar[str] = "shift_scale_bias"
    pre: np.ndarray | int
    scale: np.ndarray | int
    post: np.ndarray | int
    bias: np.ndarray | int = 0
    bits: int = 16
    acc_bits: int = 48
    lo: int = -32768
    hi: int = 32767


@dataclass(kw_only=True)
class Clip(Node):
    op: ClassVar[str] = "clip"
    lo: int | float
    hi: int | float


@dataclass(kw_only=True)
class Activation(Node):
    """relu: max(x, 0); abs: |x|; sigmoid/tanh on float graphs, or on integers through Gati's
    lookup (input step 2**-`exponent`, output step 2**-7, see `sim.ops.lookup_activation`).
    Float graphs only: hardsigmoid max(0, min(1, `alpha` x + `beta`)); hardswish
    x hardsigmoid(x) with alpha 1/6, beta 1/2; swish (SiLU) x sigmoid(x); softplus
    log(1 + e**x); mish x tanh(softplus(x))."""

    op: ClassVar[str] = "activation"
    kind: str  # relu | abs | sigmoid | tanh | hardsigmoid | hardswish | swish | mish | softplus
    exponent: int = 0
    alpha: float = 0.2  # hardsigmoid only (ONNX's defaults)
    beta: float = 0.5

    def params(self) -> dict[str, object]:
        out = super().params()
        if self.kind != "hardsigmoid":
            del out["alpha"], out["beta"]
        return out


@dataclass(kw_only=True)
class BatchNorm(Node):
    """Float graphs only: y = (x - mean) / sqrt(var + eps) * gamma + beta, per channel. Folded
    into the preceding convolution by `ir.passes.fold_batchnorm`."""

    op: ClassVar[str] = "batchnorm"
    gamma: np.ndarray
    beta: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    eps: float = 1e-5


@dataclass(kw_only=True)
class Flatten(Node):
    """(C, H, W) -> (C*H*W,) in C, H, W order."""

    op: ClassVar[str] = "flatten"


@dataclass(kw_only=True)
class Reshape(Node):
    """Reinterpret the data (C order) with another per-sample shape."""

    op: ClassVar[str] = "reshape"
    shape: Shape


@dataclass(kw_only=True)
class Concat(Node):
    """Join inputs along the channel axis (axis 0 of the per-sample shape)."""

    op: ClassVar[str] = "concat"


@dataclass(kw_only=True)
class Slice(Node):
    """Keep `start:stop:step` along the per-sample `axis` (channel dropping, row crops)."""

    op: ClassVar[str] = "slice"
    axis: int
    start: int
    stop: int
    step: int = 1


@dataclass(kw_only=True)
class Quantize(Node):
    """Float -> integer at the graph's edge: clip(R(x / scale), lo, hi)."""

    op: ClassVar[str] = "quantize"
    scale: float
    rounding: str = "half_up"
    lo: int = -128
    hi: int = 127


@dataclass(kw_only=True)
class Dequantize(Node):
    """Integer -> float: x * scale."""

    op: ClassVar[str] = "dequantize"
    scale: float


@dataclass(kw_only=True)
class Softmax(Node):
    """Float softmax over the channel axis (host side)."""

    op: ClassVar[str] = "softmax"
    log: bool = False


@dataclass(kw_only=True)
class LeakyRelu(Node):
    """Float graphs: x where x >= 0, else `alpha` x (ONNX LeakyRelu)."""

    op: ClassVar[str] = "leaky_relu"
    alpha: float = 0.01


OPERATORS: dict[str, type[Node]] = {
    cls.op: cls
    for cls in (
        Conv,
        Linear,
        Pool,
        GlobalPool,
        Eltwise,
        Constant,
        Requantize,
        ShiftScaleBias,
        Clip,
        Activation,
        BatchNorm,
        Flatten,
        Reshape,
        Concat,
        Slice,
        Quantize,
        Dequantize,
        Softmax,
        LeakyRelu,
    )
}


# -- the graph ----------------------------------------------------------------------------------


@dataclass
class Graph:
    """Tensors by name, operators in execution order (every input produced before it is read)."""

    name: str
    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    source: str = ""  # the file it came from
    warnings: list[str] = field(default_factory=list)
    # What the source said about placement for one target, by node-name prefix (e.g. a vendor
    # YAML's processors and offsets). The graph's semantics never depend on it.
    hints: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)  # facts about the source (ONNX opset)

    # -- building -----------------------------------------------------------------------------
    def add_tensor(self, name: str, shape: Sequence[int], qtype: QType | None = None) -> Tensor:
        if name in self.tensors:
            raise ValueError(f"tensor {name!r} defined twice")
        tensor = Tensor(name, tuple(int(s) for s in shape), qtype)
        self.tensors[name] = tensor
        return tensor

    def add_input(self, name: str, shape: Sequence[int], qtype: QType | None = None) -> Tensor:
        tensor = self.add_tensor(name, shape, qtype)
        self.inputs.append(name)
        return tensor

    def add(self, node: Node, shape: Sequence[int], qtype: QType | None = None) -> Tensor:
        """Append `node` and define its (single) output tensor."""
        for name in node.inputs:
            if name not in self.tensors:
                raise ValueError(f"node {node.name!r} reads undefined tensor {name!r}")
        tensor = self.add_tensor(node.output, shape, qtype)
        self.nodes.append(node)
        return tensor

    def unique_name(self, base: str) -> str:
        taken = set(self.tensors) | {n.name for n in self.nodes}
        if base not in taken:
            return base
        k = 1
        while f"{base}_{k}" in taken:
            k += 1
        return f"{base}_{k}"

    # -- queries ------------------------------------------------------------------------------
    def tensor(self, name: str) -> Tensor:
        return self.tensors[name]

    def producer(self, tensor: str) -> Node | None:
        for node in self.nodes:
            if tensor in node.outputs:
                return node
        return None

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    @property
    def is_integer(self) -> bool:
        """Every activation tensor is integer (the graph can run bit-exactly)."""
        return all(self.tensors[t].qtype is not None for n in self.nodes for t in n.outputs)

    def validate(self) -> None:
        """Wiring and order: every input defined before use, names unique, outputs produced."""
        defined = set(self.inputs)
        names: set[str] = set()
        for node in self.nodes:
            if node.name in names:
                raise EdgesynthError(f"graph {self.name}: two operators are named {node.name!r}")
            names.add(node.name)
            for t in node.inputs:
                if t not in defined:
                    raise EdgesynthError(
                        f"graph {self.name}: operator {node.name!r} reads {t!r} before it is "
                        "produced"
                    )
            defined.update(node.outputs)
        for t in self.outputs:
            if t not in defined:
                raise EdgesynthError(f"graph {self.name}: output {t!r} is never produced")

    def summary(self) -> str:
        """One line per operator: name, op, inputs -> output tensor, parameters."""
        lines = [f"graph {self.name}: inputs " + ", ".join(map(str, self._ts(self.inputs)))]
        for node in self.nodes:
            params = ", ".join(f"{k}={v}" for k, v in node.params().items())
            outs = ", ".join(map(str, self._ts(node.outputs)))
            lines.append(
                f"  {node.name}: {node.op}({', '.join(node.inputs)}) -> {outs}"
                + (f"  [{params}]" if params else "")
            )
        lines.append("outputs " + ", ".join(self.outputs))
        return "\n".join(lines)

    def _ts(self, names: Sequence[str]) -> list[Tensor]:
        return [self.tensors[n] for n in names]
