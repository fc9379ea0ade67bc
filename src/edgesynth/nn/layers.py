"""Hardware-faithful layers: optional pooling, one weighted operation, optional batchnorm,
ReLU/Abs, and the chip's output clamping, rounding and shift.

A layer is in one of three states, kept in buffers that use the vendor's checkpoint names
(`output_shift`, `weight_bits`, `bias_bits`, `quantize_activation`, `adjust_output_shift`,
`shift_quantile`), so checkpoints move between edgesynth and ai8x-training unchanged:

- float: `weight_bits` 0. Plain training with the chip's clamping.
- QAT: `weight_bits` > 0 and `adjust_output_shift` 1. Weights and bias are floats; every
  forward pass derives the output shift from them, quantizes weights to `weight_bits` and
  outputs to 8 bits (straight-through gradients).
- quantized: `weight_bits` > 0 and `adjust_output_shift` 0. `op.weight` holds integers,
  `op.bias` the bias byte times 2^(weight_bits-1), `output_shift` the checkpoint's shift.

In 8-bit mode (`edgesynth.nn.set_device(..., simulate=True)`) every layer takes and returns the
chip's integers, computed exactly as the accelerator does (see corpus/ARITHMETIC.md):
acc = sum(w*x) + bias*128, y = clamp(floor(0.5 + acc*2^shift/128)), then ReLU/Abs;
wide (32-bit) outputs return the accumulator itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn import device as device_setting
from edgesynth.nn import functional as hw
from edgesynth.nn import limits
from edgesynth.targets.max7800x.device import Device

FLOAT, QAT, QUANTIZED = "float", "qat", "quantized"


def _norm_choice(value: str | None, allowed: dict[str, str | None], key: str) -> str | None:
    """Accept the vendor's spellings ('ReLU', 'Max', 'NoAffine', None, 'None')."""
    norm = allowed.get(str(value).lower())
    if norm is None and str(value).lower() not in allowed:
        choices = ", ".join(sorted(k for k in allowed if k != "none"))
        raise EdgesynthError(f"`{key}`={value!r} must be one of {choices} or None.")
    return norm


_ACTIVATIONS: dict[str, str | None] = {"relu": "relu", "abs": "abs", "none": None}
_POOLINGS: dict[str, str | None] = {"max": "max", "avg": "avg", "none": None}
_BATCHNORMS: dict[str, str | None] = {"affine": "affine", "noaffine": "noaffine", "none": None}


