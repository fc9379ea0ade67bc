"""Each layer as the hardware runs it: passes, processor maps, and the kernel as stored.

The network's layers say what is computed. The hardware computes some of them differently:
a streamed 1x1 convolution runs on 3x3 hardware, a dilated Conv1d runs with a stretched kernel or
folded onto 3x3 Conv2d hardware, ConvTranspose2d pads the other way round. `HwLayer` holds both
views, every derived count the registers and memories need (input/output passes, processors per
pass, TRAM rows), and the layer's vendor-format kernel (rows of one output x input channel).
"""

from __future__ import annotations

import numpy as np

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.compat.sequence import stopped_layer_output_map
from edgesynth.targets.max7800x.description.network import Layer, Network
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.options import RuleOptions
from edgesynth.targets.max7800x.rules.sizes import ffs, fls, popcount

Pair = tuple[int, int]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def passes_and_threshold(channels: int, max_proc: int, shared: int = 4) -> tuple[int, int]:
    """(passes, processors per pass) for `channels` channels on `max_proc` processors."""
    expand = max(1, ceil_div(channels, max_proc))
    threshold = ceil_div(channels, expand)
    if channels > max_proc:
        threshold = min(ceil_div(threshold, shared) * shared, max_proc)
    return expand, threshold


@dataclass
class HwLayer:
    """One layer as the accelerator is configured to run it."""

    index: int
    layer: Layer
    operator: str  # as configured: conv1d | conv2d | convtranspose2d | linear | none
    hw_operator: str  # as the hardware runs it
    input_chan: int
    output_chan: int
    input_dim: Pair
    pooled_dim: Pair
    output_dim: Pair
    hw_input_dim: Pair
    hw_pooled_dim: Pair
    hw_output_dim: Pair
    kernel_size: Pair  # after the 1x1 streaming emulation
    hw_kernel_size: Pair
    padding: Pair
    hw_padding: Pair
    hw_dilation: Pair
    in_expand: int
    in_expand_thresh: int
    in_expand_invol: int
    out_expand: int
    out_expand_thresh: int
    tcalc: bool
    calcx4: bool
    rd_ahead: bool
    processor_map: int
    output_processor_map: int
    in_offset: int
    out_offset: int
    quantization: int  # weight bits, -1 for binary (+1/-1) weights
    out_pad: int = 0  # extra output pixels (dilated Conv1d folded onto 3x3)
    out_ignore: int = 0  # bytes written before out_offset (same)
    tram_max: int = 0
    kernel: np.ndarray | None = None  # vendor layout: (rows, kh, kw) or (rows, k)
    prev: int = -1  # the layer executed before this one
    emulate_eltwise: bool = False
    broadcast: bool = False
    avgpool_reset: bool = False
    hw_add: int = 0  # hidden layers inserted before (and including) this one
    timeslots: int = 1
    kernel_source: int = -1  # the layer whose identical kernels this layer shares (itself)
    bias_source: int = -1  # the layer whose identical bias values this layer shares (itself)

    # Layer settings used by registers and memories, under the vendor's names.
    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def eltwise(self) -> str | None:
        return self.layer.eltwise

    @property
    def operands(self) -> int:
        return self.layer.operands

    @property
    def big_data(self) -> bool:
        return self.layer.data_format == "CHW"

    @property
    def streaming(self) -> bool:
        return self.layer.streaming

    @property
    def flatten(self) -> bool:
        return self.layer.flatten

    @property
    def groups(self) -> int:
        return self.layer.groups

    @property
    def bypass(self) -> bool:
        return bool(self.layer.spec.bypass)

    @property
    def pool(self) -> Pair:
        return self.layer.pool

    @property
    def pool_stride(self) -> Pair:
        return self.layer.pool_stride

    @property
    def pool_dilation(self) -> Pair:
        return self.layer.pool_dilation

    @property
    def pooling(self) -> bool:
        return self.pool[0] > 1 or self.pool[1] > 1

    @property
    def pool_average(self) -> bool:
        return self.layer.pool_type == "avg"

    @property
    def stride(self) -> Pair:
        return self.layer.stride

    @property
    def dilation(self) -> Pair:
        return self.layer.dilation

    @property
    def activation(self) -> str | None:
        return self.layer.activation

    @property
    def output_shift(self) -> int:
        return self.layer.output_shift

    @property
    def output_width(self) -> int:
        return self.layer.output_width

    @property
    def write_gap(self) -> int:
        return self.layer.write_gap

    @property
    def input_skip(self) -> int:
        return self.layer.read_gap

    @property
    def bits(self) -> int:
        return abs(self.quantization)

    @property
    def has_kernel(self) -> bool:
        return self.hw_operator != "none"

    @property
    def bias(self) -> np.ndarray | None:
        return self.layer.bias


