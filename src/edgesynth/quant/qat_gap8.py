"""Quantization-aware training for gap8: PyTorch layers whose fake quantization is, by
construction, the RequantShift integer network `quant.requant_onnx` writes.

Write the network with `Conv1d`, `Conv2d` and `Linear` from here (each a layer with an optional
batch norm, folded into it when QAT starts, an optional ReLU and its output quantizer) and
torch's `MaxPool1d`/`MaxPool2d`, `Flatten`, `Dropout`, `Identity`; wrap it in `Network` (which
adds the input's quantizer and links every layer to the one feeding it). It runs in three modes:

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
  (`quant.qat_onnx.integer_mode`), so this mode and the exported network agree value for value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from edgesynth.errors import EdgesynthError
from edgesynth.quant.requant_shift import (
    PtqOptions,
    QTensor,
    QuantizedLayer,
    activation,
    quantize_layer,
)

FLOAT, QAT, INTEGER = "float", "qat", "integer"
MODES = (FLOAT, QAT, INTEGER)
ACTIVATIONS = ("relu", None)


def round_ste(x: torch.Tensor) -> torch.Tensor:
    """Round half up in the forward pass, identity in the backward pass."""
    return x + (torch.floor(x + 0.5) - x).detach()


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


class Layer(nn.Module):
    """A convolution or linear layer, an optional ReLU and the output's quantizer (`alpha`,
    the learned clip: [0, alpha] after a ReLU, [-alpha, alpha] otherwise)."""

    op: nn.Conv1d | nn.Conv2d | nn.Linear

    def __init__(self, op: nn.Module, activation: str | None, batchnorm: bool = False) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise EdgesynthError(f"activation={activation!r}: choose 'relu' or None")
        self.op = op  # type: ignore[assignment]
        self.bn: nn.Module | None = None  # folded into `op` when QAT starts
        if batchnorm:
            out = op.weight.shape[0]  # type: ignore[index]
            self.bn = nn.BatchNorm2d(out) if isinstance(op, nn.Conv2d) else nn.BatchNorm1d(out)
        self.activation = activation
        self.alpha = nn.Parameter(torch.ones(()))
        self.mode = FLOAT
        self.calibrating = False
        self.options = PtqOptions()
        self.bits = 8  # the output's bits (the network's output: options.output_bits)
        self.source: Any = None  # the Input or Layer whose codes this layer reads (Network)
        self.integer: tuple[QuantizedLayer, QTensor] | None = None  # the 8-bit mode's numbers

    # -- the output's integer type --------------------------------------------------------------
    @property
    def unsigned(self) -> bool:
        return self.activation == "relu"

    def qtensor(self, name: str = "") -> QTensor:
        """The output's integer type as the RequantShift writer derives it from the range."""
        a = abs(float(self.alpha.detach()))
        return activation(name, 0.0 if self.unsigned else -a, a, self.bits, self.unsigned)

    def levels(self) -> int:
        return (1 << self.bits) - 1 if self.unsigned else (1 << (self.bits - 1)) - 1

    # -- forward --------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == INTEGER:
            return self._integer(x)
        if self.mode == FLOAT:
            y = self._op(x, self.op.weight, self.op.bias)
            y = self.bn(y) if self.bn is not None else y
            y = F.relu(y) if self.unsigned else y
            if self.calibrating:
                top = float(y.detach().abs().max())
                self.alpha.data.fill_(max(float(self.alpha), top))
            return y
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

    @property
    def where(self) -> str:
        return f"layer `{getattr(self, 'qualname', type(self).__name__)}`"

    def _fake_quantized(self, x: torch.Tensor) -> torch.Tensor:
        ql = self.quantized()
        w = self.op.weight
        wq = torch.from_numpy(ql.fake_weight()).to(w)
        w = w + (wq - w).detach()
        b = self.op.bias
        if b is not None:
            bq = torch.from_numpy(ql.fake_bias(self.source.qtensor().scale)).to(b)
            b = b + (bq - b).detach()
        y = self._op(x, w, b)
        alpha = self.alpha.abs()
        if self.unsigned:
            y = torch.minimum(F.relu(y), alpha)
        else:  # codes -(levels + 1) .. levels, as the integer network clips them
            low = -alpha * (self.levels() + 1) / self.levels()
            y = torch.maximum(torch.minimum(y, alpha), low)
        step = alpha / self.levels()
        return round_ste(y / step) * step

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
        total = acc * mul + add
        if ql.shift:
            total = torch.div(total + (1 << (ql.shift - 1)), 1 << ql.shift, rounding_mode="floor")
        return torch.clamp(total, out.lo, out.hi).double()


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
