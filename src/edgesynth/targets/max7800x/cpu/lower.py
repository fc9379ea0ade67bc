"""The CPU part of a split network (`split.Split`) quantized to integer layers (`program`).

Per tensor one scale (real value = code x scale), from the largest magnitude the calibration
batch gives it (the float graph run on it). The input's scale is the accelerator's output's.
- Linear: int8 weights on one scale (the largest |w| is 127 codes), the bias in accumulator
  units (int32); the output is requantized to int8 by a multiplier and a shift (the ratio of
  scales, 15 bits of precision), except the network's result, which stays the 32-bit
  accumulator (as the accelerator's own last layer does). A ReLU right after a Linear sets
  the Linear's output scale (its range is what survives).
- ReLU and LeakyReLU keep their input's scale (the negative slope a multiplier and a shift);
  sigmoid, tanh, hardsigmoid, hardswish, swish and mish are 256-entry tables (`simulate`):
  the bounded ones (sigmoid, tanh, hardsigmoid) on the output step 1/127, the others on
  their output's calibrated scale.
- Add, Sub and Mul of two tensors and a channel Concat: the result on its own calibrated
  scale, each source's codes rescaled to it by a multiplier and a shift (`program`).
- Flatten/Reshape change nothing in the channel-major buffer; a final Softmax is the project's
  softmax.c on the result (not part of the known answer, as without a CPU part).
"""

from __future__ import annotations

import math

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import evaluate
from edgesynth.sim.unary import BOUNDED
from edgesynth.targets.max7800x.cpu.program import CpuLayer, CpuProgram
from edgesynth.targets.max7800x.cpu.simulate import TABLE_SCALE, activation_table
from edgesynth.targets.max7800x.cpu.split import Split

QMAX = 127
MULT_BITS = 15


def ranges(graph: g.Graph, data: np.ndarray, wanted: set[str], chunk: int = 64) -> dict[str, float]:
    """The largest |value| of each `wanted` tensor of the float graph over the batch."""
    maxabs = dict.fromkeys(wanted, 0.0)
    for start in range(0, len(data), chunk):
        values = {graph.inputs[0]: np.asarray(data[start : start + chunk], dtype=np.float64)}
        for node in graph.nodes:
            values[node.output] = evaluate(node, *(values[t] for t in node.inputs))
        for t in wanted:
            if values[t].size:
                maxabs[t] = max(maxabs[t], float(np.max(np.abs(values[t]))))
    return maxabs


def values(graph: g.Graph, data: np.ndarray, tensor: str, chunk: int = 64) -> np.ndarray:
    """The float graph's `tensor` over the batch (the calibration of a later part)."""
    out = []
    for start in range(0, len(data), chunk):
        values = {graph.inputs[0]: np.asarray(data[start : start + chunk], dtype=np.float64)}
        for node in graph.nodes:
            values[node.output] = evaluate(node, *(values[t] for t in node.inputs))
            if node.output == tensor:
                break
        out.append(values[tensor])
    return np.concatenate(out)


def multiplier(ratio: float, what: str = "") -> tuple[int, int]:
    """(mult, shift) with mult x 2**-shift close to `ratio`, mult of `MULT_BITS` bits; `what`
    names the operator in the refusal of a ratio out of reach (2**-46 .. 2**14)."""
    mantissa, exponent = math.frexp(ratio)
    mult, shift = round(mantissa * (1 << MULT_BITS)), MULT_BITS - exponent
    if mult == 1 << MULT_BITS:
        mult, shift = mult >> 1, shift - 1
    if ratio != 0 and not 1 <= shift <= 62:
        raise EdgesynthError(
            f"operator `{what}`: its scale ratio {ratio:.3g} is out of the Cortex-M4 part's "
            "reach (2**-46 .. 2**14)"
        )
    return mult, shift


