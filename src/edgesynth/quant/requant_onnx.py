"""A calibrated float graph -> the integer network as RequantShift-dialect ONNX (Deeploy's form:
`Conv`/`MatMul` on integer-valued float tensors, `RequantShift(acc, mul, add)` with attributes
`div`, `n_levels_out`, `signed`; `MaxPool`, `Flatten`, `Reshape`, `Relu`, `Add`), which the
integer ONNX front end (`frontends.onnx_int`) reads like any exporter's file.

What each float operator becomes (see `quant.requant_shift` for the arithmetic):
- Conv / Linear (+ a ReLU, or a Clip(0, c), reading it alone, possibly after max pools):
  the layer on the input's codes, then one RequantShift to the output's scale; the ReLU after
  a max pool is then an identity on unsigned codes;
- Add of two tensors: each operand requantized to 1/16 of the output step (16-bit), summed,
  then one RequantShift to the output (8-bit, unsigned when a ReLU follows);
- Mul of two tensors: the product of the codes, then one RequantShift to the output, whose
  scale is defined from the multiplier (s_a x s_b x 2**shift / mul) so that the rounding is the
  fake-quantized network's;
- MaxPool, Flatten, Reshape, ReLU: on the codes, the scale unchanged;
- Concat along channels: on the codes; its inputs share one scale (the concatenation's,
  from its calibrated range), given them where they are requantized (`Writer.tie`);
- a trailing Softmax / LogSoftmax: kept, the host's (the integer front end leaves it out).

The input's type (int8 or uint8) is the ONNX input's element type; the scales of the input and
output (value = code x scale) are metadata `edgesynth.scale.<tensor>`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.frontends.onnx_int import SCALE_KEY
from edgesynth.ir import graph as g
from edgesynth.quant.requant_shift import (
    PtqOptions,
    QTensor,
    QuantizedLayer,
    activation,
    fit_multiplier,
    quantize_layer,
)

DOMAIN = "PACTOps"
OPSET = 11
SUM_SHIFT = 4  # an addition's operands are requantized to 2**-4 of the output step
SUM_BITS = 16

SUPPORTED = (
    "Conv, Gemm/MatMul, Relu, Clip(0, c) after a layer, MaxPool, AveragePool, "
    "GlobalAveragePool, Flatten, Reshape, Add, Mul of two tensors, Concat"
)


@dataclass(frozen=True)
class Operand:
    """An addition's operand requantized to the sum's grid: code' = round(value / `step`), read
    as code' x `term.scale` (step is term.scale to 16 significant bits: mul / 2**shift)."""

    step: float
    term: QTensor


