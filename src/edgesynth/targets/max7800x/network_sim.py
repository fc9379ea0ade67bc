"""Run a whole vendor `Network` on a sample, layer by layer, exactly as the vendor's
known-answer simulation computes it (`SimOptions` carries the izer options that change the
numbers). The operators themselves are `edgesynth.sim.ops`, the one reference arithmetic.

One layer: gather the input (`in_sequences` concatenated, or the data buffer), split it into
operands, drop channels (--reshape-inputs), element-wise first (`pool_first: false`), crop rows
(`in_crop`), reshape to `in_dim` (1D <-> 2D, W/L changes), pool, element-wise, then the
operation, then the data-buffer shift/insert. The vendor passes layer outputs along in a list
indexed by the *next* layer to run, so `in_sequences: [i]` reads whatever was handed to layer
i + 1; that is what decides the data when `next_sequence`/`simulated_sequence` jump
(`compat.handover`).
"""

from __future__ import annotations

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.sim import ops
from edgesynth.targets.max7800x.compat import operands as compat_operands
from edgesynth.targets.max7800x.compat.handover import HandOver
from edgesynth.targets.max7800x.compat.pooling import vendor_pool1d
from edgesynth.targets.max7800x.description.network import Layer, Network

DATA_BUFFER = (
    -2
)  # as in targets.max7800x.description.assemble: `in_sequences` naming the data buffer


@dataclass(frozen=True)
class SimOptions:
    """What changes the known-answer arithmetic (fields named after the vendor's options)."""

    avg_pool_rounding: bool = False  # --avg-pool-rounding (2D average pooling only)
    # --simple1b only sets a control-register bit; the vendor's simulation ignores it.
    simple1b: bool = False
    reshape_inputs: bool = False  # --reshape-inputs: drop input channels (`in_channel_skip`)
    # --legacy-test: operands of element-wise layers after the first interleave by column.
    legacy_test: bool = False


@dataclass
class LayerResult:
    """One layer's simulated output."""

    index: int
    output: np.ndarray  # int64, (C, H, W); a `buffer_shift` layer's is (L, C, W)


@dataclass
class SynthesisResult:
    """A synthesized network, its sample and every layer's simulated output."""

    network: Network
    sample: np.ndarray
    layers: list[LayerResult]

    @property
    def output(self) -> np.ndarray:
        """The known-answer output: the final layer's data, C x H x W."""
        return self.layers[-1].output


def _mismatch(layer: Layer, message: str) -> EdgesynthError:
    return layer.error(message)


class _Buffers:
    """The data a layer reads: the vendor's hand-over list (compat.handover) and the data
    buffer of `buffer_shift`/`buffer_insert` layers."""

    def __init__(self, net: Network, sample: np.ndarray, start: int) -> None:
        self.net = net
        self.handover = HandOver(sample, start)
        self.data_buffer: np.ndarray | None = None
        if net.spec.data_buffer:
            buffer = net.spec.data_buffer[0]
            dim = buffer.dim if isinstance(buffer.dim, tuple) else (buffer.dim, 1)
            # The vendor's buffer is (length, channels, width), newest entry last.
            self.data_buffer = np.zeros((dim[0], buffer.channels, dim[1]), dtype=np.int64)

    def gather(self, layer: Layer) -> np.ndarray:
        sources = layer.in_sequences
        if not sources:
            return self.handover.own_input(layer)
        if sources == [DATA_BUFFER]:
            assert self.data_buffer is not None
            return self.data_buffer
        parts = [self.handover.output_of(layer, i) for i in sources]
        if len(parts) == 1:
            return parts[0]
        if all(p.shape[1:] == parts[0].shape[1:] for p in parts):
            return np.concatenate(parts, axis=0)
        flat = np.hstack([p.reshape(p.shape[0], -1) for p in parts])
        try:
            return flat.reshape(parts[0].shape[0], *layer.in_dim)
        except ValueError:
            raise _mismatch(
                layer,
                "cannot concatenate the `in_sequences` outputs ("
                + ", ".join("x".join(map(str, p.shape)) for p in parts)
                + f") into {parts[0].shape[0]} channels of {layer.in_dim[0]}x{layer.in_dim[1]}",
            ) from None


def _eltwise(layer: Layer, operands: np.ndarray) -> np.ndarray:
    result = ops.eltwise(layer.eltwise or "add", list(operands))
    # A passthrough may keep the wide sum (32-bit output); otherwise it is clipped to 8 bits.
    wide = layer.operation == "none" and layer.output_width == 32
    return result if wide else ops.clip8(result)