def _tuple(v: int | tuple[int, ...] | list[int], n: int) -> tuple[int, ...]:
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
        weight_bits: int | None,
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
        bits = float(weight_bits or 0)
        self.register_buffer("output_shift", torch.zeros(1))
        self.register_buffer("weight_bits", torch.tensor([bits]))
        self.register_buffer("bias_bits", torch.tensor([bits]))
        self.register_buffer("quantize_activation", torch.tensor([float(bits > 0)]))
        self.register_buffer("adjust_output_shift", torch.tensor([float(bits > 0)]))
        self.register_buffer("shift_quantile", torch.tensor([float(shift_quantile)]))

    # --- state ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        bits = int(self.weight_bits.item())
        if self.op is None or bits == 0:
            return FLOAT
        return QAT if self.adjust_output_shift.item() else QUANTIZED

    @property
    def bits(self) -> int:
        return int(self.weight_bits.item()) or 8

    def start_qat(self, weight_bits: int, shift_quantile: float = 1.0) -> None:
        """Switch this layer to quantization-aware training with `weight_bits`-bit weights."""
        if self.op is None:  # pooling only: outputs land on the 8-bit grid from now on
            self.quantize_activation.fill_(1.0)
            return
        chk = limits.LayerCheck(self._describe(), device_setting.current().device)
        limits.check_weight_bits(chk, weight_bits)
        chk.done()
        self.weight_bits.fill_(weight_bits)
        self.bias_bits.fill_(weight_bits)
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
        state = self.state
        bias = getattr(self.op, "bias", None)
        if state == FLOAT:
            raise EdgesynthError(
                f"{self._describe()} has float weights: 8-bit mode needs a quantized or QAT "
                "model (run `edgesynth quantize`, or train with a QAT policy)."
            )
        bits = self.bits
        if state == QAT:
            params = (
                self.op.weight
                if bias is None
                else torch.cat([self.op.weight.flatten(), bias.flatten()])
            )
            shift = hw.output_shift_for(params, float(self.shift_quantile.item()))
            w, b = hw.integer_parameters(self.op.weight, bias, bits, shift)
            return w, b, int(shift.item()) + 8 - bits
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
        qat = self.state == QAT
        x = self._pool_float(x, rounding, quantize=bool(self.quantize_activation.item()))
        if self.op is None:
            return x
        weight = self.op.weight
        bias = getattr(self.op, "bias", None)
        shift = None
        if qat:
            bits = self.bits
            params = weight if bias is None else torch.cat([weight.flatten(), bias.flatten()])
            shift = hw.output_shift_for(params, float(self.shift_quantile.item()))
            self.output_shift.copy_(shift.reshape(1))
            scale = 2.0 ** (-float(shift.item()))
            weight = hw.fake_quantize_weight(weight * scale, bits)
            if bias is not None:
                bias = hw.fake_quantize_bias(bias * scale, bits)
        y = self._op_forward(x, weight, bias)
        if self.bn is not None:
            y = self.bn(y)
        if self.wide:
            return y
        if shift is not None:
            y = y * 2.0 ** float(shift.item())
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
        """
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


def _init_kwargs(cls: type[HardwareLayer], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Merge a fused class's fixed settings into the caller's keyword arguments."""
    kwargs = dict(kwargs)
    for key, value in cls._defaults.items():
        given = kwargs.get(key)
        if key == "batchnorm" and given is not None:
            continue  # the BN variants default to affine batchnorm; 'NoAffine' may replace it
        if given is not None and str(given).lower() != str(value):
            raise EdgesynthError(f"{cls.__name__} fixes `{key}`={value!r}; got {given!r}.")
        kwargs[key] = value
    return kwargs


@dataclass(frozen=True)
class OpSpec:
    """The convolution a layer was asked for, with every value as a per-dimension tuple."""

    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    output_padding: tuple[int, ...]
    groups: int
    bias: bool


