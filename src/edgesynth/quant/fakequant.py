"""The fake-quantized float network of a `quant.requant_onnx` quantization: the float graph with
each layer's weights and bias replaced by their quantized values (code x step) and every
activation the integer network stores rounded half up to its scale and clipped to its codes
(`Quantize` then `Dequantize`); an addition's operands rounded to the sum's grid with the
factor its RequantShift applies (`Operand.step`: the operand's scale to 16 significant bits)
and summed in steps of that grid (whole numbers, so the sum is exact).
The quantizer's choices make the integer network compute these codes value for value; float64
evaluation of this graph can only differ where a value lands exactly on a rounding tie.
"""

from __future__ import annotations

from dataclasses import replace

from edgesynth.ir import graph as g
from edgesynth.quant.requant_onnx import QuantizedNetwork
from edgesynth.quant.requant_shift import QTensor

CODES = "_codes"  # the Quantize output of float tensor T is T + CODES


def fake_quantized(graph: g.Graph, net: QuantizedNetwork) -> g.Graph:
    """A float graph computing the fake-quantized network; tensor `T + CODES` holds the integer
    codes of every float tensor `T` the integer network stores."""
    out = g.Graph(name=f"{graph.name}_fakequant", source=graph.source)
    rename: dict[str, str] = {}
    for x in graph.inputs:
        out.add_input(x, graph.tensors[x].shape)
        rename[x] = _round(out, x, net.tensors[x])
    for node in graph.nodes:
        copy = replace(node, inputs=[rename.get(t, t) for t in node.inputs])
        operands = net.operands.get(node.name, [])
        for k, operand in enumerate(operands):  # counted in steps of the sum's grid
            copy.inputs[k] = _round(out, copy.inputs[k], operand.term, operand.step, 1.0)
        layer = net.layers.get(node.name)
        if layer is not None and isinstance(copy, g.Conv | g.Linear):
            s_in = net.tensors[node.inputs[0]].scale
            copy = replace(copy, weight=layer.fake_weight(), bias=layer.fake_bias(s_in))
        out.add(copy, graph.tensors[node.output].shape)
        if node.output in net.tensors:
            q = net.tensors[node.output]
            step = q.scale / operands[0].term.scale if operands else None
            rename[node.output] = _round(out, node.output, q, step)
    out.outputs = [rename.get(t, t) for t in graph.outputs]
    return out


def _round(
    graph: g.Graph, tensor: str, q: QTensor, step: float | None = None, unit: float | None = None
) -> str:
    """Quantize `tensor` with `step` (default q's scale; half up, clipped to q's codes) and
    read the codes as multiples of `unit` (default q's scale); returns the rounded tensor."""
    shape = graph.tensors[tensor].shape
    codes = graph.unique_name(f"{q.name}{CODES}" if unit == 1.0 else tensor + CODES)
    value = graph.unique_name(codes[: -len(CODES)] + "_fq")
    scale = q.scale if step is None else step
    quantize = g.Quantize(
        name=codes, inputs=[tensor], outputs=[codes], scale=scale, lo=q.lo, hi=q.hi
    )
    graph.add(quantize, shape, g.QType(q.bits, q.signed, q.scale))
    read = q.scale if unit is None else unit
    graph.add(g.Dequantize(name=value, inputs=[codes], outputs=[value], scale=read), shape)
    return value
