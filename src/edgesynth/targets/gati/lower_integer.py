"""Map an integer network graph (vendor YAML, edgesynth.nn) onto Gati layers, with no new
quantization: the graph's integers are Gati's integers wherever Gati can express them.

Exact:
* int8 weights, a bias in accumulator units (8-bit when it fits, else 32-bit);
* a Requantize right after the megablock with one multiplier mul/div = QuantScale /
  2**QuantShift (QuantScale < 2**16, QuantShift < 32), rounded half up, saturated to int8; a
  saturation to [0, 127] is the tail's ReLU; an offset that is a multiple of mul joins the bias;
* ReLU (or a Clip to [0, 127]), the sigmoid/tanh lookup, max pooling over non-negative values;
* a pool that follows the activation of a layer (MAX7800x pools before the next convolution):
  the tail of that layer pools;
* the last layer without a Requantize keeps its 32-bit accumulators.

Lowered with a warning in `program.warnings`, because Gati computes something else:
* average pooling that the graph rounds some other way (`trunc`, `half_away`, ...): Gati's
  pairwise-average tree floors each pairwise mean;
* a Requantize rounded other than half up, or whose multiplier needs more than QuantScale's 16
  bits or a divisor that is not a power of two (the closest QuantScale/QuantShift is used);
* max pooling over values that can be negative (Gati's max register starts at 0).

Refused: per-channel multipliers, saturation bounds other than int8 or [0, 127], weights beyond
int8, biases beyond 32 bits, an intermediate layer without a Requantize (Gati layers read int8).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.targets.gati import device, isa
from edgesynth.targets.gati.chain import FusedLayer
from edgesynth.targets.gati.check import check_all
from edgesynth.targets.gati.layers import GatiLayer, GatiModel
from edgesynth.targets.gati.lower import Fused
from edgesynth.targets.gati.quantize import (
    ACC_MAX,
    check_accumulator,
    fit_multiplier,
    set_geometry,
)

SCALE_MAX = isa.TAIL.by_name["QuantScale"].max
SHIFT_MAX = isa.TAIL.by_name["QuantShift"].max


def _scalar(value: np.ndarray | int, what: str, where: str) -> int:
    v = np.asarray(value).reshape(-1)
    if v.size == 0 or not np.all(v == v[0]):
        raise EdgesynthError(
            f"{where}: a per-channel requantization {what} has no Gati field (QuantScale and "
            "QuantShift are one per layer)"
        )
    return int(v[0])


def quant_fields(req: g.Requantize, where: str, warnings: list[str]) -> tuple[int, int]:
    """(QuantScale, QuantShift) for `req`'s mul/div; exact when the reduced fraction's
    denominator is a power of two and its numerator fits 16 bits."""
    mul, div = _scalar(req.mul, "multiplier", where), _scalar(req.div, "divisor", where)
    if mul <= 0 or div <= 0:
        raise EdgesynthError(f"{where}: requantization multiplier {mul}/{div} is not positive")
    ratio = Fraction(mul, div)
    p, q = ratio.numerator, ratio.denominator
    shift = q.bit_length() - 1
    if q == 1 << shift and shift <= SHIFT_MAX and p <= SCALE_MAX:
        return p, shift
    scale, shift = fit_multiplier(float(ratio), where)
    warnings.append(
        f"{where}: requantization x * {mul} / {div} has no exact QuantScale/QuantShift; Gati "
        f"computes x * {scale} / 2**{shift} (results can differ by one step)"
    )
    return scale, shift


def _requant(
    fl: FusedLayer, gl: GatiLayer, req: g.Requantize, where: str, warnings: list[str]
) -> None:
    gl.quant_scale, gl.quant_shift = quant_fields(req, where, warnings)
    if req.rounding != "half_up":
        warnings.append(
            f"{where}: the graph rounds the requantization `{req.rounding}`; Gati rounds half "
            "up (results can differ by one step at ties)"
        )
    add = np.asarray(req.add).reshape(-1)
    if np.any(add):
        mul = _scalar(req.mul, "multiplier", where)
        if gl.bias is None:
            raise EdgesynthError(f"{where}: a requantization offset needs a layer with a bias")
        offset = np.broadcast_to(add, gl.bias.shape)
        if np.any(offset % mul):
            warnings.append(
                f"{where}: the requantization offset {req.add} is not a multiple of the "
                f"multiplier {mul}; Gati adds it to the bias rounded (results can differ by one "
                "step)"
            )
        gl.bias = gl.bias + np.floor(offset / mul + 0.5).astype(np.int64)
    if (req.lo, req.hi) == (0, 127) and fl.activation in (None, "relu"):
        fl.activation = "relu"  # saturating to [0, 127] after int8 is ReLU
    elif (req.lo, req.hi) != (-128, 127):
        raise EdgesynthError(
            f"{where}: requantization saturates to [{req.lo}, {req.hi}]; Gati's tail saturates "
            "to int8 [-128, 127] (then an optional ReLU: [0, 127])"
        )


def _scale_of(graph: g.Graph, tensor: str) -> float | None:
    qtype = graph.tensors[tensor].qtype if tensor in graph.tensors else None
    return qtype.scale if qtype is not None else None


def _average_rounding(fused: Fused, fl: FusedLayer, warnings: list[str]) -> None:
    if fl.pool is None or fl.pool.type == "max":
        return
    node = fused.graph.node(fl.pool.node)
    method = getattr(node, "method", "tree")
    if method != "tree":
        kh, kw = fl.pool.kernel
        loss = math.log2(kh * kw) / 2
        warnings.append(
            f"{fused.chain.label(fl.pool.node)}: the graph averages {kh}x{kw} windows rounding "
            f"`{method}`; Gati's pairwise-average tree floors each pairwise mean (results can be "
            f"lower by up to {loss:.1f} steps)"
        )


def _megablock(fl: FusedLayer, gl: GatiLayer, where: str) -> None:
    assert fl.weight is not None and fl.bias is not None
    w, b = np.asarray(fl.weight), np.asarray(fl.bias)
    if not (np.issubdtype(w.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
        raise EdgesynthError(f"{where}: an integer graph needs integer weights and bias")
    if w.size and (w.min() < -128 or w.max() > 127):
        raise EdgesynthError(
            f"{where}: weights {int(w.min())}..{int(w.max())} do not fit Gati's int8 engines"
        )
    if np.abs(b).max(initial=0) > ACC_MAX:
        raise EdgesynthError(f"{where}: the bias does not fit the 32-bit accumulator")
    check_accumulator(w, b, where)
    gl.weights, gl.bias = w.astype(np.int64), b.astype(np.int64)


def _require_chain(fused: Fused) -> None:
    """Integer graphs map onto Gati layer by layer, as a chain: their element-wise operands and
    concatenations carry the graph's own scales, which this mapping does not requantize."""
    chain = fused.chain
    for i, fl in enumerate(chain.layers):
        if chain.sources_of(i) != [[i - 1]]:
            raise EdgesynthError(
                f"{chain.label(fl.name)}: reads something other than the previous layer's output "
                "(a branch, an element-wise operation of two tensors or a concatenation); "
                "integer graphs map onto Gati only as a chain (compile the float model with "
                "--calibration for residual networks)",
                file=chain.path or None,
            )


