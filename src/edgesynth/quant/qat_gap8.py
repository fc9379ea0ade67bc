"""Quantization-aware training for gap8: PyTorch layers whose fake quantization is, by
construction, the RequantShift integer network `quant.requant_onnx` writes.

Write the network with `Conv1d`, `Conv2d` and `Linear` from here (each a layer with an optional
batch norm, folded into it when QAT starts, an optional ReLU and its output quantizer), `Add`
(a skip addition, an optional ReLU and its output quantizer) and torch's
`MaxPool1d`/`MaxPool2d`, `Flatten`, `Dropout`, `Identity`; wrap it in `Network`
(`quant.qat_network`: the input's quantizer, every layer linked to the results it reads).
It runs in three modes:

- `float`: ordinary training (the ReLU unclipped);
- `qat`: every layer's weights and bias are rounded to the steps the integer network uses
  (`quant.requant_shift.quantize_layer`, the post-training quantizer's own function: the weight
  step is defined from the requantization multiplier) and its output clipped to a learned range
  (PACT: a learned clip `alpha`, unsigned 8-bit codes after a ReLU, signed otherwise: codes
  -128..127 with 127 at alpha) and rounded half up to its step; rounding passes gradients
  straight through;
- `integer` (the 8-bit mode): every layer takes and returns integer codes, computing what the
  integer network computes: acc = sum(w x), y = clip(floor((acc mul + add + div/2) / div)) with
  the multiplier, offset and weights of the exported RequantShift ONNX
  (`quant.qat_network.integer_mode`), so this mode and the exported network agree value for
  value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from edgesynth.errors import EdgesynthError
from edgesynth.quant.requant_onnx import SUM_BITS, SUM_SHIFT
from edgesynth.quant.requant_shift import (
    PtqOptions,
    QTensor,
    QuantizedLayer,
    activation,
    fit_multiplier,
    quantize_layer,
)

FLOAT, QAT, INTEGER = "float", "qat", "integer"
MODES = (FLOAT, QAT, INTEGER)
ACTIVATIONS = ("relu", None)


def round_ste(x: torch.Tensor) -> torch.Tensor:
    """Round half up in the forward pass, identity in the backward pass."""
    return x + (torch.floor(x + 0.5) - x).detach()


def requant_shift(total: torch.Tensor, shift: int, out: QTensor) -> torch.Tensor:
    """clip(floor((total + div/2) / div), out's codes), div = 2**shift, in integers."""
    if shift:
        total = torch.div(total + (1 << (shift - 1)), 1 << shift, rounding_mode="floor")
    return torch.clamp(total, out.lo, out.hi)


class Input(nn.Module):
    """The network input's quantizer: its range is calibrated (min and max) when QAT starts;
    unsigned 8-bit codes when the input cannot be negative, signed otherwise."""

    lo: torch.Tensor
    hi: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("lo", torch.zeros(()))
        self.register_buffer("hi", torch.zeros(()))
        self.mode = FLOAT
        self.calibrating = False

    def qtensor(self, name: str = "input") -> QTensor:
        lo, hi = float(self.lo), float(self.hi)
        return activation(name, lo, hi, 8, lo >= 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self.lo.fill_(min(float(self.lo), float(x.min())))
            self.hi.fill_(max(float(self.hi), float(x.max())))
        if self.mode == FLOAT:
            return x
        q = self.qtensor()
        codes = torch.clamp(torch.floor(x.double() / q.scale + 0.5), q.lo, q.hi)
        return codes if self.mode == INTEGER else (codes * q.scale).to(x.dtype)


class Quantized(nn.Module):
    """What every quantized result shares: an optional ReLU and the output's quantizer
    (`alpha`, the learned clip: [0, alpha] after a ReLU, [-alpha, alpha] otherwise)."""

    def __init__(self, activation: str | None) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise EdgesynthError(f"activation={activation!r}: choose 'relu' or None")
        self.activation = activation
        self.alpha = nn.Parameter(torch.ones(()))
        self.mode = FLOAT
        self.calibrating = False
        self.options = PtqOptions()
        self.bits = 8  # the output's bits (the network's output: options.output_bits)

    @property
    def unsigned(self) -> bool:
        return self.activation == "relu"

    @property
    def where(self) -> str:
        return f"`{getattr(self, 'qualname', type(self).__name__)}`"

    def qtensor(self, name: str = "") -> QTensor:
        """The output's integer type as the RequantShift writer derives it from the range."""
        a = abs(float(self.alpha.detach()))
        return activation(name, 0.0 if self.unsigned else -a, a, self.bits, self.unsigned)

    def levels(self) -> int:
        return (1 << self.bits) - 1 if self.unsigned else (1 << (self.bits - 1)) - 1

    def _float_output(self, y: torch.Tensor) -> torch.Tensor:
        """The ReLU; while calibrating, the clip grows to the largest output."""
        y = F.relu(y) if self.unsigned else y
        if self.calibrating:
            top = float(y.detach().abs().max())
            self.alpha.data.fill_(max(float(self.alpha), top))
        return y

    def _clip(self, y: torch.Tensor) -> torch.Tensor:
        """PACT: clipped to the learned range (the clip gets the gradient of what it cuts)."""
        alpha = self.alpha.abs()
        if self.unsigned:
            return torch.minimum(F.relu(y), alpha)
        low = -alpha * (self.levels() + 1) / self.levels()  # codes -(levels + 1) .. levels
        return torch.maximum(torch.minimum(y, alpha), low)

    def _clip_round(self, y: torch.Tensor) -> torch.Tensor:
        """Clipped to the learned range, rounded half up to its step."""
        step = self.alpha.abs() / self.levels()
        return round_ste(self._clip(y) / step) * step


class Layer(Quantized):
    """A convolution or linear layer, an optional batch norm and ReLU, the output's quantizer."""

    op: nn.Conv1d | nn.Conv2d | nn.Linear

    def __init__(self, op: nn.Module, activation: str | None, batchnorm: bool = False) -> None:
        super().__init__(activation)
        self.op = op  # type: ignore[assignment]
        self.bn: nn.Module | None = None  # folded into `op` when QAT starts
        if batchnorm:
            out = op.weight.shape[0]  # type: ignore[index]
            self.bn = nn.BatchNorm2d(out) if isinstance(op, nn.Conv2d) else nn.BatchNorm1d(out)
        self.source: Any = None  # the Input or Layer whose codes this layer reads (Network)
        self.integer: tuple[QuantizedLayer, QTensor] | None = None  # the 8-bit mode's numbers

    # -- forward --------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == INTEGER:
            return self._integer(x)
        if self.mode == FLOAT:
            y = self._op(x, self.op.weight, self.op.bias)
            return self._float_output(self.bn(y) if self.bn is not None else y)
        return self._fake_quantized(x)

    @torch.no_grad()
    def fold_batchnorm(self) -> None:
        """Fold the batch norm (its running statistics) into the weights and bias."""
        bn = self.bn
        if bn is None:
            return
        factor = bn.weight / torch.sqrt(bn.running_var + bn.eps)  # type: ignore[operator]
        shape = (-1,) + (1,) * (self.op.weight.dim() - 1)
        self.op.weight.mul_(factor.reshape(shape))
        bias = self.op.bias if self.op.bias is not None else torch.zeros_like(factor)
        folded = (bias - bn.running_mean) * factor + bn.bias  # type: ignore[operator]
        self.op.bias = nn.Parameter(folded.detach().clone())
        self.bn = None

    def _op(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        if isinstance(self.op, nn.Linear):
            return F.linear(x, w, b)
        return self.op._conv_forward(x, w, b)  # type: ignore[union-attr]

    def quantized(self) -> QuantizedLayer:
        """The weights and requantization of the layer's current float weights, exactly as the
        RequantShift writer chooses them."""
        w = self.op.weight.detach().double().cpu().numpy()
        b = self.op.bias
        bias = None if b is None else b.detach().double().cpu().numpy()
        s_in = self.source.qtensor().scale
        return quantize_layer(w, bias, s_in, self.qtensor(), self.options, self.where)

    def _fake_quantized(self, x: torch.Tensor) -> torch.Tensor:
        ql = self.quantized()
        w = self.op.weight
        wq = torch.from_numpy(ql.fake_weight()).to(w)
        w = w + (wq - w).detach()
        b = self.op.bias
        if b is not None:
            bq = torch.from_numpy(ql.fake_bias(self.source.qtensor().scale)).to(b)
            b = b + (bq - b).detach()
        return self._clip_round(self._op(x, w, b))

    def _integer(self, x: torch.Tensor) -> torch.Tensor:
        """Codes in, codes out: the integer network's arithmetic (float64 sums of integers are
        exact below 2**53; the requantization in int64)."""
        if self.integer is None:
            raise EdgesynthError(f"{self.where}: the 8-bit mode needs `integer_mode(network)`")
        ql, out = self.integer
        w = torch.from_numpy(ql.weight.astype(np.float64)).to(x.device)
        acc = self._op(x.double(), w, None).round().long()
        shape = (1, -1) + (1,) * (acc.dim() - 2)
        mul = torch.from_numpy(ql.mul).to(x.device).reshape(shape)
        add = torch.from_numpy(ql.add).to(x.device).reshape(shape)
        return requant_shift(acc * mul + add, ql.shift, out).double()


class Conv2d(Layer):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
        stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
        bias: bool = True, activation: str | None = None, batchnorm: bool = False,
    ) -> None:  # fmt: skip
        op = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                       bias)  # fmt: skip
        super().__init__(op, activation, batchnorm)


class Conv1d(Layer):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
        padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True,
        activation: str | None = None, batchnorm: bool = False,
    ) -> None:  # fmt: skip
        op = nn.Conv1d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                       bias)  # fmt: skip
        super().__init__(op, activation, batchnorm)


