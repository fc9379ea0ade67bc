"""The integer graph a quantized Gati program computes (`Program.graph`).

Per layer, in the tail block's documented order: the megablock (Conv or Linear: int8 inputs and
weights, int32 accumulators with the bias added in accumulator units; nothing for an identity
layer), the quantization (Requantize: mul = QuantScale, div = 2**QuantShift, rounded half up,
saturated to int8) or, with QuantEn = 0, the 32-bit saturation, the activation (ReLU, or the
sigmoid/tanh lookup whose int8 input step is 2**-ActParam) and the pooling (max from a register
reset to 0: `max_floor=0`; average by the pairwise tree: method `tree`).

Every operator's arithmetic is `edgesynth.sim`'s; nothing here computes. The graph is written
from the quantized model only (never from instructions or DRAM layouts), so the functional model
agreeing with `sim.graph.run` of this graph is evidence the encoder and the functional model
agree with the documentation.
"""

from __future__ import annotations

from edgesynth.ir import graph as g
from edgesynth.targets.gati import device, isa
from edgesynth.targets.gati.chain import FusedLayer
from edgesynth.targets.gati.layers import GatiLayer, GatiModel

INT32 = (-(1 << 31), (1 << 31) - 1)


def side_pads(amount: int, sides: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from a pad amount and a PadSides bit vector."""
    return (
        amount if sides & isa.PAD_TOP else 0,
        amount if sides & isa.PAD_LEFT else 0,
        amount if sides & isa.PAD_BOTTOM else 0,
        amount if sides & isa.PAD_RIGHT else 0,
    )


class _Builder:
    def __init__(self, graph: g.Graph, fl: FusedLayer, gl: GatiLayer, source: str) -> None:
        self.graph, self.fl, self.gl, self.source = graph, fl, gl, source

    def add(
        self,
        node_cls: type[g.Node],
        step: str,
        src: str,
        shape: tuple[int, ...],
        qtype: g.QType,
        last: bool = False,
        **params: object,
    ) -> str:
        name = self.graph.unique_name(f"{self.fl.name}:{step}")
        out = self.graph.unique_name(self.fl.output if last else name)
        node = node_cls(name=name, inputs=[src], outputs=[out], source=self.source, **params)
        self.graph.add(node, shape, qtype)
        return out


def _eltwise(b: _Builder, a: str, other: str, acc: g.QType) -> str:
    """The element-wise block: each operand's multiply and shift (round half up, no
    saturation), then the operation, saturated to 32 bits."""
    fl, gl = b.fl, b.gl
    ops = []
    for k, src in enumerate((a, other)):
        shape = b.graph.tensors[src].shape
        ops.append(
            b.add(
                g.Requantize,
                f"operand{k}",
                src,
                shape,
                acc,
                mul=gl.operand_scales[k],
                div=1 << gl.operand_shifts[k],
                rounding="half_up",
                lo=INT32[0],
                hi=INT32[1],
            )
        )
    name = b.graph.unique_name(f"{fl.name}:{fl.eltwise}")
    node = g.Eltwise(name=name, inputs=ops, outputs=[name], source=b.source, kind=fl.eltwise)
    b.graph.add(node, fl.conv_shape, acc)
    return b.add(g.Clip, "wrap", name, fl.conv_shape, acc, lo=INT32[0], hi=INT32[1])


def _layer(graph: g.Graph, fl: FusedLayer, gl: GatiLayer, src: str, other: str = "") -> str:
    """Append one Gati layer reading `src` (and `other`, an element-wise layer's second
    operand); return its output tensor."""
    b = _Builder(graph, fl, gl, f"Gati layer `{fl.name}`")
    last_step = "pool" if fl.pool is not None else "act" if fl.activation else "quant"
    acc = g.QType(device.ACC_BITS, scale=gl.acc_scale)
    cur = src
    if fl.kind == "eltwise":
        cur = _eltwise(b, src, other, acc)
    elif fl.kind == "conv":
        assert gl.weights is not None
        cur = b.add(
            g.Conv,
            "conv",
            cur,
            fl.conv_shape,
            acc,
            weight=gl.weights,
            bias=gl.bias,
            stride=fl.strides,
            pads=side_pads(gl.pad, gl.pad_sides),
        )
    elif fl.kind == "linear":
        assert gl.weights is not None
        if fl.flatten:
            flat = (int(gl.weights.shape[1]),)
            cur = b.add(g.Flatten, "flatten", cur, flat, graph.tensors[cur].qtype or g.INT8)
        cur = b.add(g.Linear, "fc", cur, fl.conv_shape, acc, weight=gl.weights, bias=gl.bias)
    shape = fl.conv_shape
    if gl.quant_en:
        scale = 2.0**-gl.act_param if fl.activation in ("sigmoid", "tanh") else gl.out_scale
        cur = b.add(
            g.Requantize,
            "quant",
            cur,
            shape,
            g.QType(8, scale=scale),
            last=last_step == "quant",
            mul=gl.quant_scale,
            div=1 << gl.quant_shift,
            rounding="half_up",
            lo=-128,
            hi=127,
        )
    else:
        cur = b.add(
            g.Clip,
            "saturate",
            cur,
            shape,
            acc,
            last=last_step == "quant",
            lo=INT32[0],
            hi=INT32[1],
        )
    qtype = graph.tensors[cur].qtype
    if fl.activation:
        if fl.activation != "relu":
            qtype = g.QType(8, scale=2.0**-device.ACT_OUT_FRACTION_BITS)
        exponent = gl.act_param if fl.activation != "relu" else 0
        cur = b.add(
            g.Activation,
            "act",
            cur,
            shape,
            qtype,
            last=last_step == "act",
            kind=fl.activation,
            exponent=exponent,
        )
    if fl.pool is not None:
        assert qtype is not None
        p = fl.pool
        out = fl.out_shape
        if p.type == "global_avg":
            cur = b.add(g.GlobalPool, "pool", cur, out, qtype, last=True, kind="avg", method="tree")
        else:
            stride = p.strides[0]
            common = dict(
                kernel=p.kernel,
                stride=(stride, stride),
                pads=side_pads(gl.pool_pad, gl.pool_pad_sides),
                ceil=gl.pool_ceil,
            )
            if p.type == "max":
                cur = b.add(
                    g.Pool, "pool", cur, out, qtype, last=True, kind="max", max_floor=0, **common
                )
            else:
                cur = b.add(
                    g.Pool,
                    "pool",
                    cur,
                    out,
                    qtype,
                    last=True,
                    kind="avg",
                    method="tree",
                    count_include_pad=True,
                    **common,
                )
    return cur


def _operand(graph: g.Graph, input_name: str, outputs: list[str], producers: list[int]) -> str:
    """The tensor an operand reads: one layer's output, or a Concat of several (what the
    adjacent channel ranges of their DRAM buffer hold)."""
    names = [input_name if j < 0 else outputs[j] for j in producers]
    if len(names) == 1:
        return names[0]
    first = graph.tensors[names[0]]
    channels = sum(graph.tensors[n].shape[0] for n in names)
    name = graph.unique_name("concat:" + "+".join(names))
    node = g.Concat(name=name, inputs=names, outputs=[name], source="a Gati DRAM buffer")
    graph.add(node, (channels, *first.shape[1:]), first.qtype)
    return name


def integer_graph(model: GatiModel) -> g.Graph:
    """The graph of every layer's integer arithmetic; its output is the last layer's (before
    any host-side Softmax). `graph.meta["layer_outputs"]` lists the tensor each layer writes
    to DRAM."""
    chain = model.chain
    graph = g.Graph(name=chain.output_name or "gati", source=chain.path)
    graph.meta = {"target": "gati"}
    graph.add_input(chain.input_name, chain.input_shape, g.QType(8, scale=model.input_scale))
    outputs: list[str] = []
    for i, (fl, gl) in enumerate(model.pairs()):
        ops = [_operand(graph, chain.input_name, outputs, src) for src in chain.sources_of(i)]
        outputs.append(_layer(graph, fl, gl, *ops))
    graph.outputs = [outputs[-1]]
    graph.meta["layer_outputs"] = outputs
    graph.validate()
    return graph
