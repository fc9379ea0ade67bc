"""The weighted layers: Conv2d, ConvTranspose2d, Conv1d and Linear, checked against the
device when they are built (see `base.HardwareLayer` for what they compute)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn import device as device_setting
from edgesynth.nn import limits
from edgesynth.nn.base import (
    ACTIVATIONS,
    BATCHNORMS,
    FLOAT,
    POOLINGS,
    QAT,
    QUANTIZED,
    HardwareLayer,
    as_tuple,
    norm_choice,
)
from edgesynth.targets.max7800x.device import Device

__all__ = [
    "FLOAT",
    "QAT",
    "QUANTIZED",
    "Conv1d",
    "Conv2d",
    "ConvTranspose2d",
    "HardwareLayer",
    "Linear",
    "OpSpec",
]


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
        weight_bits: int | str | None = None,
        bias_bits: int | None = None,  # vendor spelling; always equals weight_bits here
        quantize_activation: bool = False,  # vendor spelling; implied by weight_bits
        shift_quantile: float = 1.0,
        eps: float = 1e-5,
        momentum: float = 0.05,
    ) -> None:
        del bias_bits, quantize_activation
        n = self.dims
        pooling = norm_choice(pooling, POOLINGS, "pooling")
        activation = norm_choice(activation, ACTIVATIONS, "activation")
        batchnorm = norm_choice(batchnorm, BATCHNORMS, "batchnorm")
        psize = as_tuple(pool_size, n)
        pstride = as_tuple(pool_stride if pool_stride is not None else pool_size, n)
        pdil = as_tuple(pool_dilation, n)
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
                as_tuple(kernel_size, n),
                as_tuple(stride if stride is not None else self._default_stride(dev), n),
                as_tuple(padding, n),
                as_tuple(dilation, n),
                as_tuple(
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
        weight_bits: int | str | None = None,
        bias_bits: int | None = None,
        quantize_activation: bool = False,
        shift_quantile: float = 1.0,
        pooling: None = None,
        batchnorm: None = None,
    ) -> None:
        del bias_bits, quantize_activation
        activation = norm_choice(activation, ACTIVATIONS, "activation")
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