def _vendor_quantization(layer: Layer) -> int:
    if layer.operation == "none" or layer.spec.bypass:
        configured = layer.spec.quantization  # the vendor's default here is 0 (no weights)
        if configured is None:
            return 0
        return -1 if configured == "binary" else int(configured)
    if layer.binary:
        return -1
    return layer.quantization


def _vendor_kernel(layer: Layer, kernel: Pair) -> np.ndarray | None:
    """The weights as the vendor stores them: one row per (output, input) channel pair."""
    if layer.weights is None or layer.operation == "none" or layer.spec.bypass:
        return None
    w = np.asarray(layer.weights, dtype=np.int64)
    if layer.operation == "conv1d":
        return w.reshape(-1, w.shape[-1])
    if layer.operation == "linear":
        return w.reshape(-1, 1, 1)
    return w.reshape(-1, kernel[0], kernel[1])


def build_hw_layers(
    net: Network,
    chip: Chip,
    options: RuleOptions,
    stop_index: int | None = None,
    deduplicate: bool = True,
) -> list[HwLayer]:
    """The executed layers, in index order (the order the registers are written)."""
    ctx = Context(net, chip.device, options)
    # layers the sequence jumps over are not configured
    hw = [_hw_layer(ctx, chip, index, stop_index) for index in sorted(ctx.order)]
    _mark_modes(hw, chip, ctx)
    _share_duplicates(hw, deduplicate)
    return hw


@dataclass
class _Geometry:
    """A layer's window as the hardware runs it, and its kernel as stored."""

    operator: str
    kernel_size: Pair  # the layer's (3x3 for a streamed 1x1)
    padding: Pair  # the layer's (1 for a streamed 1x1)
    hw_kernel_size: tuple[int, ...]
    hw_padding: tuple[int, ...]
    hw_dilation: tuple[int, ...]
    hw_in: tuple[int, ...]
    hw_pooled: tuple[int, ...]
    hw_out: tuple[int, ...]
    weights: np.ndarray | None
    out_pad: int = 0  # outputs the folded Conv1d computes beyond the layer's
    out_ignore: int = 0  # leading outputs it discards


def _hw_layer(ctx: Context, chip: Chip, index: int, stop_index: int | None) -> HwLayer:
    net, device = ctx.net, chip.device
    layer = net.layers[index]
    prev = ctx.previous.get(index, -1)
    in_expand, in_thresh = passes_and_threshold(layer.in_channels, chip.max_proc)
    out_expand, out_thresh = passes_and_threshold(layer.out_channels, chip.max_proc)
    rd_ahead = ctx.read_ahead(layer)
    tcalc = layer.spec.tcalc if layer.spec.tcalc is not None else rd_ahead and in_expand > 1
    geo = _geometry(layer)
    if _streamed_1x1(net, device, index, prev, geo):
        _run_1x1_on_3x3(geo)
    if layer.dilation[0] > 1 and layer.operation == "conv1d":
        _dilate_conv1d(geo, layer, device, out_expand)
    tram_max = _tram_max(geo, layer)
    output_map = stopped_layer_output_map(net, layer, stop_index)
    if output_map is None:
        output_map = ctx.output_map(layer) or 0
    return HwLayer(
        index=index,
        layer=layer,
        operator=layer.operation,
        hw_operator=geo.operator,
        input_chan=layer.in_channels,
        output_chan=layer.out_channels,
        input_dim=tuple(layer.in_dim),
        pooled_dim=tuple(layer.pooled_dim),
        output_dim=tuple(layer.out_dim),
        hw_input_dim=geo.hw_in,
        hw_pooled_dim=geo.hw_pooled,
        hw_output_dim=geo.hw_out,
        kernel_size=geo.kernel_size,
        hw_kernel_size=geo.hw_kernel_size,
        padding=geo.padding,
        hw_padding=geo.hw_padding,
        hw_dilation=geo.hw_dilation,
        in_expand=in_expand,
        in_expand_thresh=in_thresh,
        in_expand_invol=(in_expand + 3) & ~3 if tcalc else in_expand,
        out_expand=out_expand,
        out_expand_thresh=out_thresh,
        tcalc=bool(tcalc),
        calcx4=ctx.calcx4(layer),
        rd_ahead=rd_ahead,
        processor_map=layer.processors or 0,
        output_processor_map=output_map,
        in_offset=ctx.in_offset(layer) or 0,
        out_offset=layer.out_offset or 0,
        quantization=_vendor_quantization(layer),
        out_pad=geo.out_pad,
        out_ignore=geo.out_ignore,
        tram_max=tram_max,
        kernel=geo.weights,
        prev=prev,
    )