def lower_integer(fused: Fused) -> GatiModel:
    """The Gati model of an integer graph fused into `fused.chain`. What Gati computes
    differently from the graph is a warning of the layer concerned (`GatiLayer.warnings`)."""
    chain, graph = fused.chain, fused.graph
    in_type = graph.tensors[chain.input_name].qtype
    assert in_type is not None
    if in_type.bits > 8 or (in_type.bits == 8 and not in_type.signed):
        raise EdgesynthError(
            f"input `{chain.input_name}` is {in_type}; Gati's engines read int8",
            file=chain.path or None,
        )
    _require_chain(fused)
    input_scale = in_type.scale or 1.0
    layers: list[GatiLayer] = []
    s_in = input_scale
    last = len(chain.layers) - 1
    for i, fl in enumerate(chain.layers):
        where = chain.label(fl.name)
        gl = GatiLayer(list(fl.nodes), s_in, 1.0, s_in, s_in, quant_en=True)
        if fl.kind != "none":
            _megablock(fl, gl, where)
            gl.acc_scale = _scale_of(graph, graph.node(fl.name).output) or s_in
            gl.weight_scale = gl.acc_scale / s_in
        req = fused.requantize.get(fl.name)
        if req is not None:
            _requant(fl, gl, req, where, gl.warnings)
        elif i == last:
            gl.quant_en = False
        elif fl.kind != "none":
            raise EdgesynthError(
                f"{where}: the layer's 32-bit output feeds another layer, and Gati layers read "
                "int8: requantize it (a Requantize after the convolution)",
                file=chain.path or None,
            )
        if gl.bias is not None:
            fits8 = gl.bias.min(initial=0) >= -128 and gl.bias.max(initial=0) <= 127
            gl.bias_width = 8 if fits8 else 32
        if fl.activation in ("sigmoid", "tanh"):
            node = graph.node(fl.activation_node or "")
            gl.act_param = int(getattr(node, "exponent", 0))
            gl.out_scale = 2.0**-device.ACT_OUT_FRACTION_BITS
        else:
            fallback = gl.acc_scale if not gl.quant_en else s_in
            gl.out_scale = _scale_of(graph, fl.output) or fallback
        set_geometry(chain, fl, gl)
        _average_rounding(fused, fl, gl.warnings)
        layers.append(gl)
        s_in = gl.out_scale
    check_all(chain, [gl.warnings for gl in layers])
    layout = "map" if len(chain.input_shape) == 3 else "vector"
    return GatiModel(chain, layers, input_scale, layout)