class Linear(Layer):
    def __init__(
        self, in_features: int, out_features: int, bias: bool = True,
        activation: str | None = None, batchnorm: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(nn.Linear(in_features, out_features, bias), activation, batchnorm)


class Add(Quantized):
    """The sum of two tensors, an optional ReLU, the output's quantizer; in the RequantShift
    writer's form: each operand requantized to 1/16 of the output's step (16-bit), the two
    summed, the sum divided by 16 (rounded half up) and clipped."""

    def __init__(self, activation: str | None = None) -> None:
        super().__init__(activation)
        self.sources: tuple[Any, ...] = ()  # the two results it adds (Network)
        self.integer: tuple[list[tuple[int, int]], QTensor] | None = None  # (mul, shift) each

    def operands(self) -> list[tuple[int, int]]:
        """(mul, shift) taking each operand's codes to the sum's grid, as the writer fits them."""
        mid = self.qtensor().scale / (1 << SUM_SHIFT)
        out = []
        for source in self.sources:
            mul, shift = fit_multiplier(np.array([source.qtensor().scale / mid]), self.where)
            out.append((int(mul[0]), shift))
        return out

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self.mode == FLOAT:
            return self._float_output(a + b)
        term = QTensor("", 1.0, SUM_BITS, True)
        if self.mode == INTEGER:
            if self.integer is None:
                raise EdgesynthError(f"{self.where}: the 8-bit mode needs `integer_mode(network)`")
            ops, out = self.integer
            terms = [
                requant_shift(c.round().long() * mul, shift, term)
                for c, (mul, shift) in zip((a, b), ops, strict=True)
            ]
            return requant_shift(terms[0] + terms[1], SUM_SHIFT, out).double()
        return self._fake_quantized(a, b, term)

    def _fake_quantized(self, a: torch.Tensor, b: torch.Tensor, term: QTensor) -> torch.Tensor:
        """The integer steps on the operands' codes (exact: every value is a small integer),
        straight-through gradients, PACT's gradient for the clip."""
        total: Any = 0
        for v, source, (mul, shift) in zip((a, b), self.sources, self.operands(), strict=True):
            scale = source.qtensor().scale
            codes = torch.round(v.detach() / scale)  # v is codes x scale
            t = requant_shift(codes * mul, shift, term)
            t_value = v * (mul / (scale * 2.0**shift))
            total = total + t_value + (t - t_value).detach()
        step = self.alpha.abs() / self.levels()
        u = self._clip(total * (self.qtensor().scale / (1 << SUM_SHIFT))) / step
        codes = requant_shift(total.detach(), SUM_SHIFT, self.qtensor())
        return (u + (codes - u).detach()) * step  # as `_clip_round`, the codes exact


class AvgPool2d(Quantized):
    """Average pooling over `kernel_size` windows (`None`: over the whole map, a global
    average), an optional ReLU, the output's quantizer; in the RequantShift writer's form: the
    window sum times `mul`, divided by the window size times 2**shift (one rounding, half up),
    the output's step the input's times 2**shift / mul. Unsigned when the input is."""

    def __init__(
        self, kernel_size: int | None = None, stride: int | None = None,
        activation: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(activation)
        self.kernel_size = kernel_size
        self.stride = stride
        self.source: Any = None  # the result it pools (Network)
        self.integer: tuple[tuple[int, int], QTensor] | None = None  # (mul, shift), output

    @property
    def unsigned(self) -> bool:
        return self.activation == "relu" or not self.source.qtensor().signed

    def multiplier(self) -> tuple[int, int]:
        """(mul, shift) from the input's step to the learned range's, as the writer fits it."""
        s_in = self.source.qtensor().scale
        mul, shift = fit_multiplier(np.array([s_in / super().qtensor().scale]), self.where)
        return int(mul[0]), shift

    def qtensor(self, name: str = "") -> QTensor:
        mul, shift = self.multiplier()
        q = super().qtensor(name)
        return QTensor(q.name, self.source.qtensor().scale * 2.0**shift / mul, q.bits, q.signed)

    def _pool(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel_size is None:
            return F.adaptive_avg_pool2d(x, 1)
        return F.avg_pool2d(x, self.kernel_size, self.stride)

    def _codes(self, codes: torch.Tensor, mul: int, shift: int, out: QTensor) -> torch.Tensor:
        """floor((sum mul + count (div // 2)) / (count div)), clipped: exact on integer codes."""
        size = self.kernel_size
        count = codes.shape[-1] * codes.shape[-2] if size is None else size * size
        sums = torch.round(self._pool(codes.double()) * count).long()
        div = 1 << shift
        total = torch.div(sums * mul + count * (div >> 1), count * div, rounding_mode="floor")
        return torch.clamp(total, out.lo, out.hi)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == FLOAT:
            return self._float_output(self._pool(x))
        if self.mode == INTEGER:
            if self.integer is None:
                raise EdgesynthError(f"{self.where}: the 8-bit mode needs `integer_mode(network)`")
            (mul, shift), out = self.integer
            return self._codes(x, mul, shift, out).double()
        out = self.qtensor()
        codes_in = torch.round(x.detach().double() / self.source.qtensor().scale)
        codes = self._codes(codes_in, *self.multiplier(), out).to(x.dtype)
        alpha = self.alpha.abs()
        step = alpha / self.levels() * (out.scale * self.levels() / float(alpha.detach()))
        u = self._clip(self._pool(x)) / step
        return (u + (codes - u).detach()) * step  # as `_clip_round`, the codes exact