class _Lowering:
    """The CPU layers of a suffix, operator by operator (`add`); each tensor's scale and width
    (8-bit codes or 32-bit accumulators) as it goes."""

    def __init__(
        self,
        split: Split,
        maxabs: dict[str, float],
        cut: g.QType,
        shapes: dict[str, tuple[int, ...]],
    ) -> None:
        self.split = split
        self.shapes = shapes
        self.sizes = {t: int(np.prod(shape)) for t, shape in shapes.items()}
        self.maxabs = maxabs
        self.scale = {split.cut: cut.scale or 1.0}
        self.bits = {split.cut: cut.bits}
        self.buffer = {split.cut: -1}  # each tensor's buffer: -1 the input, k layer k's output
        self.layers: list[CpuLayer] = []
        nodes = split.suffix
        last = nodes[-2].output if isinstance(nodes[-1], g.Softmax) else nodes[-1].output
        self.result = split.result or last

    def code_scale(self, t: str) -> float:
        m = self.maxabs.get(t, 0.0)
        return m / QMAX if m > 0 else 1.0 / QMAX

    def add(self, node: g.Node, size: int) -> None:
        src = node.inputs[0]
        if isinstance(node, g.Flatten | g.Reshape | g.Softmax):
            self.scale[node.output], self.bits[node.output] = self.scale[src], self.bits[src]
            self.buffer[node.output] = self.buffer[src]
            return
        if isinstance(node, g.Eltwise | g.Concat):
            self.append(node, self.combined(node, size))
            return
        if self.bits[src] == 32 and not _is_relu(node):
            src = self.narrowed(src)
        if isinstance(node, g.Linear | g.Conv):
            layer = self.weighted(node, src, size)
        elif isinstance(node, g.Pool | g.GlobalPool):
            layer = self.pooling(node, src, size)
        elif isinstance(node, g.LeakyRelu):
            mult, shift = multiplier(node.alpha, node.name)
            layer = CpuLayer(node.output, "leaky", size, mult=mult, shift=shift)
            self.scale[node.output] = self.scale[src]
        elif _is_relu(node):
            layer = CpuLayer(node.output, "relu", size, self.bits[src] or 8)
            self.scale[node.output] = self.scale[src]
        else:
            assert isinstance(node, g.Activation)  # a table's function (`split.cpu_runs`)
            layer = self.table(node, src, size)
        layer.sources = [self.buffer[src]]
        self.append(node, layer)

    def table(self, node: g.Activation, src: str, size: int) -> CpuLayer:
        """The function's 256-entry table: a function within [-1, 1] on the step 1/127, any
        other on its output's calibrated scale."""
        out = TABLE_SCALE if node.kind in BOUNDED else self.code_scale(node.output)
        table = activation_table(node.kind, self.scale[src], out, node.alpha, node.beta)
        self.scale[node.output] = out
        return CpuLayer(node.output, "lut", size, function=node.kind, table=table)

    def append(self, node: g.Node, layer: CpuLayer) -> None:
        layer.nodes = [node.name]
        self.bits[node.output] = layer.out_bits
        self.buffer[node.output] = len(self.layers)
        self.layers.append(layer)

    def combined(self, node: g.Eltwise | g.Concat, size: int) -> CpuLayer:
        """Add, sub or mul of two tensors, or a concatenation: each source in 8-bit codes,
        the result on its calibrated range."""
        srcs = [self.narrowed(t) if self.bits[t] == 32 else t for t in node.inputs]
        s_out = self.code_scale(node.output)
        self.scale[node.output] = s_out
        kind = node.kind if isinstance(node, g.Eltwise) else "concat"
        layer = CpuLayer(node.output, kind, size, sources=[self.buffer[t] for t in srcs])
        ratios = [self.scale[t] / s_out for t in srcs]
        if kind == "mul":
            layer.mult, layer.shift = multiplier(ratios[0] * self.scale[srcs[1]], node.name)
        elif kind == "concat":
            pairs = [multiplier(r, node.name) for r in ratios]
            layer.mults, layer.shifts = [m for m, _ in pairs], [sh for _, sh in pairs]
        else:  # add, sub: one shift, the larger ratio's
            _, layer.shift = multiplier(max(ratios), node.name)
            layer.mults = [math.floor(r * (1 << layer.shift) + 0.5) for r in ratios]
        return layer

    def handed_back(self, result: str, scale: float) -> None:
        """The result requantized to `scale`, the codes the accelerator takes back (a last
        `requantize` of a 32-bit result, else a `rescale`)."""
        kind = "requantize" if self.bits[result] == 32 else "rescale"
        mult, shift = multiplier(self.scale[result] / scale, result)
        name = f"{result}/accelerator"
        self.layers.append(CpuLayer(name, kind, self.sizes[result], mult=mult, shift=shift,
                                    nodes=[name], sources=[self.buffer[result]]))  # fmt: skip
        self.scale[name], self.bits[name], self.result = scale, 8, name

    def narrowed(self, src: str) -> str:
        """A 32-bit tensor requantized to int8 codes on its calibrated range (a `requantize`
        layer); returns the name of the 8-bit tensor."""
        name = f"{src}/int8"
        if name in self.buffer:  # read before
            return name
        s_out = self.code_scale(src)
        mult, shift = multiplier(self.scale[src] / s_out, src)
        layer = CpuLayer(name, "requantize", self.sizes[src], mult=mult, shift=shift, nodes=[name],
                         sources=[self.buffer[src]])  # fmt: skip
        self.buffer[name] = len(self.layers)
        self.layers.append(layer)
        self.scale[name], self.bits[name] = s_out, 8
        self.sizes[name], self.shapes[name] = self.sizes[src], self.shapes[src]
        return name

    def pooling(self, node: g.Pool | g.GlobalPool, src: str, size: int) -> CpuLayer:
        """Max or average pooling (its input's scale); a global pool is one window."""
        shape = self.shapes[src]
        kernel = list(node.kernel if isinstance(node, g.Pool) else shape[1:])
        stride = list(node.stride if isinstance(node, g.Pool) else shape[1:])
        dilation = list(node.dilation if isinstance(node, g.Pool) else (1, 1))
        out = self.shapes[node.output]
        layer = CpuLayer(node.output, "pool", size, pool=node.kind, kernel=kernel, stride=stride,
                         dilation=dilation, pads=[0, 0, 0, 0], in_shape=list(shape),
                         out_shape=list(out) if len(out) == 3 else [shape[0], 1, 1])  # fmt: skip
        if node.kind == "avg":
            layer.mult, layer.shift = multiplier(1 / (kernel[0] * kernel[1]), node.name)
        self.scale[node.output] = self.scale[src]
        return layer

    def weighted(self, node: g.Linear | g.Conv, src: str, size: int) -> CpuLayer:
        """A linear or convolution layer: int8 weights, int32 bias, requantized output (or the
        accumulator, for the result)."""
        s_in = self.scale[src]
        w = np.asarray(node.weight, dtype=np.float64)
        w_max = float(np.abs(w).max(initial=0.0))
        s_w = w_max / QMAX if w_max > 0 else 1.0
        w_q = np.clip(np.floor(w / s_w + 0.5), -128, 127).astype(np.int64)
        s_acc = s_in * s_w
        outputs = w.shape[0]
        bias = np.zeros(outputs) if node.bias is None else np.asarray(node.bias, np.float64)
        b_q = np.floor(bias / s_acc + 0.5).astype(np.int64)
        worst = int(np.abs(w_q).reshape(outputs, -1).sum(1).max(initial=0)) * 128
        if worst + int(np.abs(b_q).max(initial=0)) >= 2**31:
            raise EdgesynthError(
                f"operator `{node.name}` ({node.op}): its 32-bit accumulator could overflow "
                "on the Cortex-M4 (too many inputs or too large a bias)"
            )
        kind = "convt" if isinstance(node, g.Conv) and node.transposed else node.op
        layer = CpuLayer(node.output, kind, size, weight=w_q, bias=b_q)
        if isinstance(node, g.Conv):
            self.geometry(layer, node, src)
        if node.output == self.result:
            layer.out_bits, self.scale[node.output] = 32, s_acc
            return layer
        readers = [n for n in self.split.suffix if node.output in n.inputs]
        ranged = readers[0].output if len(readers) == 1 and _is_relu(readers[0]) else node.output
        s_out = self.code_scale(ranged)
        layer.mult, layer.shift = multiplier(s_acc / s_out, node.name)
        self.scale[node.output] = s_out
        return layer

    def geometry(self, layer: CpuLayer, node: g.Conv, src: str) -> None:
        layer.in_shape, layer.out_shape = list(self.shapes[src]), list(self.shapes[node.output])
        layer.kernel, layer.stride = list(node.kernel), list(node.stride)
        layer.dilation, layer.groups = list(node.dilation), node.groups
        layer.pads = list(node.pads)  # begins (top, left), then ends (bottom, right)
        if node.transposed:  # the pads after zero-stuffing by `stride`; output padding at the end
            layer.pads[2:] = [
                p + q for p, q in zip(node.pads[2:], node.output_padding, strict=True)
            ]


