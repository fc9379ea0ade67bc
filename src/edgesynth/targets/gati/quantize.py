"""Post-training 8-bit quantization to what Gati's tail block can express.

* Activations: signed int8, symmetric, one scale per tensor from the calibration maximum.
* Weights: signed int8 in [-127, 127], one scale per layer (max |w| / 127).
* Bias: in accumulator units (input scale x weight scale), 8-bit when every value fits, else
  32-bit.
* Requantization: acc * QuantScale >> QuantShift with QuantScale < 2**16 and QuantShift < 2**5,
  rounding half up, saturating to int8 (`requantize`). The largest shift that keeps
  QuantScale in 16 bits is used, so the multiplier keeps 15 to 16 significant bits.
  These are `device.NUMBER_FORMAT`; steps and multipliers are the one quantization pass's
  (`ir.numformat`).
* The last layer keeps its 32-bit accumulators (QuantEn = 0) unless it ends in sigmoid/tanh,
  whose lookup takes int8 at a power-of-two scale (ActParam is that power).
* Element-wise add/subtract (`eltwise_operands`): both operands are brought to a common scale,
  2**-4 of the finer operand's, each by its own multiply and shift (the same mul/shift
  requantization, without saturation); multiply takes them as they are. The tail then
  requantizes the 32-bit result like a megablock's.
* Concatenation (`concat_scales`): the layers writing one DRAM buffer share one output scale,
  the largest calibrated range among them.
"""

from __future__ import annotations

import math

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.ir import numformat
from edgesynth.ir.intrange import accumulator_range, int_range
from edgesynth.sim.graph import evaluate
from edgesynth.targets.gati import device, isa
from edgesynth.targets.gati.chain import FusedLayer, LayerChain
from edgesynth.targets.gati.check import pad_sides
from edgesynth.targets.gati.concat import concat_buffers
from edgesynth.targets.gati.floatref import calibration_ranges
from edgesynth.targets.gati.layers import GatiLayer, GatiModel

FORMAT = device.NUMBER_FORMAT
QMAX = numformat.largest_code(FORMAT.weight_bits[0])
SCALE_MAX = isa.TAIL.by_name["QuantScale"].max
SHIFT_MAX = isa.TAIL.by_name["QuantShift"].max
ACC_MIN, ACC_MAX = int_range(device.ACC_BITS, True)


def round_half_up(x: np.ndarray | float) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5)


def fit_multiplier(m: float, where: str) -> tuple[int, int]:
    """(QuantScale, QuantShift) with QuantScale / 2**QuantShift closest to `m`."""
    if not (m > 0 and math.isfinite(m)):
        raise EdgesynthError(f"{where}: requantization multiplier {m} is not positive")
    mul, shift = numformat.fit_multiplier(m, FORMAT)
    scale = int(mul)
    if scale > SCALE_MAX:
        raise EdgesynthError(
            f"{where}: requantization multiplier {m:.6g} exceeds QuantScale's 16 bits"
        )
    if scale == 0:
        raise EdgesynthError(
            f"{where}: requantization multiplier {m:.3g} is below 2**-{SHIFT_MAX} "
            "(QuantShift has 5 bits)"
        )
    return scale, shift


def check_accumulator(w: np.ndarray, b: np.ndarray, where: str) -> None:
    """Refuse a layer whose 32-bit accumulator can overflow on some int8 input (the exact
    bound of `ir.intrange.accumulator_range`)."""
    lo, hi = accumulator_range(w, b, -128, 127, padded=True)
    if lo < ACC_MIN or hi > ACC_MAX:
        raise EdgesynthError(
            f"{where}: the 32-bit accumulator could overflow (it reaches {lo}..{hi} on some "
            "int8 input)"
        )


def quantize_input(x: np.ndarray, scale: float) -> np.ndarray:
    """Host side: float input to int8 (round half up, saturate): the graph's Quantize."""
    step = g.Quantize(name="input", inputs=["x"], outputs=["q"], scale=scale)
    return evaluate(step, np.asarray(x, dtype=np.float64)).astype(np.int8)


def _qscale(maxabs: float) -> float:
    return numformat.step(maxabs, FORMAT, FORMAT.activation_bits[0])


def _act_exponent(pre_max: float) -> int:
    """ActParam p for sigmoid/tanh: the int8 input LSB is 2**-p, covering the calibration range."""
    if pre_max <= 0:
        return 7
    return int(min(max(math.floor(math.log2(QMAX / pre_max)), 0), 15))


def set_geometry(graph: LayerChain, fl: FusedLayer, gl: GatiLayer) -> None:
    """The layer's padded sides, pooling fields and flattened map; a warning for average
    windows the pairwise tree weighs unequally."""
    gl.pad, gl.pad_sides = pad_sides(graph, fl.name, fl.pads, "convolution")
    if fl.pool is not None:
        gl.pool_pad, gl.pool_pad_sides = pad_sides(graph, fl.pool.node, fl.pool.pads, "pool")
        gl.pool_ceil = fl.pool.ceil
        gl.pool_global = fl.pool.type == "global_avg"
        kh, kw = fl.pool.kernel
        if fl.pool.type != "max" and (kh & (kh - 1) or kw & (kw - 1)):
            gl.warnings.append(
                f"{graph.label(fl.pool.node)}: average window {kh}x{kw} ({kh * kw} values) is not "
                "a power of two per side; the pairwise-average tree weighs its elements unequally"
            )
    if fl.flatten:
        gl.flat_map = fl.in_map


# extra fraction bits of an add's common scale below the finer operand's scale
ELTWISE_EXTRA_BITS = 4


