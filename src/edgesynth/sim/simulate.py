"""Run a whole `Network` on a sample, layer by layer, exactly as the accelerator computes it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.network import NETWORK_INPUT, Layer, Network
from edgesynth.sim import ops


@dataclass(frozen=True)
class SimOptions:
    avg_pool_rounding: bool = False  # --avg-pool-rounding
    simple1b: bool = False  # --simple1b: 1-bit weights multiply as XOR
    reshape_inputs: bool = False


@dataclass
class LayerResult:
    index: int
    output: np.ndarray  # int64, (C, H, W)


def _gather(
    net: Network,
    layer: Layer,
    sample: np.ndarray,
    outputs: dict[int, np.ndarray],
    previous: int | None,
) -> np.ndarray:
    """The layer's input: its `in_sequences` concatenated along channels, or what came before."""

    def output_of(i: int) -> np.ndarray:
        if i == NETWORK_INPUT:
            return sample
        if i not in outputs:
            raise EdgesynthError(
                f"layer {layer.index} reads the output of layer {i}, which has not run yet.",
                file=net.spec.path,
                line=layer.spec.line,
            )
        return outputs[i]

    if layer.in_sequences:
        parts = [output_of(i) for i in layer.in_sequences]
        if len(parts) == 1:
            return parts[0]
        if all(p.shape[1:] == parts[0].shape[1:] for p in parts):
            return np.concatenate(parts, axis=0)
        flat = np.hstack([p.reshape(p.shape[0], -1) for p in parts])
        return flat.reshape(parts[0].shape[0], *layer.in_dim)
    return sample if previous is None else outputs[previous]


def _mismatch(layer: Layer, message: str) -> EdgesynthError:
    return EdgesynthError(
        message, line=layer.spec.line, layer=layer.index, layer_name=layer.spec.name
    )


def _eltwise(layer: Layer, operands: np.ndarray, wide: bool) -> np.ndarray:
    result = ops.eltwise(layer.eltwise or "add", list(operands))
    return result if wide else ops.clip8(result)


def _weights(layer: Layer, in_channels: int, kernel_dims: int) -> np.ndarray:
    if layer.spec.bypass:
        k = layer.kernel_size[0]
        shape = (layer.out_channels, in_channels // layer.groups, k) + (
            (k,) if kernel_dims == 2 else ()
        )
        return np.ones(shape, dtype=np.int64)
    assert layer.weights is not None
    shape = (layer.out_channels, in_channels // layer.groups) + (
        layer.kernel_size if kernel_dims == 2 else (layer.kernel_size[0],)
    )
    return layer.weights.reshape(shape)


def _run_layer(layer: Layer, data: np.ndarray, opts: SimOptions) -> np.ndarray:
    operands = (
        np.array(np.split(data, layer.operands, axis=0)) if layer.operands > 1 else data[None]
    )
    in_channels = layer.in_channels
    if opts.reshape_inputs:
        skip = int(layer.spec.extra.get("in_channel_skip", 0) or 0)
        operands = operands[:, skip:][:, :in_channels]
    top, bottom = layer.in_crop
    if top or bottom:
        operands = operands[:, :, top : operands.shape[2] - bottom]

    if layer.operands > 1 and not layer.pool_first:
        wide = layer.operation == "none" and layer.output_width == 32
        operands = _eltwise(layer, operands, wide)[None]

    height, width = layer.in_dim
    per_channel = height if layer.is_1d else height * width
    if operands[0].size % per_channel:
        raise _mismatch(
            layer,
            f"its input holds {operands[0].size} values per operand, which is not a whole "
            f"number of {height}x{width} channels (check `in_dim`, `in_crop` and the sample)",
        )
    if layer.is_1d:
        operands = operands.reshape(operands.shape[0], -1, height)
    else:
        operands = operands.reshape(operands.shape[0], -1, height, width)

    average = layer.pool_type == "avg"
    if layer.is_1d:
        if layer.pool[0] > 1:
            # The vendor pools only the first operand of a 1D layer.
            operands = ops.pool1d(
                operands[0],
                layer.pool[0],
                layer.pool_stride[0],
                average_pool=average,
                dilation=layer.pool_dilation[0],
            )[None]
        else:
            operands = operands[:, :, :: layer.pool_stride[0]]
    else:
        operands = np.array(
            [
                ops.pool2d(
                    o,
                    layer.pool,
                    layer.pool_stride,
                    average_pool=average,
                    dilation=layer.pool_dilation,
                    rounding=opts.avg_pool_rounding,
                )
                for o in operands
            ]
        )

    if layer.operands > 1 and layer.pool_first:
        wide = layer.operation == "none" and layer.output_width == 32
        data = _eltwise(layer, operands, wide)
    else:
        data = operands[0]

    if layer.operation == "none":
        return data

    expected = layer.in_channels * (
        layer.pooled_dim[0] * layer.pooled_dim[1] if layer.flatten else 1
    )
    if (data.size if layer.flatten else data.shape[0]) != expected:
        found = data.size if layer.flatten else data.shape[0]
        raise _mismatch(
            layer,
            f"its weights expect {expected} input channels but {found} arrive "
            f"(input {'x'.join(map(str, data.shape))}); check the sample, `in_channels`, "
            "`in_sequences` and that the checkpoint belongs to this network",
        )
    bias = None if layer.bias is None else layer.bias.astype(np.int64) * 128
    if layer.operation in ("conv2d", "linear"):
        if layer.flatten:
            in_channels = data.size
            data = data.reshape(in_channels, 1, 1)
        acc = ops.conv2d(
            data,
            _weights(layer, in_channels, 2),
            bias,
            stride=layer.stride,
            pad=layer.pad,
            dilation=layer.dilation,
            groups=layer.groups,
        )
    elif layer.operation == "convtranspose2d":
        acc = ops.conv_transpose2d(
            data,
            _weights(layer, in_channels, 2),
            bias,
            stride=layer.stride,
            pad=layer.pad,
            output_padding=layer.output_padding,
            dilation=layer.dilation,
            groups=layer.groups,
        )
    else:  # conv1d
        acc = ops.conv1d(
            data,
            _weights(layer, layer.in_channels, 1),
            bias,
            stride=layer.stride[0],
            pad=layer.pad[0],
            dilation=layer.dilation[0],
            groups=layer.groups,
        )[:, :, None]
    out = acc if layer.output_width == 32 else ops.requantize(acc, layer.output_shift)
    return ops.activate(out, layer.activation)


def simulate(net: Network, sample: np.ndarray, opts: SimOptions | None = None) -> list[LayerResult]:
    """Every executed layer's output, in execution order. The last one is the network output."""
    opts = opts or SimOptions()
    sample = np.asarray(sample, dtype=np.int64)
    if sample.ndim < 3:
        sample = sample[..., None]
    outputs: dict[int, np.ndarray] = {}
    results: list[LayerResult] = []
    previous: int | None = None
    for index in net.sim_order or net.order:
        layer = net.layers[index]
        data = _gather(net, layer, sample, outputs, previous)
        try:
            out = _run_layer(layer, data, opts)
        except EdgesynthError as err:
            err.file = err.file or net.spec.path
            raise
        out = out.reshape(layer.out_channels, *layer.out_dim)
        outputs[index] = out
        results.append(LayerResult(index, out))
        previous = index
    return results