def _is_relu(node: g.Node) -> bool:
    return isinstance(node, g.Activation) and node.kind == "relu"


def lower_suffix(
    graph: g.Graph,
    split: Split,
    calibration: np.ndarray,
    in_qtype: g.QType,
    out_qtype: g.QType | None = None,
) -> CpuProgram:
    """The CPU program of `split`'s suffix; `in_qtype`: the accelerator's output codes;
    `out_qtype`: the codes the accelerator takes back (a split with `back`)."""
    data = np.asarray(calibration, dtype=np.float64)
    wanted = {t for n in split.suffix for t in n.outputs} | {split.cut}
    shapes = {t: graph.tensors[t].shape for t in wanted}
    lowering = _Lowering(split, ranges(graph, data, wanted), in_qtype, shapes)
    for node in split.suffix:
        lowering.add(node, lowering.sizes[node.output])
    if split.result is not None and out_qtype is not None:
        lowering.handed_back(split.result, out_qtype.scale or 1.0)
    return CpuProgram(
        in_shape=graph.tensors[split.cut].shape,
        in_bits=in_qtype.bits,
        in_scale=in_qtype.scale or 1.0,
        layers=lowering.layers,
        out_scale=lowering.scale[lowering.result],
        softmax=isinstance(split.suffix[-1], g.Softmax),
    )
