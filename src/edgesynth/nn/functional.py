"""The accelerator's arithmetic in vectorized torch: rounding, clamping, shifts and pooling.

Two domains share these helpers:
- training (float): data in [-1, 127/128] on a grid of 1/128, weights in [-1, 1) on a grid of
  2^-(bits-1); quantizers round with a straight-through gradient;
- 8-bit mode (`simulate`): float64 tensors holding exact integers, the chip's own numbers
  (float64 holds every accumulator value exactly, and torch convolutions accept it).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from edgesynth.targets.max7800x.device import get_device

_CHIP = get_device("MAX78000")  # the number format both devices share
ACT_BITS = _CHIP.activation_bits  # data is 8-bit on the MAX7800x
ACT_SCALE = 2 ** (ACT_BITS - 1)  # 128: 1.0 in training equals 128 on the chip
ACT_MIN = -ACT_SCALE  # -128
ACT_MAX = ACT_SCALE - 1  # 127
BIAS_MIN, BIAS_MAX = ACT_MIN, ACT_MAX  # the bias register holds one signed byte
MAX_SHIFT = _CHIP.max_output_shift  # |output_shift| limit used by quantization-aware training
FLOAT32_EXACT = 2.0**24  # integers below this are exact in float32
BINARY = -1  # `weight_bits` of a layer training the MAX78002's +/-1 (binary) weights


def straight_through(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`y` in the forward pass, the identity's gradient in the backward pass."""
    return x + (y - x).detach()