def eltwise_operands(
    fl: FusedLayer, gl: GatiLayer, scales: tuple[float, float], where: str
) -> None:
    """An element-wise layer's operand requantization (ELTWISE.AScale/AShift, BScale/BShift)
    and accumulator scale: add/subtract need both operands at one scale, multiply does not."""
    if fl.eltwise == "mul":
        gl.operand_scales, gl.operand_shifts = (1, 1), (0, 0)
        gl.acc_scale = scales[0] * scales[1]
        return
    common = min(scales) / 2.0**ELTWISE_EXTRA_BITS
    fitted = [fit_multiplier(s / common, f"{where} (operand {k})") for k, s in enumerate(scales)]
    gl.operand_scales = (fitted[0][0], fitted[1][0])
    gl.operand_shifts = (fitted[0][1], fitted[1][1])
    gl.acc_scale = common


def concat_scales(graph: LayerChain, act_max: list[float]) -> dict[int, float]:
    """layer -> the output scale it shares with the other layers of its concatenation buffer."""
    forced: dict[int, float] = {}
    for buf in concat_buffers(graph):
        tops = []
        for j in buf:
            fl = graph.layers[j]
            if fl.activation in ("sigmoid", "tanh"):
                raise EdgesynthError(
                    f"{graph.path}: {graph.label(fl.name)}: a {fl.activation} output has a fixed "
                    "scale and cannot share a concatenation's scale with other tensors"
                )
            tops.append(act_max[j] if fl.act_bound is None else min(act_max[j], fl.act_bound))
        scale = _qscale(max(tops))
        forced.update({j: scale for j in buf})
    return forced


def quantize(graph: LayerChain, calibration: np.ndarray) -> GatiModel:
    """Calibrate `graph` (checked against Gati's limits: `check.check_graph`) on
    `calibration` and quantize it to int8."""
    x = np.asarray(calibration, dtype=np.float64)
    if x.ndim != len(graph.input_shape) + 1 or tuple(x.shape[1:]) != graph.input_shape:
        raise EdgesynthError(
            f"calibration data has shape {x.shape}; the model takes (N, "
            f"{', '.join(map(str, graph.input_shape))})"
        )
    if x.shape[0] == 0:
        raise EdgesynthError("calibration data holds no samples")
    if not np.isfinite(x).all():
        raise EdgesynthError("calibration data holds NaN or infinite values")
    in_max, pre_max, act_max = calibration_ranges(graph, x, FORMAT.calibration_chunk)
    input_scale = _qscale(in_max)

    g_layers: list[GatiLayer] = []
    forced = concat_scales(graph, act_max)
    last = len(graph.layers) - 1
    for i, fl in enumerate(graph.layers):
        where = f"{graph.path}: {graph.label(fl.name)}"
        in_scales = [
            input_scale if src[0] < 0 else g_layers[src[0]].out_scale for src in graph.sources_of(i)
        ]
        s_in = in_scales[0]
        gl = GatiLayer(
            onnx_nodes=list(fl.nodes),
            in_scale=s_in,
            weight_scale=1.0,
            acc_scale=s_in,
            out_scale=s_in,
            quant_en=True,
        )
        set_geometry(graph, fl, gl)

        if fl.kind == "eltwise":
            eltwise_operands(fl, gl, (in_scales[0], in_scales[1]), where)
            gl.bias_width = 8
        elif fl.kind != "none":
            assert fl.weight is not None and fl.bias is not None
            w_max = float(np.abs(fl.weight).max(initial=0.0))
            gl.weight_scale = _qscale(w_max)
            qw = np.clip(round_half_up(fl.weight / gl.weight_scale), -QMAX, QMAX).astype(np.int64)
            gl.acc_scale = s_in * gl.weight_scale
            qb = round_half_up(fl.bias / gl.acc_scale)
            if np.abs(qb).max(initial=0) > ACC_MAX:
                raise EdgesynthError(
                    f"{where}: bias {np.abs(fl.bias).max():.4g} overflows the 32-bit accumulator "
                    f"at this layer's scale"
                )
            qb = qb.astype(np.int64)
            check_accumulator(qw, qb, where)
            gl.weights, gl.bias = qw, qb
            gl.bias_width = (
                8 if np.abs(qb).max(initial=0) <= 127 and qb.min(initial=0) >= -128 else 32
            )
        else:
            gl.bias_width = 8

        act = fl.activation
        if act in ("sigmoid", "tanh"):
            gl.act_param = _act_exponent(pre_max[i])
            m = gl.acc_scale * 2.0**gl.act_param
            gl.quant_scale, gl.quant_shift = fit_multiplier(m, where)
            gl.out_scale = 2.0**-device.ACT_OUT_FRACTION_BITS
        elif i == last:
            gl.quant_en = False  # keep the 32-bit accumulators for the host
            gl.out_scale = gl.acc_scale
        elif fl.kind == "none" and i not in forced:
            gl.quant_scale, gl.quant_shift = 1, 0
            gl.out_scale = s_in
        else:
            top = act_max[i] if fl.act_bound is None else min(act_max[i], fl.act_bound)
            target = forced.get(i, top / QMAX if top > 0 else gl.acc_scale)
            gl.quant_scale, gl.quant_shift = fit_multiplier(gl.acc_scale / target, where)
            gl.out_scale = gl.acc_scale * 2.0**gl.quant_shift / gl.quant_scale
        g_layers.append(gl)

    layout = "map" if len(graph.input_shape) == 3 else "vector"
    return GatiModel(graph, g_layers, input_scale, layout)