def _split(layer: Layer, data: np.ndarray, interleaved: bool) -> np.ndarray:
    if layer.operands == 1:
        return data[None]
    if interleaved:
        split = compat_operands.legacy_test_operands(data, layer.operands)
        if split is None:
            raise _mismatch(
                layer,
                f"--legacy-test: its {data.shape[2]} columns cannot be split into "
                f"{layer.operands} interleaved operands",
            )
        return split
    if data.shape[0] % layer.operands:
        raise _mismatch(
            layer,
            f"its {data.shape[0]} input channels cannot be split into {layer.operands} "
            "equal operands",
        )
    return np.array(np.split(data, layer.operands, axis=0))


def _reshape(layer: Layer, operands: np.ndarray) -> np.ndarray:
    """Crop rows (`in_crop`) and view the data as `in_dim` (1D <-> 2D, W/L changes)."""
    top, bottom = layer.in_crop
    if top or bottom:
        operands = operands[:, :, top : operands.shape[2] - bottom]
    if layer.buffer_shift:
        return operands  # the buffer is shifted as it is: (length, channels, width)
    height, width = layer.in_dim
    if layer.is_1d and layer.in_sequences == [DATA_BUFFER]:
        operands = operands.transpose(0, 2, 3, 1)
    per_channel = height * width
    if operands[0].size % per_channel:
        raise _mismatch(
            layer,
            f"its input holds {operands[0].size} values per operand, which is not a whole "
            f"number of {height}x{width} channels (check `in_dim`, `in_crop` and the sample)",
        )
    if layer.is_1d:
        if width != 1:
            raise _mismatch(layer, f"a Conv1d input must be 1D, not {height}x{width}")
        return operands.reshape(operands.shape[0], -1, height)
    return operands.reshape(operands.shape[0], -1, height, width)