def round_half_up(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer, halves toward +infinity (the chip's output rounding)."""
    return torch.floor(x + 0.5)


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer, halves away from zero (average-pool rounding)."""
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


# --- parameters ---------------------------------------------------------------------------


def weight_levels(bits: int) -> tuple[int, int]:
    """Smallest and largest integer weight of `bits` bits (two's complement; binary: +/-1)."""
    if bits == BINARY:
        return -1, 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def hardware_bits(bits: int) -> int:
    """The weight width the chip's shift counts: binary (+/-1) weights count as 1 bit."""
    return 1 if bits == BINARY else bits


def binary_shift_for(weight: torch.Tensor) -> torch.Tensor:
    """The output shift of a binary layer: the power of two nearest (in log scale) to the
    mean |weight|, the scale that best fits sign(w) * 2^shift to the float weights; clamped
    to the shifts the hardware offers."""
    mean = weight.detach().abs().flatten().float().mean()
    return torch.round(torch.log2(mean)).clamp(-MAX_SHIFT, MAX_SHIFT)


def binarize(w: torch.Tensor) -> torch.Tensor:
    """+1 where w >= 0, -1 elsewhere (the synthesizer's rule for binary weights)."""
    return torch.where(w >= 0, torch.ones_like(w), -torch.ones_like(w))


def output_shift_for(params: torch.Tensor, quantile: float = 1.0) -> torch.Tensor:
    """The output shift that brings the parameters (weights and bias) into [-1, 1).

    ceil(log2(q)) where q is the `quantile` of |params| (1.0: the largest), clamped to the
    shifts the hardware offers. Parameters that are all zero get the smallest shift.
    """
    mags = params.detach().abs().flatten().float()
    if quantile >= 1.0:
        limit = mags.max()
    else:
        limit = torch.quantile(mags, quantile)
    # log2(0) is -inf, which the clamp turns into the smallest shift: no branch on the value
    # (a branch would wait for the device)
    return torch.ceil(torch.log2(limit)).clamp(-MAX_SHIFT, MAX_SHIFT)


def qat_output_shift(
    weight: torch.Tensor, bias: torch.Tensor | None, bits: int, quantile: float
) -> torch.Tensor:
    """The output shift quantization-aware training uses: `binary_shift_for` the weights of
    a binary layer, else `output_shift_for` its weights and bias."""
    if bits == BINARY:
        return binary_shift_for(weight)
    params = weight if bias is None else torch.cat([weight.flatten(), bias.flatten()])
    return output_shift_for(params, quantile)


def pow2(k: torch.Tensor) -> torch.Tensor:
    """2**k as float32 for integer-valued k in [-126, 127], exactly on every device (built
    from the float32 exponent bits, not by a pow/exp2 approximation)."""
    return ((k.to(torch.int32) + 127) << 23).view(torch.float32)


def fake_quantize_weight(w: torch.Tensor, bits: int) -> torch.Tensor:
    """Weights (already divided by 2^shift) on the `bits`-bit grid, as training floats;
    binary weights are +/-1 (straight-through gradient, as for the other widths)."""
    if bits == BINARY:
        return straight_through(w, binarize(w))
    lo, hi = weight_levels(bits)
    scale = 2 ** (bits - 1)
    q = torch.clamp(round_half_up(w * scale), lo, hi) / scale
    return straight_through(w, q)


def fake_quantize_bias(b: torch.Tensor, bits: int) -> torch.Tensor:
    """Bias (already divided by 2^shift) as the chip adds it: one signed byte, counted in units
    of 2^-(bits-1) so that it lines up with `bits`-bit weights times 8-bit data."""
    scale = 2 ** (hardware_bits(bits) - 1)
    q = torch.clamp(round_half_up(b * scale), BIAS_MIN, BIAS_MAX) / scale
    return straight_through(b, q)


def integer_parameters(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    bits: int,
    shift: torch.Tensor | float,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Integer weights and bias bytes of a layer trained with quantization-aware training."""
    lo, hi = weight_levels(bits)
    scale = 2.0 ** (hardware_bits(bits) - 1) * 2.0 ** (-float(shift))
    if bits == BINARY:
        w = binarize(weight.detach().double())
    else:
        w = torch.clamp(round_half_up(weight.detach().double() * scale), lo, hi)
    b = None
    if bias is not None:
        b = torch.clamp(round_half_up(bias.detach().double() * scale), BIAS_MIN, BIAS_MAX)
    return w, b


# --- outputs ------------------------------------------------------------------------------


def fake_quantize_output(y: torch.Tensor) -> torch.Tensor:
    """An 8-bit layer output on the 1/128 grid (round half up), straight-through."""
    return straight_through(y, round_half_up(y * ACT_SCALE) / ACT_SCALE)


class _ClampOutput(torch.autograd.Function):
    """Round to the 1/128 grid (optional) and clamp to [lo, hi] in one pass; the gradient is
    hardtanh's (straight through the rounding, zero where the value was clipped)."""

    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, lo: float, hi: float, quantize: bool) -> torch.Tensor:
        ctx.save_for_backward(y)
        ctx.bounds = (lo, hi)
        if not quantize:
            return y.clamp(lo, hi)
        out = y.mul(ACT_SCALE).add_(0.5).floor_()
        return out.clamp_(lo * ACT_SCALE, hi * ACT_SCALE).div_(ACT_SCALE)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (y,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        return torch.ops.aten.hardtanh_backward(grad, y, lo, hi), None, None, None


def output_activation(y: torch.Tensor, activation: str | None, quantize: bool) -> torch.Tensor:
    """A training-scale 8-bit output: [round to the 1/128 grid,] clamp, then ReLU/Abs.

    Rounding half up commutes with ReLU, so ReLU is folded into the clamp; Abs comes after
    rounding, as on the chip."""
    unit = 1.0 / ACT_SCALE
    if activation == "abs":
        if quantize:
            y = fake_quantize_output(y)
        y = torch.clamp(y, ACT_MIN * unit, ACT_MAX * unit)
        return F.hardtanh(y.abs(), 0.0, ACT_MAX * unit)
    lo = 0.0 if activation == "relu" else ACT_MIN * unit
    return _ClampOutput.apply(y, lo, ACT_MAX * unit, quantize)


def requantize_(acc: torch.Tensor, shift: int, activation: str | None) -> torch.Tensor:
    """The chip's 8-bit output of an accumulator, computed in place:
    clamp(floor(0.5 + acc * 2^shift / 128), -128, 127), then ReLU/Abs (Abs clipped to 127)."""
    y = acc.mul_(2.0 ** (shift - (ACT_BITS - 1))).add_(0.5).floor_()
    if activation == "relu":
        return y.clamp_(0, ACT_MAX)
    y.clamp_(ACT_MIN, ACT_MAX)
    if activation == "abs":
        y.abs_().clamp_(max=ACT_MAX)
    return y


# --- pooling ------------------------------------------------------------------------------


def _as_2d(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    return (x.unsqueeze(-1), True) if x.dim() == 3 else (x, False)


def _pair(v: tuple[int, ...]) -> tuple[int, int]:
    return (v[0], 1) if len(v) == 1 else (v[0], v[1])


def max_pool(
    x: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> torch.Tensor:
    """Max pooling without padding over 1D (N, C, L) or 2D (N, C, H, W) data."""
    x2, one_d = _as_2d(x)
    y = F.max_pool2d(x2, _pair(size), _pair(stride), 0, _pair(dilation))
    return y.squeeze(-1) if one_d else y


def pool_sum(x: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """Sum over each pooling window (no padding)."""
    x2, one_d = _as_2d(x)
    y = F.avg_pool2d(x2, _pair(size), _pair(stride), 0, divisor_override=1)
    return y.squeeze(-1) if one_d else y


def avg_pool_integer(
    x: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...], rounding: bool
) -> torch.Tensor:
    """The chip's average pool of integer data: the window sum divided by its size, truncated
    toward zero, or rounded half away from zero with `rounding`."""
    count = 1
    for s in _pair(size):
        count *= s
    q = pool_sum(x, size, stride) / count
    return round_half_away(q) if rounding else torch.trunc(q)


def avg_pool_float(
    x: torch.Tensor,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    rounding: bool,
    quantize: bool,
) -> torch.Tensor:
    """Average pooling of training data; with `quantize`, the result lands where the chip's
    integer average lands (the gradient is the plain average's)."""
    x2, one_d = _as_2d(x)
    y = F.avg_pool2d(x2, _pair(size), _pair(stride), 0)
    if quantize:
        count = _pair(size)[0] * _pair(size)[1]
        total = torch.round(y.detach() * (count * ACT_SCALE))  # exact integer window sums
        q = total / count
        q = round_half_away(q) if rounding else torch.trunc(q)
        y = straight_through(y, q / ACT_SCALE)
    return y.squeeze(-1) if one_d else y