class Writer:
    """One pass over the float graph in order, writing each operator's integer form (ONNX nodes
    and initializers) and recording the integer tensor of every float tensor (`q`)."""

    def __init__(
        self, graph: g.Graph, ranges: dict[str, tuple[float, float]], opts: PtqOptions
    ) -> None:
        from onnx import helper

        self.h = helper
        self.graph = graph
        self.ranges = ranges
        self.opts = opts
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.q: dict[str, QTensor] = {}  # float tensor -> its integer tensor
        self.layers: dict[str, QuantizedLayer] = {}  # float Conv/Linear -> its integers
        self.operands: dict[str, list[Operand]] = {}  # float Add -> its requantized operands
        self.errors: list[EdgesynthError] = []
        self.readers: dict[str, list[g.Node]] = {}
        for node in graph.nodes:
            for t in node.inputs:
                self.readers.setdefault(t, []).append(node)
        self.tied: dict[str, QTensor] = {}  # requantized tensor -> the concatenation's type
        self.concat_types: dict[str, QTensor] = {}  # float Concat output -> its type
        self.tie_concatenations()

    # -- helpers ------------------------------------------------------------------------------
    def where(self, node: g.Node) -> str:
        return node.source or f"node `{node.name}` ({node.op})"

    def refuse(self, node: g.Node, message: str) -> EdgesynthError:
        return EdgesynthError(f"{self.where(node)}: {message}", file=self.graph.source or None)

    def init(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        arr = np.asarray(value)
        exact = np.abs(arr).max(initial=0) <= 2**24
        self.inits.append(
            numpy_helper.from_array(arr.astype(np.float32 if exact else np.int64), name)
        )
        return name

    def sole_reader(self, tensor: str) -> g.Node | None:
        users = self.readers.get(tensor, [])
        if len(users) == 1 and tensor not in self.graph.outputs:
            return users[0]
        return None

    def requant_shift(
        self, name: str, x: str, mul: np.ndarray, add: np.ndarray, shift: int, out: QTensor
    ) -> None:
        """`out` = RequantShift(x, mul, add) with div 2**shift."""
        h = self.h
        node = h.make_node(
            "RequantShift",
            [x, self.init(f"{name}.mul", mul), self.init(f"{name}.add", add)],
            [out.name],
            name=name,
            domain=DOMAIN,
            div=h.make_tensor("div", 1, [1], [float(1 << shift)]),
            n_levels_out=h.make_tensor("n_levels_out", 1, [1], [float(out.levels)]),
            signed=h.make_tensor("signed", 1, [1], [float(out.signed)]),
        )
        self.nodes.append(node)

    def per_channel(self, values: np.ndarray, tensor: str) -> np.ndarray:
        """Per-channel constants shaped to broadcast on channel axis 1 of `tensor`'s data."""
        rank = len(self.graph.tensors[tensor].shape)
        return np.asarray(values).reshape((-1,) + (1,) * (rank - 1))

    # -- output types -------------------------------------------------------------------------
    def output_type(self, out: str, nonnegative: bool = False) -> tuple[QTensor, list[g.Node]]:
        """`own_type`, on the scale of the concatenation it feeds, if any (`tie`)."""
        q, folded = self.own_type(out, nonnegative)
        return self.tie(out, q), folded

    def own_type(self, out: str, nonnegative: bool = False) -> tuple[QTensor, list[g.Node]]:
        """The integer type of a requantized result `out` and the float nodes folded into it: a
        ReLU (or Clip(0, c)) reading it alone, directly or after max pools. The network's
        output is `output_bits` wide (signed unless a ReLU ends the network)."""
        if self.is_output(out):
            lo, hi = self.ranges[out]
            return activation(out, lo, hi, self.opts.output_bits, False), []
        reader = self.sole_reader(out)
        relu = isinstance(reader, g.Activation) and reader.kind == "relu"
        if relu or (isinstance(reader, g.Clip) and float(reader.lo) == 0.0):
            lo, hi = self.ranges[reader.output]
            top = hi if relu else min(hi, float(reader.hi))  # type: ignore[union-attr]
            bits = self.opts.output_bits if self.is_output(reader.output) else 8
            return activation(reader.output, lo, top, bits, True), [reader]
        tensor = out
        while isinstance(reader, g.Pool) and reader.kind == "max":
            tensor = reader.output
            reader = self.sole_reader(tensor)
        if tensor != out and isinstance(reader, g.Activation) and reader.kind == "relu":
            lo, hi = self.ranges[reader.output]
            return activation(out, lo, hi, 8, True), []
        lo, hi = self.ranges[out]
        return activation(out, lo, hi, 8, nonnegative), []

    def tie_concatenations(self) -> None:
        """Each concatenation's type (8 bits, from its calibrated range, unsigned when that
        is), recorded for the tensor requantized upstream of each input (through ReLUs and max
        pools read by nothing else), so that every input reaches it on that one scale."""
        for node in self.graph.nodes:
            if not isinstance(node, g.Concat):
                continue
            lo, hi = self.ranges[node.output]
            ctype = activation(node.output, lo, hi, 8, lo >= 0)
            self.concat_types[node.output] = ctype
            for t in node.inputs:
                self.tied.setdefault(self.requantized_at(t), ctype)

    def requantized_at(self, tensor: str) -> str:
        """The tensor upstream of `tensor` whose requantization sets its scale: back through
        ReLUs, max pools and views (Flatten, Reshape) that are their input's only reader."""
        while True:
            p = self.graph.producer(tensor)
            same = (
                (isinstance(p, g.Activation) and p.kind == "relu")
                or (isinstance(p, g.Pool) and p.kind == "max")
                or isinstance(p, g.Flatten | g.Reshape)
            )
            if not same or self.sole_reader(p.inputs[0]) is not p:
                return tensor
            tensor = p.inputs[0]

    def tie(self, out: str, q: QTensor) -> QTensor:
        """`q` on the scale of the concatenation `out` feeds: its width and signedness, or 7-bit
        unsigned codes where a ReLU folded into the requantization feeds a signed one."""
        ctype = self.tied.get(out)
        if ctype is None:
            return q
        if ctype.signed and not q.signed:
            return QTensor(q.name, ctype.scale, ctype.bits - 1, False)
        return QTensor(q.name, ctype.scale, ctype.bits, ctype.signed)

    def is_output(self, tensor: str) -> bool:
        """A graph output, or read only by the trailing Softmax (the host's)."""
        reader = self.sole_reader(tensor)
        return tensor in self.graph.outputs or (
            isinstance(reader, g.Softmax) and reader.output in self.graph.outputs
        )

    # -- operators ----------------------------------------------------------------------------
    def layer(self, node: g.Conv | g.Linear) -> list[g.Node]:
        if isinstance(node, g.Conv) and node.transposed:
            raise self.refuse(node, "transposed convolution is not quantized")
        x = self.q[node.inputs[0]]
        out, folded = self.output_type(node.output)
        ql = quantize_layer(node.weight, node.bias, x.scale, out, self.opts, self.where(node))
        self.layers[node.name] = ql
        acc = f"{node.output}_acc"
        wname = self.init(
            f"{node.name}.weight", ql.weight if isinstance(node, g.Conv) else ql.weight.T
        )
        h = self.h
        if isinstance(node, g.Conv):
            rank = node.rank
            self.nodes.append(
                h.make_node(
                    "Conv",
                    [x.name, wname],
                    [acc],
                    name=node.name,
                    kernel_shape=list(node.kernel),
                    strides=list(node.stride[:rank]),
                    pads=list(node.pads[: 2 * rank]),
                    dilations=list(node.dilation[:rank]),
                    group=int(node.groups),
                )
            )
        else:
            src = x.name
            if len(self.graph.tensors[node.inputs[0]].shape) != 1:
                src = f"{node.inputs[0]}_flat"
                self.nodes.append(h.make_node("Flatten", [x.name], [src], axis=1))
            self.nodes.append(h.make_node("MatMul", [src, wname], [acc], name=node.name))
        mul = self.per_channel(ql.mul, node.output)
        add = self.per_channel(ql.add, node.output)
        self.requant_shift(f"{node.name}.requant", acc, mul, add, ql.shift, out)
        self.q[node.output] = out
        for f in folded:
            self.q[f.output] = out
        return folded

    def add(self, node: g.Eltwise) -> list[g.Node]:
        if node.kind != "add" or len(node.inputs) != 2:
            raise self.refuse(
                node,
                f"element-wise `{node.kind}` of {len(node.inputs)} tensors is "
                "not quantized (an Add of two tensors is)",
            )
        shapes = {self.graph.tensors[t].shape for t in node.inputs}
        if len(shapes) != 1 or node.inputs[0] not in self.q or node.inputs[1] not in self.q:
            raise self.refuse(node, "adds a constant or broadcasts")
        out, folded = self.output_type(node.output)
        mid = out.scale / (1 << SUM_SHIFT)
        terms = []
        for k, t in enumerate(node.inputs):
            operand = self.q[t]
            mul, shift = fit_multiplier(np.array([operand.scale / mid]), self.where(node))
            term = QTensor(f"{node.output}_in{k}", mid, SUM_BITS, True)
            self.requant_shift(f"{node.name}.in{k}", operand.name, mul, np.zeros(1), shift, term)
            terms.append(term.name)
            step = operand.scale * 2.0**shift / float(mul[0])
            self.operands.setdefault(node.name, []).append(Operand(step, term))
        total = f"{node.output}_sum"
        self.nodes.append(self.h.make_node("Add", terms, [total], name=node.name))
        one = np.ones(1, dtype=np.int64)
        self.requant_shift(f"{node.name}.requant", total, one, 0 * one, SUM_SHIFT, out)
        self.q[node.output] = out
        for f in folded:
            self.q[f.output] = out
        return folded

    def product(self, node: g.Eltwise) -> list[g.Node]:
        """Mul(a, b): the codes multiplied (scale s_a x s_b), then one RequantShift to the
        output; the output's scale is s_a x s_b x 2**shift / mul exactly."""
        shapes = {self.graph.tensors[t].shape for t in node.inputs}
        if len(node.inputs) != 2 or len(shapes) != 1 or not all(t in self.q for t in node.inputs):
            raise self.refuse(node, "multiplies by a constant or broadcasts")
        a, b = (self.q[t] for t in node.inputs)
        out, folded = self.output_type(node.output)
        mul, shift = fit_multiplier(np.array([a.scale * b.scale / out.scale]), self.where(node))
        out = replace(out, scale=a.scale * b.scale * 2.0**shift / float(mul[0]))
        prod = f"{node.output}_prod"
        self.nodes.append(self.h.make_node("Mul", [a.name, b.name], [prod], name=node.name))
        self.requant_shift(f"{node.name}.requant", prod, mul, np.zeros(1), shift, out)
        self.q[node.output] = out
        for f in folded:
            self.q[f.output] = out
        return folded

    def same_scale(self, node: g.Node, op: str, **attrs: Any) -> None:
        """An operator on the codes that keeps the scale (pooling, views)."""
        x = self.q[node.inputs[0]]
        out = QTensor(node.output, x.scale, x.bits, x.signed)
        inputs = [x.name]
        if op == "Reshape":
            shape = [1, *self.graph.tensors[node.output].shape]
            inputs.append(self.init_shape(f"{node.name}.shape", shape))
        self.nodes.append(self.h.make_node(op, inputs, [out.name], name=node.name, **attrs))
        self.q[node.output] = out

    def init_shape(self, name: str, shape: list[int]) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(shape, dtype=np.int64), name))
        return name

    def max_pool(self, node: g.Pool) -> None:
        if node.kind != "max":
            raise self.refuse(node, f"{node.kind} pooling is not quantized")
        rank = len(node.kernel)
        if any(node.pads) and self.q[node.inputs[0]].signed:
            raise self.refuse(
                node,
                "padded max pooling of values that can be negative is not "
                "quantized (the integer pooling pads with zeros)",
            )
        self.same_scale(
            node,
            "MaxPool",
            kernel_shape=list(node.kernel),
            strides=list(node.stride),
            pads=list(node.pads[: 2 * rank]),
            dilations=list(node.dilation[:rank]),
            ceil_mode=int(node.ceil),
        )

    def avg_pool(self, node: g.Pool | g.GlobalPool) -> list[g.Node]:
        """The window average on the codes, then a RequantShift to the output's scale (the
        integer front end joins the two divisions: the average is not rounded on its own)."""
        x = self.q[node.inputs[0]]
        out, folded = self.output_type(node.output, not x.signed)
        mul, shift = fit_multiplier(np.array([x.scale / out.scale]), self.where(node))
        out = replace(out, scale=x.scale * 2.0**shift / float(mul[0]))  # exactly mul / 2**shift
        avg = f"{node.output}_avg"
        h = self.h
        if isinstance(node, g.GlobalPool):
            self.nodes.append(h.make_node("GlobalAveragePool", [x.name], [avg], name=node.name))
        else:
            rank = len(node.kernel)
            if node.ceil or (any(node.pads) and not node.count_include_pad):
                raise self.refuse(
                    node,
                    "average pooling with ceil_mode or padding left out of "
                    "the count divides by a varying count; not quantized",
                )
            attrs = dict(
                kernel_shape=list(node.kernel),
                strides=list(node.stride),
                pads=list(node.pads[: 2 * rank]),
                count_include_pad=1,
            )
            self.nodes.append(h.make_node("AveragePool", [x.name], [avg], name=node.name, **attrs))
        self.requant_shift(f"{node.name}.requant", avg, mul, np.zeros(1), shift, out)
        self.q[node.output] = out
        for f in folded:
            self.q[f.output] = out
        return folded

    def relu(self, node: g.Activation) -> None:
        x = self.q[node.inputs[0]]
        if not x.signed:  # unsigned codes: the ReLU changes nothing
            self.q[node.output] = x
            return
        out = QTensor(node.output, x.scale, x.bits, False)
        self.nodes.append(self.h.make_node("Relu", [x.name], [out.name], name=node.name))
        self.q[node.output] = out

    def concat(self, node: g.Concat) -> None:
        """The codes joined along channels: every input already on the concatenation's scale
        and within its codes (`tie`)."""
        ctype = self.concat_types[node.output]
        names = []
        for t in node.inputs:
            q = self.q.get(t)
            if q is None:
                raise self.refuse(node, f"concatenates `{t}`, which is not an activation")
            if q.scale != ctype.scale or q.lo < ctype.lo or q.hi > ctype.hi:
                raise self.refuse(
                    node,
                    f"input `{t}` cannot take the concatenation's scale (the quantizer gives it "
                    "to the network's input and where a Conv, Linear or Add produces the "
                    "input, through ReLUs, max pools and views; not to an average pool's output, "
                    "or a tensor two concatenations read)",
                )
            names.append(q.name)
        out = QTensor(node.output, ctype.scale, ctype.bits, ctype.signed)
        self.nodes.append(self.h.make_node("Concat", names, [out.name], name=node.name, axis=1))
        self.q[node.output] = out

    def softmax(self, node: g.Softmax) -> None:
        x = self.q[node.inputs[0]]
        op = "LogSoftmax" if node.log else "Softmax"
        self.nodes.append(self.h.make_node(op, [x.name], [node.output], name=node.name, axis=1))

    def visit(self, node: g.Node) -> list[g.Node]:
        """Write `node`; return the float nodes it folded in."""
        if isinstance(node, g.Conv | g.Linear):
            return self.layer(node)
        if isinstance(node, g.Eltwise) and node.kind == "mul":
            return self.product(node)
        if isinstance(node, g.Eltwise):
            return self.add(node)
        if isinstance(node, g.Pool | g.GlobalPool) and node.kind == "avg":
            return self.avg_pool(node)
        if isinstance(node, g.Pool):
            self.max_pool(node)
        elif isinstance(node, g.Activation) and node.kind == "relu":
            self.relu(node)
        elif isinstance(node, g.Flatten):
            self.same_scale(node, "Flatten", axis=1)
        elif isinstance(node, g.Reshape):
            self.same_scale(node, "Reshape")
        elif isinstance(node, g.Concat):
            self.concat(node)
        elif isinstance(node, g.Softmax) and node.output in self.graph.outputs:
            self.softmax(node)
        else:
            kind = node.kind if isinstance(node, g.Activation) else node.op
            raise self.refuse(
                node, f"`{kind}` is not quantized for gap8 (the quantizer takes {SUPPORTED})"
            )
        return []

    # -- the model ----------------------------------------------------------------------------
    def walk(self) -> None:
        folded: set[str] = set()
        poisoned: set[str] = set()
        for node in self.graph.nodes:
            if node.name in folded:
                continue
            if any(t in poisoned for t in node.inputs):
                poisoned.update(node.outputs)
                continue
            try:
                folded.update(n.name for n in self.visit(node))
            except EdgesynthError as err:
                self.errors.append(err)
                poisoned.update(node.outputs)
        if self.errors:
            raise MultipleErrors(self.errors)

    def model(self, name: str) -> Any:
        from onnx import TensorProto

        h = self.h
        (x,) = self.graph.inputs
        q_in = self.q[x]
        elem = TensorProto.INT8 if q_in.signed else TensorProto.UINT8
        shape = [1, *self.graph.tensors[x].shape]
        inputs = [h.make_tensor_value_info(x, elem, shape)]
        outputs, scales = [], {x: q_in.scale}
        for t in self.graph.outputs:
            producer = self.graph.producer(t)
            if isinstance(producer, g.Softmax):
                scales[self.q[producer.inputs[0]].name] = self.q[producer.inputs[0]].scale
                name = t
            else:
                name = self.q[t].name
                scales[name] = self.q[t].scale
            out_shape = [1, *self.graph.tensors[t].shape]
            outputs.append(h.make_tensor_value_info(name, TensorProto.FLOAT, out_shape))
        graph = h.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = h.make_model(
            graph,
            producer_name="edgesynth",
            opset_imports=[h.make_opsetid("", OPSET), h.make_opsetid(DOMAIN, 1)],
        )
        h.set_model_props(model, {SCALE_KEY + k: repr(float(v)) for k, v in scales.items()})
        return model


