"""The machinery every hardware-faithful layer shares: optional pooling, one weighted
operation, optional batchnorm, ReLU/Abs, and the chip's output clamping, rounding and shift.

A layer is in one of three states, kept in buffers that use the vendor's checkpoint names
(`output_shift`, `weight_bits`, `bias_bits`, `quantize_activation`, `adjust_output_shift`,
`shift_quantile`), so checkpoints move between edgesynth and ai8x-training unchanged:

- float: `weight_bits` 0. Plain training with the chip's clamping.
- QAT: `weight_bits` != 0 and `adjust_output_shift` 1. Weights and bias are floats; every
  forward pass derives the output shift from them, quantizes weights to `weight_bits` and
  outputs to 8 bits (straight-through gradients).
- quantized: `weight_bits` > 0 and `adjust_output_shift` 0. `op.weight` holds integers,
  `op.bias` the bias byte times 2^(weight_bits-1), `output_shift` the checkpoint's shift.

`weight_bits` -1 is QAT of the MAX78002's binary weights: +/-1 (sign, straight-through
gradient) times 2^output_shift, the shift nearest the mean |weight|. Quantized, such a layer
is an ordinary 1-bit layer whose weights are all +/-1, which the synthesizer runs as binary.

In 8-bit mode (`edgesynth.nn.set_device(..., simulate=True)`) every layer takes and returns the
chip's integers, computed exactly as the accelerator does (see corpus/ARITHMETIC.md):
acc = sum(w*x) + bias*128, y = clamp(floor(0.5 + acc*2^shift/128)), then ReLU/Abs;
wide (32-bit) outputs return the accumulator itself.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn import device as device_setting
from edgesynth.nn import functional as hw
from edgesynth.nn import limits

FLOAT, QAT, QUANTIZED = "float", "qat", "quantized"


def norm_choice(value: str | None, allowed: dict[str, str | None], key: str) -> str | None:
    """Accept the vendor's spellings ('ReLU', 'Max', 'NoAffine', None, 'None')."""
    norm = allowed.get(str(value).lower())
    if norm is None and str(value).lower() not in allowed:
        choices = ", ".join(sorted(k for k in allowed if k != "none"))
        raise EdgesynthError(f"`{key}`={value!r} must be one of {choices} or None.")
    return norm


ACTIVATIONS: dict[str, str | None] = {"relu": "relu", "abs": "abs", "none": None}
POOLINGS: dict[str, str | None] = {"max": "max", "avg": "avg", "none": None}
BATCHNORMS: dict[str, str | None] = {"affine": "affine", "noaffine": "noaffine", "none": None}


class Mode(NamedTuple):
    """A layer's state buffers as Python values (read once, not at every forward pass)."""

    state: str  # FLOAT, QAT or QUANTIZED
    bits: int  # weight bits (8 for a float layer)
    quantize_activation: bool
    shift_quantile: float


def as_tuple(v: int | tuple[int, ...] | list[int], n: int) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    t = tuple(int(i) for i in v)
    return t if len(t) == n else (t[0],) * n