def _pool(layer: Layer, operands: np.ndarray, opts: SimOptions) -> np.ndarray:
    average = layer.pool_type == "avg"
    if layer.is_1d:
        if layer.pool[0] > 1:
            # The vendor pools only the first operand of a Conv1d layer.
            return vendor_pool1d(
                operands[0],
                layer.pool[0],
                layer.pool_stride[0],
                average_pool=average,
                dilation=layer.pool_dilation[0],
            )[None]
        return operands[:, :, :: layer.pool_stride[0]]
    if layer.pool == (1, 1):
        return operands[:, :, :: layer.pool_stride[0], :: layer.pool_stride[1]]
    return np.array(
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


def _check_pooled(layer: Layer, pooled: np.ndarray) -> None:
    if layer.buffer_shift:
        return
    expected = (layer.in_channels, layer.pooled_dim[0]) + (
        () if layer.is_1d else (layer.pooled_dim[1],)
    )
    if pooled.shape[1:] != expected:
        raise _mismatch(
            layer,
            f"input dimensions do not match: expected {'x'.join(map(str, expected))}, got "
            f"{'x'.join(map(str, pooled.shape[1:]))} (check the sample, `in_channels`, "
            "`in_dim`, `in_sequences` and that the weights belong to this network)",
        )


def _kernels(layer: Layer, in_channels: int) -> np.ndarray:
    """The layer's kernels as (out, in/groups, kh, kw) or (out, in/groups, k)."""
    kh, kw = layer.kernel_size
    if layer.spec.bypass:
        if layer.is_1d:
            if layer.groups > 1:
                raise _mismatch(
                    layer,
                    "a Conv1d `bypass` layer with `groups` makes the vendor tool fail (its "
                    "kernel of ones grows with the groups)",
                )
            return np.ones((layer.out_channels, in_channels, kh), dtype=np.int64)
        return np.ones((layer.out_channels, in_channels // layer.groups, kh, kh), dtype=np.int64)
    assert layer.weights is not None
    shape = (layer.out_channels, in_channels // layer.groups) + ((kh,) if layer.is_1d else (kh, kw))
    if layer.weights.size != int(np.prod(shape)):
        raise _mismatch(
            layer,
            f"its {layer.weights.size} weights do not make {layer.out_channels} output x "
            f"{in_channels // layer.groups} input channels of "
            f"{kh if layer.is_1d else f'{kh}x{kw}'} kernels (check `in_channels`, "
            "`out_channels`, `groups` and `weight_source`)",
        )
    return layer.weights.reshape(shape)


def _operate(layer: Layer, data: np.ndarray) -> np.ndarray:
    """Convolution (or passthrough), requantization and activation."""
    if layer.operation == "none":
        return data
    in_channels = layer.in_channels
    bias = None if layer.bias is None else layer.bias.astype(np.int64) * 128
    if bias is not None and bias.shape[0] < layer.out_channels:
        raise _mismatch(
            layer,
            f"it has {layer.out_channels} output channels but only {bias.shape[0]} bias values",
        )
    if bias is not None:
        bias = bias[: layer.out_channels]
    if layer.operation in ("conv2d", "linear"):
        if layer.flatten:
            in_channels = layer.in_channels * layer.pooled_dim[0] * layer.pooled_dim[1]
            data = data.reshape(in_channels, 1, 1)
        acc = ops.conv2d(
            data,
            _kernels(layer, in_channels),
            bias,
            stride=layer.stride,
            pad=layer.pad,
            dilation=layer.dilation,
            groups=layer.groups,
        )
    elif layer.operation == "convtranspose2d":
        acc = ops.conv_transpose2d(
            data,
            _kernels(layer, in_channels),
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
            _kernels(layer, in_channels),
            bias,
            stride=layer.stride[0],
            pad=layer.pad[0],
            dilation=layer.dilation[0],
            groups=layer.groups,
        )[:, :, None]
    out = acc if layer.output_width == 32 else ops.requantize(acc, layer.output_shift)
    return ops.activate(out, layer.activation)


def _update_buffer(layer: Layer, out: np.ndarray, buffers: _Buffers) -> np.ndarray:
    """`buffer_shift: n` drops the n oldest buffer entries (the layer's own output shifts
    the same way); `buffer_insert: n` writes the layer's output into the n newest."""
    if layer.buffer_shift:
        n = layer.buffer_shift
        assert buffers.data_buffer is not None
        buffers.data_buffer = np.roll(buffers.data_buffer, -n, axis=0)
        buffers.data_buffer[-n:] = 0
        out = np.roll(out, -n, axis=0)
        out[-n:] = 0
    if layer.buffer_insert:
        n = layer.buffer_insert
        buffer = buffers.data_buffer
        assert buffer is not None
        try:
            buffer[-n:] = out.transpose(1, 2, 0).reshape(1, buffer.shape[1], -1)
        except ValueError:
            raise _mismatch(
                layer,
                f"its {'x'.join(map(str, out.shape))} output does not fit the data buffer "
                f"({buffer.shape[1]} channels of {buffer.shape[2]}); check the buffer's `dim` "
                "and `channels`",
            ) from None
    return out


def _expected_shape(layer: Layer, out: np.ndarray) -> tuple[int, ...]:
    if layer.buffer_shift:
        # The shifted buffer is (length, channels, width): `in_dim` plus the shift.
        return (layer.out_dim[0] + layer.buffer_shift, layer.out_channels, layer.out_dim[1])
    return (layer.out_channels, *layer.out_dim)


def _run_layer(
    layer: Layer, data: np.ndarray, opts: SimOptions, buffers: _Buffers, first: bool
) -> np.ndarray:
    operands = _split(layer, data, interleaved=opts.legacy_test and not first)
    if opts.reshape_inputs:
        skip = layer.spec.in_channel_skip or 0
        operands = operands[:, skip:][:, : layer.in_channels]
    if layer.operands > 1 and not layer.pool_first:
        operands = _eltwise(layer, operands)[None]
    operands = _pool(layer, _reshape(layer, operands), opts)
    _check_pooled(layer, operands)
    if layer.operands > 1 and layer.pool_first:
        if operands.shape[0] != layer.operands:
            raise _mismatch(layer, "element-wise operations cannot be combined with Conv1d")
        data = _eltwise(layer, operands)
    else:
        data = operands[0]
    out = _update_buffer(layer, _operate(layer, data), buffers)
    expected = _expected_shape(layer, out)
    if out.shape != expected:
        raise _mismatch(
            layer,
            f"its output is {'x'.join(map(str, out.shape))}, but "
            f"{'x'.join(map(str, expected))} was configured",
        )
    return out


def simulate(net: Network, sample: np.ndarray, opts: SimOptions | None = None) -> list[LayerResult]:
    """Every executed layer's output, in execution order. The last one is the known answer."""
    opts = opts or SimOptions()
    sample = np.asarray(sample, dtype=np.int64)
    if sample.ndim < 3:
        sample = sample[..., None]
    order = net.sim_order or net.order
    buffers = _Buffers(net, sample, order[0])
    results: list[LayerResult] = []
    for position, index in enumerate(order):
        layer = net.layers[index]
        try:
            out = _run_layer(layer, buffers.gather(layer), opts, buffers, position == 0)
        except EdgesynthError as err:
            err.file = err.file or net.spec.path
            raise
        results.append(LayerResult(index, out))
        if position + 1 < len(order):
            buffers.handover.hand(order[position + 1], out)
    return results