class _ConvBase(HardwareLayer):
    """Shared constructor of Conv1d, Conv2d and ConvTranspose2d."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...] | None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._build(in_channels, out_channels, kernel_size, **_init_kwargs(type(self), kwargs))

    def _build(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...] | None,
        *,
        pooling: str | None = None,
        pool_size: int | tuple[int, ...] = 2,
        pool_stride: int | tuple[int, ...] | None = None,
        pool_dilation: int | tuple[int, ...] = 1,
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        output_padding: int | tuple[int, ...] | None = None,
        bias: bool = True,
        activation: str | None = None,
        wide: bool = False,
        batchnorm: str | None = None,
        weight_bits: int | None = None,
        bias_bits: int | None = None,  # vendor spelling; always equals weight_bits here
        quantize_activation: bool = False,  # vendor spelling; implied by weight_bits
        shift_quantile: float = 1.0,
        eps: float = 1e-5,
        momentum: float = 0.05,
    ) -> None:
        del bias_bits, quantize_activation
        n = self.dims
        pooling = _norm_choice(pooling, _POOLINGS, "pooling")
        activation = _norm_choice(activation, _ACTIVATIONS, "activation")
        batchnorm = _norm_choice(batchnorm, _BATCHNORMS, "batchnorm")
        psize = _tuple(pool_size, n)
        pstride = _tuple(pool_stride if pool_stride is not None else pool_size, n)
        pdil = _tuple(pool_dilation, n)
        dev = device_setting.current().device
        self._name = f"{type(self).__name__}({in_channels}, {out_channels}, {kernel_size})"
        chk = limits.LayerCheck(self._name, dev)
        limits.check_pool(chk, pooling, psize, pstride, pdil)
        limits.check_weight_bits(chk, weight_bits)
        chk.require(not (wide and activation), "`wide`=True output has no activation")
        op: nn.Module | None = None
        bn: nn.Module | None = None
        if kernel_size is not None:
            spec = OpSpec(
                in_channels,
                out_channels,
                _tuple(kernel_size, n),
                _tuple(stride if stride is not None else self._default_stride(dev), n),
                _tuple(padding, n),
                _tuple(dilation, n),
                _tuple(
                    output_padding
                    if output_padding is not None
                    else self._default_output_padding(dev),
                    n,
                ),
                groups,
                bias,
            )
            limits.check_channels(chk, in_channels, out_channels)
            limits.check_groups(chk, groups, in_channels, out_channels)
            self._check_op(chk, spec)
            chk.require(
                batchnorm is None or bias,
                "`batchnorm` needs `bias`=True (the folded batchnorm becomes the bias)",
            )
            chk.require(batchnorm is None or not wide, "`wide`=True output has no batchnorm")
            chk.done()
            op = self._make_op(spec)
            if batchnorm is not None:
                bn_cls = nn.BatchNorm1d if n == 1 else nn.BatchNorm2d
                bn = bn_cls(out_channels, eps=eps, momentum=momentum, affine=batchnorm == "affine")
        else:
            chk.require(pooling is not None, "a layer without convolution must pool")
            chk.done()
        self._setup(
            op=op,
            pooling=pooling,
            pool_size=psize,
            pool_stride=pstride,
            pool_dilation=pdil,
            activation=activation,
            wide=wide,
            bn=bn,
            weight_bits=weight_bits,
            shift_quantile=shift_quantile,
        )

    def _describe(self) -> str:
        return self._name

    def _default_stride(self, dev: Device) -> int:
        return 1

    def _default_output_padding(self, dev: Device) -> int:
        return 0

    def _check_op(self, chk: limits.LayerCheck, spec: OpSpec) -> None:
        raise NotImplementedError

    def _make_op(self, spec: OpSpec) -> nn.Module:
        raise NotImplementedError


class Conv2d(_ConvBase):
    """[Max/Avg pool] -> 2D convolution -> [batchnorm] -> [ReLU/Abs], as one chip layer."""

    dims = 2

    def _check_op(self, chk: limits.LayerCheck, spec: OpSpec) -> None:
        dev = chk.device
        sizes = limits.fact(dev, "conv2d_kernel_sizes")
        for k in spec.kernel_size:
            chk.one_of("kernel_size", k, sizes)
        for p in spec.padding:
            chk.within("padding", p, 0, dev.max_pad)
        for s in spec.stride:
            chk.within("stride", s, 1, dev.max_stride_2d)
        for d in spec.dilation:
            chk.within("dilation", d, 1, dev.max_conv2d_dilation)

    def _make_op(self, spec: OpSpec) -> nn.Module:
        return nn.Conv2d(
            spec.in_channels,
            spec.out_channels,
            spec.kernel_size,
            stride=spec.stride,
            padding=spec.padding,
            dilation=spec.dilation,
            groups=spec.groups,
            bias=spec.bias,
        )

    def _op_forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        op = self.op
        return F.conv2d(x, weight, bias, op.stride, op.padding, op.dilation, op.groups)


class ConvTranspose2d(_ConvBase):
    """[Max/Avg pool] -> transposed 2D convolution (upsampling by 2) -> [ReLU/Abs]."""

    dims = 2

    def _default_stride(self, dev: Device) -> int:
        return limits.fact(dev, "transpose_stride")

    def _default_output_padding(self, dev: Device) -> int:
        return dev.supported_transpose_output_pads[0]

    def _check_op(self, chk: limits.LayerCheck, spec: OpSpec) -> None:
        dev = chk.device
        for k in spec.kernel_size:
            chk.one_of("kernel_size", k, (limits.fact(dev, "transpose_kernel_size"),))
        for s in spec.stride:
            chk.one_of("stride", s, (limits.fact(dev, "transpose_stride"),))
        for p in spec.padding:
            chk.one_of("padding", p, dev.supported_transpose_pads)
        for p in spec.output_padding:
            chk.one_of("output_padding", p, dev.supported_transpose_output_pads)
        for d in spec.dilation:
            chk.one_of("dilation", d, (1,))

    def _make_op(self, spec: OpSpec) -> nn.Module:
        return nn.ConvTranspose2d(
            spec.in_channels,
            spec.out_channels,
            spec.kernel_size,
            stride=spec.stride,
            padding=spec.padding,
            output_padding=spec.output_padding,
            groups=spec.groups,
            bias=spec.bias,
            dilation=spec.dilation,
        )

    def _op_forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        op = self.op
        return F.conv_transpose2d(
            x, weight, bias, op.stride, op.padding, op.output_padding, op.groups, op.dilation
        )


class Conv1d(_ConvBase):
    """[Max/Avg pool] -> 1D convolution -> [batchnorm] -> [ReLU/Abs], as one chip layer."""

    dims = 1

    def _default_stride(self, dev: Device) -> int:
        return limits.fact(dev, "conv1d_stride")

    def _check_op(self, chk: limits.LayerCheck, spec: OpSpec) -> None:
        dev = chk.device
        (k,), (s,), (p,), (d,) = spec.kernel_size, spec.stride, spec.padding, spec.dilation
        chk.within("kernel_size", k, 1, dev.max_kernel_1d)
        chk.one_of("stride", s, (limits.fact(dev, "conv1d_stride"),))
        chk.within("padding", p, 0, dev.max_pad)
        chk.within("dilation", d, 1, dev.max_dilation_1d)
        if (k - 1) * d >= dev.max_dilated_1d_span:  # runs folded on the 3x3 engine
            longest = dev.max_dilation_1d_kernel
            chk.require(k <= longest, f"`dilation`={d} needs `kernel_size` <= {longest}")
            chk.require(
                p <= dev.max_dilation_1d_pad,
                f"`dilation`={d} needs `padding` <= {dev.max_dilation_1d_pad}",
            )
        chk.require(
            p == 0 or spec.in_channels <= dev.processors or dev.supports_multipass_padded_conv1d,
            f"`padding` must be 0 with more than {dev.processors} input channels",
        )

    def _make_op(self, spec: OpSpec) -> nn.Module:
        return nn.Conv1d(
            spec.in_channels,
            spec.out_channels,
            spec.kernel_size,
            stride=spec.stride,
            padding=spec.padding,
            dilation=spec.dilation,
            groups=spec.groups,
            bias=spec.bias,
        )

    def _op_forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        op = self.op
        return F.conv1d(x, weight, bias, op.stride, op.padding, op.dilation, op.groups)


class Linear(HardwareLayer):
    """Fully connected layer (a 1x1 convolution on flattened data) -> [ReLU/Abs]."""

    dims = 0

    def __init__(self, in_features: int, out_features: int, **kwargs: Any) -> None:
        super().__init__()
        self._build(in_features, out_features, **_init_kwargs(type(self), kwargs))

    def _build(
        self,
        in_features: int,
        out_features: int,
        *,
        bias: bool = True,
        activation: str | None = None,
        wide: bool = False,
        weight_bits: int | None = None,
        bias_bits: int | None = None,
        quantize_activation: bool = False,
        shift_quantile: float = 1.0,
        pooling: None = None,
        batchnorm: None = None,
    ) -> None:
        del bias_bits, quantize_activation
        activation = _norm_choice(activation, _ACTIVATIONS, "activation")
        dev = device_setting.current().device
        self._name = f"{type(self).__name__}({in_features}, {out_features})"
        chk = limits.LayerCheck(self._name, dev)
        most = limits.fact(dev, "max_linear_features")
        chk.within("in_features", in_features, 1, most)
        chk.within("out_features", out_features, 1, most)
        chk.require(pooling is None, "a linear layer cannot pool (pool in the layer before)")
        chk.require(batchnorm is None, "a linear layer has no batchnorm")
        chk.require(not (wide and activation), "`wide`=True output has no activation")
        limits.check_weight_bits(chk, weight_bits)
        chk.done()
        self._setup(
            op=nn.Linear(in_features, out_features, bias=bias),
            pooling=None,
            pool_size=(),
            pool_stride=(),
            pool_dilation=(),
            activation=activation,
            wide=wide,
            bn=None,
            weight_bits=weight_bits,
            shift_quantile=shift_quantile,
        )

    def _describe(self) -> str:
        return self._name

    def _op_forward(
        self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        return F.linear(x, weight, bias)