class HardwareLayer(nn.Module):
    """Common machinery of every weighted layer (and of the pooling-only layers)."""

    dims: ClassVar[int] = 2  # spatial dimensions: 1 for Conv1d, 2 for Conv2d, 0 for Linear
    _defaults: ClassVar[dict[str, Any]] = {}  # fixed by the fused subclasses

    op: nn.Module | None
    bn: nn.Module | None
    output_shift: torch.Tensor
    weight_bits: torch.Tensor
    bias_bits: torch.Tensor
    quantize_activation: torch.Tensor
    adjust_output_shift: torch.Tensor
    shift_quantile: torch.Tensor

    def _setup(
        self,
        *,
        op: nn.Module | None,
        pooling: str | None,
        pool_size: tuple[int, ...],
        pool_stride: tuple[int, ...],
        pool_dilation: tuple[int, ...],
        activation: str | None,
        wide: bool,
        bn: nn.Module | None,
        weight_bits: int | str | None,
        shift_quantile: float,
    ) -> None:
        self.pooling = pooling
        self.pool_size = pool_size
        self.pool_stride = pool_stride
        self.pool_dilation = pool_dilation
        self.activation = activation
        self.wide = wide
        self.op = op
        self.bn = bn
        bits = float(hw.BINARY if weight_bits == "binary" else weight_bits or 0)
        self.register_buffer("output_shift", torch.zeros(1))
        self.register_buffer("weight_bits", torch.tensor([bits]))
        self.register_buffer("bias_bits", torch.tensor([bits]))
        self.register_buffer("quantize_activation", torch.tensor([float(bits != 0)]))
        self.register_buffer("adjust_output_shift", torch.tensor([float(bits != 0)]))
        self.register_buffer("shift_quantile", torch.tensor([float(shift_quantile)]))

    # --- state ---------------------------------------------------------------------------

    _STATE_BUFFERS: ClassVar[tuple[str, ...]] = (
        "weight_bits",
        "adjust_output_shift",
        "quantize_activation",
        "shift_quantile",
    )

    def mode(self) -> Mode:
        """The state buffers as Python values, read again only after a buffer changed (its
        version counter moved), so a forward pass costs no device synchronization; while
        torch.compile traces, the last values read (see `prime_modes`)."""
        cached = self.__dict__.get("_mode_cache")
        if cached is not None and torch.compiler.is_compiling():
            return cached[1]
        key = tuple((id(t), t._version) for t in (getattr(self, b) for b in self._STATE_BUFFERS))
        if cached is None or cached[0] != key:
            bits = int(self.weight_bits.item())
            if self.op is None or bits == 0:
                state = FLOAT
            else:
                state = QAT if self.adjust_output_shift.item() else QUANTIZED
            mode = Mode(
                state,
                bits or 8,
                bool(self.quantize_activation.item()),
                float(self.shift_quantile.item()),
            )
            cached = (key, mode)
            self.__dict__["_mode_cache"] = cached
        return cached[1]

    @property
    def state(self) -> str:
        return self.mode().state

    @property
    def bits(self) -> int:
        return self.mode().bits

    def start_qat(self, weight_bits: int | str, shift_quantile: float = 1.0) -> None:
        """Switch this layer to quantization-aware training with `weight_bits`-bit weights
        (`"binary"` or -1: the MAX78002's +/-1 weights)."""
        if self.op is None:  # pooling only: outputs land on the 8-bit grid from now on
            self.quantize_activation.fill_(1.0)
            return
        chk = limits.LayerCheck(self._describe(), device_setting.current().device)
        limits.check_weight_bits(chk, weight_bits)
        chk.done()
        bits = hw.BINARY if weight_bits == "binary" else weight_bits
        self.weight_bits.fill_(bits)
        self.bias_bits.fill_(bits)
        self.quantize_activation.fill_(1.0)
        self.adjust_output_shift.fill_(1.0)
        self.shift_quantile.fill_(shift_quantile)

    def _describe(self) -> str:
        return type(self).__name__

    # --- integer view --------------------------------------------------------------------

    def integer_parameters(self) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """(weights, bias bytes, total shift) exactly as the chip uses them, float64 ints.

        The total shift is the checkpoint's output shift plus (8 - weight bits), since the
        chip multiplies 8-bit data by narrow weights without rescaling them."""
        assert self.op is not None
        mode = self.mode()
        state = mode.state
        bias = getattr(self.op, "bias", None)
        if state == FLOAT:
            raise EdgesynthError(
                f"{self._describe()} has float weights: 8-bit mode needs a quantized or QAT "
                "model (run `edgesynth quantize`, or train with a QAT policy)."
            )
        bits = mode.bits
        if state == QAT:
            shift = hw.qat_output_shift(self.op.weight, bias, bits, mode.shift_quantile)
            w, b = hw.integer_parameters(self.op.weight, bias, bits, shift)
            return w, b, int(shift.item()) + 8 - hw.hardware_bits(bits)
        w = self.op.weight.detach().double()
        b = None
        if bias is not None:
            b = torch.floor(bias.detach().double() / 2 ** (bits - 1))
        return w, b, round(self.output_shift.item()) + 8 - bits

    def set_integer_parameters(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        shift: int,
        bits: int = 8,
    ) -> None:
        """Make this a quantized layer holding the chip's numbers: integer `weight` (in this
        layer's torch layout), bias bytes `bias` (added as bias*128) and the total `shift`."""
        assert self.op is not None
        if tuple(weight.shape) != tuple(self.op.weight.shape):
            raise EdgesynthError(
                f"{self._describe()}: weights {tuple(weight.shape)} do not fit "
                f"{tuple(self.op.weight.shape)}."
            )
        self.op.weight.data = weight.detach().clone().float()
        if bias is None:
            self.op.register_parameter("bias", None)
        else:
            stored = bias.detach().clone().float().reshape(-1) * 2.0 ** (bits - 1)
            self.op.bias = nn.Parameter(stored)
        self.bn = None
        self.output_shift.fill_(float(shift - 8 + bits))
        self.weight_bits.fill_(float(bits))
        self.bias_bits.fill_(float(bits))
        self.quantize_activation.fill_(1.0)
        self.adjust_output_shift.fill_(0.0)

    # --- forward -------------------------------------------------------------------------

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        setting = device_setting.current()
        if setting.simulate:
            return self._forward_integer(x, setting.avg_pool_rounding)
        if self.state == QUANTIZED:
            return self._forward_quantized_float(x, setting.avg_pool_rounding)
        return self._forward_float(x, setting.avg_pool_rounding)

    def _pool_float(self, x: torch.Tensor, rounding: bool, quantize: bool) -> torch.Tensor:
        if self.pooling == "max":
            return hw.max_pool(x, self.pool_size, self.pool_stride, self.pool_dilation)
        if self.pooling == "avg":
            rounding = rounding and self.dims != 1  # 1D averages always truncate (vendor KAT)
            return hw.avg_pool_float(x, self.pool_size, self.pool_stride, rounding, quantize)
        return x

    def _pool_integer(self, x: torch.Tensor, rounding: bool) -> torch.Tensor:
        if self.pooling == "max":
            return hw.max_pool(x, self.pool_size, self.pool_stride, self.pool_dilation)
        if self.pooling == "avg":
            rounding = rounding and self.dims != 1
            return hw.avg_pool_integer(x, self.pool_size, self.pool_stride, rounding)
        return x

    def _forward_float(self, x: torch.Tensor, rounding: bool) -> torch.Tensor:
        mode = self.mode()
        x = self._pool_float(x, rounding, quantize=mode.quantize_activation)
        if self.op is None:
            return x
        weight = self.op.weight
        bias = getattr(self.op, "bias", None)
        shift = None
        if mode.state == QAT:
            shift = hw.qat_output_shift(weight, bias, mode.bits, mode.shift_quantile)
            self.output_shift.copy_(shift.reshape(1))
            scale = hw.pow2(-shift)  # a tensor: no device synchronization
            weight = hw.fake_quantize_weight(weight * scale, mode.bits)
            if bias is not None:
                bias = hw.fake_quantize_bias(bias * scale, mode.bits)
        y = self._op_forward(x, weight, bias)
        if self.bn is not None:
            y = self.bn(y)
        if self.wide:
            return y
        if shift is not None:
            y = y * hw.pow2(shift)
        return hw.output_activation(y, self.activation, quantize=shift is not None)

    def _forward_integer(self, x: torch.Tensor, rounding: bool) -> torch.Tensor:
        if not x.is_floating_point():
            x = x.double()
        x = self._pool_integer(x, rounding)
        if self.op is None:
            return x
        w, b, shift = self.integer_parameters()
        dtype = self._exact_dtype(x, w, b)
        acc = self._op_forward(x.to(dtype), w.to(dtype), None)
        if b is not None:
            acc += (b * hw.ACT_SCALE).to(dtype).reshape((1, -1) + (1,) * (acc.dim() - 2))
        if self.wide:
            return acc.double()
        return hw.requantize_(acc, shift, self.activation)

    def _exact_dtype(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.dtype:
        """float32 when no partial sum can reach 2^24, else float64 (exact below 2^53).

        Data and weights are small integers, so every product and every partial sum of a
        layer is an integer; when each output's sum of |w| times max |x|, plus its bias, stays
        below 2^24, float32 holds all of them exactly, whatever order the convolution adds in.
        Only on the CPU: a GPU may run float32 convolutions at reduced precision (TF32).
        """
        if x.device.type != "cpu":
            return torch.float64
        if isinstance(self.op, nn.ConvTranspose2d):  # (in, out/groups, kh, kw)
            per_output = w.abs().sum(dim=(0, 2, 3))
        else:
            per_output = w.abs().reshape(w.shape[0], -1).sum(dim=1)
        bound = float(per_output.max()) * float(x.abs().max()) if x.numel() else 0.0
        if b is not None:
            bound += float(b.abs().max()) * hw.ACT_SCALE
        return torch.float32 if bound < hw.FLOAT32_EXACT else torch.float64

    def _forward_quantized_float(self, x: torch.Tensor, rounding: bool) -> torch.Tensor:
        """A quantized layer run on training data: the chip's result, rescaled to floats."""
        x_int = torch.round(x.detach().double() * hw.ACT_SCALE)
        y = self._forward_integer(x_int, rounding)
        unit = (
            2.0 ** (self.bits + hw.ACT_BITS - 2)
            if self.wide and self.op is not None
            else float(hw.ACT_SCALE)
        )
        return (y / unit).to(x.dtype)

    def _op_forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        raise NotImplementedError

    def extra_repr(self) -> str:
        parts = []
        if self.pooling:
            parts.append(
                f"pooling={self.pooling}, pool_size={self.pool_size}, "
                f"pool_stride={self.pool_stride}"
            )
        if self.activation:
            parts.append(f"activation={self.activation}")
        if self.wide:
            parts.append("wide=True")
        return ", ".join(parts)


def prime_modes(model: nn.Module) -> None:
    """Read every hardware layer's mode now (before torch.compile traces the model)."""
    for m in model.modules():
        if isinstance(m, HardwareLayer):
            m.mode()