def _geometry(layer: Layer) -> _Geometry:
    """The layer's own window: what the hardware runs unless a rule below changes it."""
    kernel = tuple(layer.kernel_size)
    pooled = tuple(layer.pooled_dim)
    return _Geometry(
        operator=layer.operation,
        kernel_size=kernel,  # type: ignore[arg-type]
        padding=tuple(layer.pad),  # type: ignore[arg-type]
        hw_kernel_size=kernel,
        hw_padding=tuple(layer.pad),
        hw_dilation=tuple(layer.dilation),
        hw_in=tuple(layer.in_dim),
        hw_pooled=pooled,
        hw_out=tuple(layer.out_dim),
        weights=_vendor_kernel(layer, kernel),  # type: ignore[arg-type]
    )


def _streamed_1x1(net: Network, device: Device, index: int, prev: int, geo: _Geometry) -> bool:
    """A 1x1 convolution among the first streaming layers that streams or reads a streamed
    layer's output (on devices that run it on the 3x3 hardware)."""
    layer = net.layers[index]
    prev_streams = prev >= 0 and net.layers[prev].streaming
    return (
        device.emulates_1x1_streaming
        and index <= device.max_stream_layers
        and geo.kernel_size == (1, 1)
        and layer.operation in ("conv2d", "convtranspose2d")
        and (layer.streaming or prev_streams)
    )


def _run_1x1_on_3x3(geo: _Geometry) -> None:
    """A streamed 1x1 convolution runs on the 3x3 hardware (first streaming layers only): its
    weight in the centre, padding 1."""
    if geo.weights is not None:
        w33 = np.zeros((geo.weights.shape[0], 3, 3), dtype=np.int64)
        w33[:, 1, 1] = geo.weights[:, 0, 0]
        geo.weights = w33
    geo.kernel_size = geo.hw_kernel_size = (3, 3)
    geo.padding = geo.hw_padding = (1, 1)


def _dilate_conv1d(geo: _Geometry, layer: Layer, device: Device, out_expand: int) -> None:
    """A dilated Conv1d: its kernel stretched with zeros when the span fits the hardware;
    otherwise folded onto 3x3 Conv2d hardware, `d` columns wide."""
    k, d = geo.kernel_size[0], layer.dilation[0]
    if (k - 1) * d < device.max_dilated_1d_span:
        if geo.weights is not None:  # stretch: 0 1 2 -> 0 x x 1 x x 2
            zeros = [s for s in range(1, k) for _ in range(d - 1)]
            geo.weights = np.insert(geo.weights, zeros, 0, axis=1)
        geo.hw_kernel_size = ((k - 1) * d + 1, 1)
        return
    in_dim, out_dim = tuple(layer.in_dim), tuple(layer.out_dim)
    geo.operator = "conv2d"
    geo.hw_in = (ceil_div(in_dim[0], d), d)
    geo.hw_pooled = geo.hw_out = geo.hw_in
    geo.hw_padding = (1, 1)
    geo.hw_kernel_size = (3, 3)
    geo.hw_dilation = (1, 1)
    geo.out_pad = geo.hw_in[0] * geo.hw_in[1] - out_dim[0]
    if geo.weights is not None:
        w = geo.weights.reshape(layer.out_channels, -1, k, 1)
        w = np.insert(w, [0, 1], 0, axis=3)
        if k == 2:
            w = np.insert(w, 0, 0, axis=2)
        elif k == 1:
            w = np.insert(w, [0, 1], 0, axis=2)
        geo.weights = w.reshape(-1, 3, 3)
    if k == 3:
        geo.out_ignore = 4 * d * out_expand


