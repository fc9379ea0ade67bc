"""Post-training quantization to the RequantShift form (Deeploy, Quantlab, NEMO networks): every
integer tensor is `value = code x scale` with one scale per tensor and zero at code 0; each
layer's integer accumulator becomes the next layer's codes by

    y = clip(floor((acc * mul + add + div / 2) / div), lo, hi)      div = 2**shift

`mul`, `add` per output channel. The choice is exact by construction: given the input and output
scales, the multiplier is fitted first (`fit_multiplier`) and each output channel's weight scale
is *defined* from it (`scale_w = mul * s_out / (div * s_in)`), so the integer network computes
what the fake-quantized float network does (weights and bias rounded to their scales, each
activation rounded half up to its scale and clipped) value for value.

Weights: symmetric, `bits` wide ([-(2**(bits-1) - 1), 2**(bits-1) - 1]), per output channel or
per layer. Activations: unsigned 8-bit after a ReLU, signed 8-bit otherwise; the network's
output signed `output_bits` wide. These are `FORMAT`, the number format of the dialect (the
one GAP8 declares, `targets/pulp/device.py`); steps and multipliers are the one quantization
pass's (`ir.numformat`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import numformat
from edgesynth.ir.intrange import int_range
from edgesynth.ir.numformat import NumberFormat

FORMAT = NumberFormat(
    name="requant_shift",
    scale="mul_shift",
    activation_bits=(8,),
    weight_bits=(8, 4, 2),
    bias_bits=32,
    accumulator_bits=32,
    weights="channel",
    unsigned_activations=True,
    mul_bits=16,  # the multiplier is fitted below 2**16: 15-16 significant bits
    shift_max=40,
    multiplier_rounding="up",  # mul / 2**shift >= the real factor: no weight is clipped
    zero_step="one",
)
WEIGHT_BITS = FORMAT.weight_bits
OUTPUT_BITS = (8, 16, 32)
WEIGHT_GRANULARITY = ("channel", "layer")
MUL_BITS = FORMAT.mul_bits
MAX_SHIFT = FORMAT.shift_max


@dataclass
class PtqOptions:
    activations: str = "minmax"  # minmax | percentile (quant.calibrate.METHODS)
    percentile: float = 99.99
    weights: str = FORMAT.weights  # channel | layer
    weight_bits: int = FORMAT.weight_bits[0]
    output_bits: int = 16

    def check(self) -> None:
        if self.weights not in WEIGHT_GRANULARITY:
            raise EdgesynthError(
                f"weights={self.weights}: choose {' or '.join(WEIGHT_GRANULARITY)}",
                key="--option weights",
            )
        if self.weight_bits not in WEIGHT_BITS:
            raise EdgesynthError(
                f"weight_bits={self.weight_bits}: choose {', '.join(map(str, WEIGHT_BITS))}",
                key="--option weight_bits",
            )
        if self.output_bits not in OUTPUT_BITS:
            raise EdgesynthError(
                f"output_bits={self.output_bits}: choose {', '.join(map(str, OUTPUT_BITS))}",
                key="--option output_bits",
            )


@dataclass(frozen=True)
class QTensor:
    """An integer tensor of the quantized network: its ONNX name, step and code range."""

    name: str
    scale: float
    bits: int
    signed: bool

    @property
    def lo(self) -> int:
        return int_range(self.bits, self.signed)[0]

    @property
    def hi(self) -> int:
        return int_range(self.bits, self.signed)[1]

    @property
    def levels(self) -> int:
        return 1 << self.bits


def activation(name: str, lo: float, hi: float, bits: int, unsigned: bool) -> QTensor:
    """The tensor type of a calibrated range: unsigned (codes 0..2**bits-1) when the values
    cannot be negative, else signed and symmetric (the scale from 2**(bits-1) - 1)."""
    if unsigned:
        return QTensor(name, numformat.step(max(hi, 0.0), FORMAT, bits, True), bits, False)
    return QTensor(name, numformat.step(max(abs(lo), abs(hi)), FORMAT, bits), bits, True)


def round_half_up(x: np.ndarray | float) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=np.float64) + 0.5)


def fit_multiplier(m: np.ndarray, where: str) -> tuple[np.ndarray, int]:
    """(mul, shift): integers with mul / 2**shift >= m (each at most one step above), the
    largest shift that keeps every mul below 2**MUL_BITS (at most MAX_SHIFT)."""
    m = np.asarray(m, dtype=np.float64)
    top = float(m.max(initial=0.0))
    if not math.isfinite(top):
        raise EdgesynthError(f"{where}: requantization factor {top} is not finite")
    if top <= 0:
        return np.ones_like(m, dtype=np.int64), 0
    mul, shift = numformat.fit_multiplier(m, FORMAT)
    return np.maximum(mul, 1), shift


@dataclass
class QuantizedLayer:
    """A convolution's or linear layer's integers: weights (as the float layer stores them),
    and the RequantShift that takes its accumulator to `out`."""

    weight: np.ndarray  # int64, the float weight's shape
    mul: np.ndarray  # int64 per output channel
    add: np.ndarray  # int64 per output channel: bias x mul
    shift: int
    step: np.ndarray  # per output channel: the real value of one weight step
    bias: np.ndarray  # int64 per output channel, in accumulator steps (s_in x step)

    def fake_weight(self) -> np.ndarray:
        """The weights as the fake-quantized float network uses them (code x step)."""
        return self.weight * self.step.reshape((-1,) + (1,) * (self.weight.ndim - 1))

    def fake_bias(self, s_in: float) -> np.ndarray:
        return self.bias * s_in * self.step


def quantize_layer(
    weight: np.ndarray,
    bias: np.ndarray | None,
    s_in: float,
    out: QTensor,
    opts: PtqOptions,
    where: str,
) -> QuantizedLayer:
    """Weights, multiplier and offset of one layer from input scale `s_in` to `out`."""
    w = np.asarray(weight, dtype=np.float64)
    qmax = (1 << (opts.weight_bits - 1)) - 1
    per_channel = np.abs(w.reshape(len(w), -1)).max(axis=1)
    if opts.weights == "layer":
        per_channel = np.full_like(per_channel, per_channel.max(initial=0.0))
    ideal = per_channel / qmax  # the weight step that uses the whole range
    mul, shift = fit_multiplier(s_in * ideal / out.scale, where)
    step = mul * out.scale / (2.0**shift * s_in)  # >= ideal: no weight is clipped
    shape = (len(w),) + (1,) * (w.ndim - 1)
    qw = np.clip(round_half_up(w / step.reshape(shape)), -qmax, qmax).astype(np.int64)
    b = np.zeros(len(w)) if bias is None else np.asarray(bias, dtype=np.float64)
    qb = round_half_up(b / (s_in * step))
    if np.abs(qb).max(initial=0) >= 2.0**40:
        raise EdgesynthError(f"{where}: the bias is {np.abs(b).max():.4g}, beyond 2**40 steps")
    qb = qb.astype(np.int64)
    return QuantizedLayer(qw, mul, qb * mul, shift, step, qb)
