"""A network description (the synthesizer's IR) as a PyTorch model of edgesynth.nn layers.

`from_network(net)` turns a built `Network` (YAML + checkpoint, as the synthesizer loads it)
into an `nn.Module`: every weighted layer becomes the matching edgesynth.nn layer holding the
chip's integers, element-wise operations become Add/Sub/BitwiseOr/BitwiseXor, and the data
routing (`in_sequences`, operands, `pool_first`, `in_crop`, `in_dim`, `flatten`) follows the
description. In 8-bit mode the model returns exactly what the simulator returns; in float mode
it runs the same integers at training scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn import device as device_setting
from edgesynth.nn import functional as hw
from edgesynth.nn import limits
from edgesynth.nn.eltwise import Add, BitwiseOr, BitwiseXor, Eltwise, Sub
from edgesynth.nn.layers import Conv1d, Conv2d, ConvTranspose2d, HardwareLayer, Linear
from edgesynth.targets.max7800x.yaml_model import NETWORK_INPUT, Layer, Network, load_vendor_network

_ELTWISE: dict[str, type[Eltwise]] = {
    "add": Add,
    "sub": Sub,
    "or": BitwiseOr,
    "xor": BitwiseXor,
}


@dataclass(frozen=True)
class _Route:
    """How one layer gets and shapes its data (everything but the arithmetic)."""

    index: int
    in_sequences: tuple[int, ...]
    operands: int
    pool_first: bool
    separate_pool: bool  # pooling done here (per operand), not fused into the layer
    in_crop: tuple[int, int]
    in_dim: tuple[int, int]
    is_1d: bool
    flatten: bool
    out_channels: int
    out_dim: tuple[int, int]
    operation: str
    wide: bool
    activation: str | None


def _unsupported(layer: Layer, what: str) -> EdgesynthError:
    return layer.error(f"{what} has no edgesynth.nn equivalent yet.")


def _weights(layer: Layer) -> torch.Tensor:
    assert layer.weights is not None
    w = torch.from_numpy(layer.weights.astype("float64"))
    cin = layer.in_channels * (layer.pooled_dim[0] * layer.pooled_dim[1] if layer.flatten else 1)
    if layer.operation == "linear" or layer.flatten:
        return w.reshape(layer.out_channels, cin)
    if layer.operation == "conv1d":
        return w.reshape(layer.out_channels, cin // layer.groups, layer.kernel_size[0])
    if layer.operation == "convtranspose2d":
        conv_form = w.reshape(layer.out_channels, cin // layer.groups, *layer.kernel_size)
        return torch.flip(conv_form, dims=(2, 3)).transpose(0, 1).contiguous()
    return w.reshape(layer.out_channels, cin // layer.groups, *layer.kernel_size)


def _module(layer: Layer, fused_pool: bool) -> nn.Module | None:
    if layer.operation == "none":
        return None
    if layer.spec.bypass:
        raise _unsupported(layer, "kernel bypass")
    pool: dict[str, object] = {}
    if fused_pool and layer.pool_type is not None:
        n = 1 if layer.is_1d else 2
        pool = {
            "pooling": layer.pool_type,
            "pool_size": layer.pool[:n],
            "pool_stride": layer.pool_stride[:n],
            "pool_dilation": layer.pool_dilation[:n],
        }
    common = {"bias": layer.bias is not None, "wide": layer.output_width == 32}
    cin = layer.in_channels
    if layer.operation == "linear" or layer.flatten:  # flatten makes any op a 1x1 on 1x1 data
        flat = layer.pooled_dim[0] * layer.pooled_dim[1] if layer.flatten else 1
        module: HardwareLayer = Linear(cin * flat, layer.out_channels, **common)
    elif layer.operation == "conv1d":
        module = Conv1d(
            cin,
            layer.out_channels,
            layer.kernel_size[0],
            padding=layer.pad[0],
            dilation=layer.dilation[0],
            stride=layer.stride[0],
            groups=layer.groups,
            **pool,
            **common,
        )
    elif layer.operation == "convtranspose2d":
        module = ConvTranspose2d(
            cin,
            layer.out_channels,
            layer.kernel_size,
            padding=layer.pad,
            output_padding=layer.output_padding,
            groups=layer.groups,
            dilation=layer.dilation,
            **pool,
            **common,
        )
    else:
        module = Conv2d(
            cin,
            layer.out_channels,
            layer.kernel_size,
            padding=layer.pad,
            stride=layer.stride,
            dilation=layer.dilation,
            groups=layer.groups,
            **pool,
            **common,
        )
    module.activation = layer.activation  # wide outputs keep it too, like the chip
    bias = None if layer.bias is None else torch.from_numpy(layer.bias.astype("float64"))
    module.set_integer_parameters(_weights(layer), bias, layer.output_shift, layer.quantization)
    return module


class NetworkModel(nn.Module):
    """A YAML network description run by edgesynth.nn layers (see the module docstring)."""

    def __init__(self, net: Network) -> None:
        super().__init__()
        self.order = list(net.sim_order or net.order)
        self.routes: dict[int, _Route] = {}
        self.ops = nn.ModuleDict()
        self.eltwise = nn.ModuleDict()
        self.pools: dict[int, Layer] = {}
        with limits.unchecked():  # the synthesizer's rules already checked the description
            for index in self.order:
                self._add(net.layers[index])

    def _add(self, layer: Layer) -> None:
        eltwise = layer.operands > 1
        has_pool = layer.pool_type is not None or any(s > 1 for s in layer.pool_stride)
        separate = has_pool and (
            eltwise
            or layer.operation in ("none", "linear")
            or layer.pool_dilation != (1, 1)
            or layer.pool_type is None
        )
        wide = layer.output_width == 32
        self.routes[layer.index] = _Route(
            layer.index,
            tuple(layer.in_sequences),
            layer.operands,
            layer.pool_first,
            separate,
            layer.in_crop,
            layer.in_dim,
            layer.is_1d,
            layer.flatten,
            layer.out_channels,
            layer.out_dim,
            layer.operation,
            wide,
            layer.activation,
        )
        if separate:
            self.pools[layer.index] = layer
        module = _module(layer, fused_pool=not separate)
        if module is not None:
            self.ops[str(layer.index)] = module
        if eltwise:
            wide_sum = layer.operation == "none" and wide
            self.eltwise[str(layer.index)] = _ELTWISE[layer.eltwise or "add"](wide=wide_sum)

    # --- forward -------------------------------------------------------------------------

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) or (N, C, L) input -> the last layer's output, (N, C, H, W)."""
        if x.dim() == 3:
            x = x.unsqueeze(-1)
        outputs: dict[int, torch.Tensor] = {}
        previous: int | None = None
        out = x
        for index in self.order:
            route = self.routes[index]
            data = self._gather(route, x, outputs, previous)
            out = self._run(route, data)
            out = out.reshape(out.shape[0], route.out_channels, *route.out_dim)
            outputs[index] = out
            previous = index
        return out

    def _gather(
        self,
        route: _Route,
        x: torch.Tensor,
        outputs: dict[int, torch.Tensor],
        previous: int | None,
    ) -> torch.Tensor:
        if route.in_sequences:
            parts = [x if i == NETWORK_INPUT else outputs[i] for i in route.in_sequences]
            if len(parts) == 1:
                return parts[0]
            if all(p.shape[2:] == parts[0].shape[2:] for p in parts):
                return torch.cat(parts, dim=1)
            flat = torch.cat([p.reshape(p.shape[0], p.shape[1], -1) for p in parts], dim=2)
            return flat.reshape(flat.shape[0], parts[0].shape[1], *route.in_dim)
        return x if previous is None else outputs[previous]

    def _combine(self, route: _Route, operands: list[torch.Tensor]) -> torch.Tensor:
        return self.eltwise[str(route.index)](*operands)

    def _pool(self, route: _Route, data: torch.Tensor) -> torch.Tensor:
        layer = self.pools[route.index]
        rounding = device_setting.current().avg_pool_rounding
        if layer.pool_type is None or layer.pool == (1, 1):  # pool 1: subsampling
            step = layer.pool_stride
            return data[:, :, :: step[0]] if route.is_1d else data[:, :, :: step[0], :: step[1]]
        if route.is_1d:
            size, stride = (layer.pool[0],), (layer.pool_stride[0],)
            if layer.pool_type == "avg":
                return hw.avg_pool_integer(data, size, stride, rounding=False)
            return hw.max_pool(data, size, stride, (1,))
        size, stride, dil = layer.pool, layer.pool_stride, layer.pool_dilation
        need = [
            (o - 1) * s + d * (p - 1) + 1
            for o, s, d, p in zip(layer.pooled_dim, stride, dil, size, strict=True)
        ]
        pad_h, pad_w = max(0, need[0] - data.shape[2]), max(0, need[1] - data.shape[3])
        if pad_h or pad_w:  # windows reaching past the data read zeros, as in the simulator
            data = F.pad(data, (0, pad_w, 0, pad_h))
        if layer.pool_type == "avg":
            if dil != (1, 1):
                raise EdgesynthError(
                    "dilated average pooling has no edgesynth.nn equivalent.", layer=layer.index
                )
            return hw.avg_pool_integer(data, size, stride, rounding)
        return hw.max_pool(data, size, stride, dil)

    def _run(self, route: _Route, data: torch.Tensor) -> torch.Tensor:
        n = data.shape[0]
        operands = list(torch.chunk(data, route.operands, dim=1))
        top, bottom = route.in_crop
        if top or bottom:
            operands = [o[:, :, top : o.shape[2] - bottom] for o in operands]
        if route.operands > 1 and not route.pool_first:
            operands = [self._combine(route, operands)]
        h, w = route.in_dim
        shape = (h,) if route.is_1d else (h, w)
        operands = [o.reshape(n, -1, *shape) for o in operands]
        if route.separate_pool:
            if route.is_1d and self.pools[route.index].pool[0] > 1:
                # the vendor pools only the first operand of a 1D layer
                operands = [self._pool(route, operands[0])]
            else:
                operands = [self._pool(route, o) for o in operands]
        if len(operands) > 1:
            data = self._combine(route, operands)
        else:
            data = operands[0]
        key = str(route.index)
        if key not in self.ops:
            return data
        module = self.ops[key]
        if route.flatten or route.operation == "linear":
            data = data.reshape(n, -1)
        y = module(data)
        if route.wide and route.activation:  # the chip clips 32-bit outputs it activates
            y = torch.clamp(y if route.activation == "relu" else y.abs(), 0, hw.ACT_MAX)
        return y


def from_network(net: Network) -> NetworkModel:
    """The edgesynth.nn model of a built network description (see the module docstring)."""
    model = NetworkModel(net)
    model.eval()
    return model


def model_for_network(
    network: Path, checkpoint: Path, sample_input: Path, device: str
) -> nn.Module:
    """The edgesynth.nn model of a network description + checkpoint, as the synthesizer
    loads them (any architecture, no registry entry needed)."""
    # arithmetic only: placement rules are the synthesizer's job
    return from_network(load_vendor_network(network, checkpoint, device, sample_input))