def _tram_max(geo: _Geometry, layer: Layer) -> int:
    """TRAM columns the layer uses; a ConvTranspose2d's padding turns the other way round
    first (set in `geo`)."""
    if geo.operator == "none":
        return 1
    ks, pad = geo.hw_kernel_size, geo.hw_padding
    if geo.operator == "convtranspose2d":
        pad = geo.hw_padding = (
            geo.hw_dilation[0] * (ks[0] - 1) - pad[0],
            geo.hw_dilation[1] * (ks[1] - 1) - pad[1],
        )
        span = (geo.hw_pooled[1] - 1) * layer.stride[1] + 1 + layer.output_padding[1]
        return max(0, span + 2 * pad[1] - ks[1]) + 1
    return max(0, geo.hw_pooled[1] + 2 * pad[1] - ks[1]) + 1


def _share_duplicates(hw: list[HwLayer], enabled: bool) -> None:
    """Layers with identical kernels (same shape, weight bits and processors) share one copy
    in kernel memory; layers with identical bias values share bias memory."""
    for i, h in enumerate(hw):
        h.kernel_source = h.index
        h.bias_source = h.index
        if not enabled:
            continue
        for other in hw[:i]:
            if other.kernel_source != other.index or h.kernel is None or other.kernel is None:
                continue
            if (
                h.kernel.shape == other.kernel.shape
                and h.quantization == other.quantization
                and h.processor_map == other.processor_map
                and np.array_equal(h.kernel, other.kernel)
            ):
                h.kernel_source = other.index
                break
        for other in hw[:i]:
            if other.bias_source != other.index or h.bias is None or other.bias is None:
                continue
            if h.bias.shape == other.bias.shape and np.array_equal(h.bias, other.bias):
                h.bias_source = other.index
                break


def needs_avgpool_reset(device: Device, previous: Layer, layer: Layer) -> bool:
    """The device inserts a hidden layer before `layer` (average pooling right after an
    element-wise layer), so later hardware layer numbers are one higher."""
    return (
        device.requires_avgpool_reset_after_eltwise
        and layer.index > 0
        and previous.operands > 1
        and layer.pool_type == "avg"
    )


def hardware_numbers(net: Network, device: Device) -> dict[int, int]:
    """Layer index -> the number the registers give it (hidden layers counted)."""
    result, hidden, previous = {}, 0, None
    for index in net.order:
        layer = net.layers[index]
        if previous is not None and needs_avgpool_reset(device, previous, layer):
            hidden += 1
        result[index] = index + hidden
        previous = layer
    return result


def _mark_modes(hw: list[HwLayer], chip: Chip, ctx: Context) -> None:
    """Element-wise emulation, depthwise broadcast, hidden avg-pool reset layers, time slots."""
    hidden = 0
    by_index = {h.index: h for h in hw}
    for h in hw:
        if (
            chip.device.emulates_multipass_eltwise
            and h.operands > 1
            and h.in_expand > 1
            and h.operands * h.in_expand != h.operands + h.in_expand
        ):
            h.emulate_eltwise = True
        if h.groups > 1 and h.processor_map == h.output_processor_map:
            h.broadcast = True
        prev = by_index.get(h.prev)
        if prev is not None and needs_avgpool_reset(chip.device, prev.layer, h.layer):
            h.avgpool_reset = True
            hidden += 1
        h.hw_add = hidden
        h.timeslots = _timeslots(h, chip)


def passthrough_slot_index(count: int, output_width: int) -> int:
    """The last output time slot a passthrough layer needs for `count` channels in a quadrant:
    one slot per 32-bit word the quadrant writes."""
    return (count * output_width // 8 - 1) // 4


def _timeslots(h: HwLayer, chip: Chip) -> int:
    """Output time slots per pixel: passthrough and depthwise layers move data by slots."""
    tscnt = 0
    for group in range(chip.groups):
        bits = chip.group_bits(h.processor_map, group)
        count = popcount(bits)
        if h.hw_operator == "none":
            if count:
                tscnt = max(tscnt, passthrough_slot_index(count, h.output_width))
        elif h.groups > 1:
            if h.broadcast:
                tscnt = max(tscnt, (min(count - 1, 3) + 1) * (h.output_width // 8) - 1)
            else:
                tscnt = max(tscnt, (count * h.output_width + 7) // 8 - 1)
    slots = tscnt + 1
    if h.flatten:
        slots *= h.hw_pooled_dim[0] * h.hw_pooled_dim[1]
    return slots


def tscnt_max(h: HwLayer) -> int:
    slots = h.timeslots
    if h.flatten:
        slots //= h.hw_pooled_dim[0] * h.hw_pooled_dim[1]
    return slots - 1


__all__ = [
    "HwLayer",
    "build_hw_layers",
    "ceil_div",
    "ffs",
    "fls",
    "passes_and_threshold",
    "popcount",
    "tscnt_max",
]