@dataclass
class QuantizedNetwork:
    onnx: bytes  # the RequantShift-dialect ONNX model
    tensors: dict[str, QTensor]  # float tensor -> the integer tensor holding it
    layers: dict[str, QuantizedLayer]  # float Conv/Linear node -> its integers
    operands: dict[str, list[Operand]]  # float Add node -> its operands on the common grid


def quantize_graph(
    graph: g.Graph, ranges: dict[str, tuple[float, float]], opts: PtqOptions, name: str
) -> QuantizedNetwork:
    """The float `graph`, calibrated (`ranges` of every tensor, quant.calibrate), as a
    RequantShift-dialect ONNX model named `name`, with the choices made for every tensor and
    layer. Raises MultipleErrors naming every operator it cannot quantize."""
    opts.check()
    if len(graph.inputs) != 1:
        raise EdgesynthError(f"graph {graph.name}: the quantizer takes one-input models")
    writer = Writer(graph, ranges, opts)
    x = graph.inputs[0]
    lo, hi = ranges[x]
    q_in = activation(x, lo, hi, 8, lo >= 0)
    tied = writer.tie(x, q_in)  # a concatenation reads the input: its scale, at 8 bits
    writer.q[x] = tied if tied.bits == 8 else q_in
    writer.walk()
    model = writer.model(name).SerializeToString()
    return QuantizedNetwork(model, writer.q, writer.layers, writer.operands)
