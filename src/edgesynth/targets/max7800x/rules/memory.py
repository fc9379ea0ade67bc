"""Data memory (offsets, sizes, read modes), quadrants, kernel memory and bias memory."""

from __future__ import annotations

from collections.abc import Iterator

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.description.spec import LayerSpec
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.hw_geometry import (
    hw_kernel,
)
from edgesynth.targets.max7800x.rules.sizes import (
    bias_bytes,
    ceil_div,
    hw_input_dim,
    input_bytes,
    input_passes,
    kernel_words,
    output_bytes,
    output_passes,
    output_pixels,
)
from edgesynth.targets.max7800x.rules.text import dims, hex16, layer_name, offset_message


def bad_offsets(layer: Layer | LayerSpec, device: Device) -> Iterator[tuple[str, int]]:
    """(YAML key, value) of the layer's `out_offset`/`in_offset` outside the data memory."""
    for key in ("out_offset", "in_offset"):
        value = getattr(layer, key)
        if value is not None and not 0 <= value < device.max_out_offset:
            yield key, value


def offset_ranges(ctx: Context) -> Iterator[EdgesynthError]:
    for layer in ctx.net.layers:
        for key, value in bad_offsets(layer, ctx.device):
            yield ctx.error(layer, key, offset_message(value, ctx.device))


def _fits_instance(ctx: Context, start: int, size: int) -> bool:
    return start + size <= ctx.device.instance_bytes


def input_memory(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    offset = ctx.in_offset(layer)
    if layer.streaming or offset is None:
        return
    size = input_bytes(layer, ctx.max_proc)
    if _fits_instance(ctx, offset, size):
        return
    instance = ctx.device.instance_bytes
    chw = layer.data_format == "CHW"
    packing = "CHW, one channel per memory instance" if chw else "HWC, 4 channels per 32-bit word"
    p = input_passes(layer, ctx.max_proc)
    extra = (f" x {p} passes" if p > 1 else "") + (
        f" x {layer.operands} operands" if layer.operands > 1 else ""
    )
    room = instance - size
    fix = (
        f"lower `in_offset` to at most {hex16(room)}"
        if room >= 0
        else "the input alone is too large: reduce its size (pool, fold into channels) or use "
        "`streaming`"
    )
    yield ctx.error(
        layer,
        "in_offset",
        f"the {dims(layer.in_dim, layer)} input ({packing}{extra}) takes {size:,} bytes "
        f"({ceil_div(size, 4):,} words) per memory instance; from `in_offset` {hex16(offset)} it "
        f"ends at {hex16(offset + size)}, past the {instance:,}-byte ({instance // 4:,}-word) "
        f"data-memory instance of the {ctx.device.name}; {fix}.",
    )


def output_memory(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    offset = layer.out_offset
    if offset is None or (layer.streaming and layer.index != ctx.final):
        return
    size = output_bytes(layer, ctx.device, ctx.max_proc)
    if _fits_instance(ctx, offset, size):
        return
    instance = ctx.device.instance_bytes
    p = output_passes(layer, ctx.max_proc)
    packing = (
        "32-bit output, one channel per word"
        if layer.output_width == 32
        else "HWC, 4 channels per 32-bit word"
    )
    extra = f" x {p} passes" if p > 1 else ""
    room = instance - size
    fix = (
        f"lower `out_offset` to at most {hex16(room)}"
        if room >= 0
        else "the output alone is too large: reduce it (pooling, fewer pixels"
        + (", 8-bit output" if layer.output_width == 32 else "")
        + (", or fewer channels per layer" if p > 1 else "")
        + ")"
    )
    yield ctx.error(
        layer,
        "out_offset",
        f"{hex16(offset)} + the {layer.out_channels}-channel {dims(layer.out_dim, layer)} "
        f"output ({packing}{extra}) = {size:,} bytes ({size // 4:,} words) per memory instance "
        f"ends at {hex16(offset + size)}, past the {instance:,}-byte ({instance // 4:,}-word) "
        f"data-memory instance of the {ctx.device.name}; {fix}.",
    )


def write_gap(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    """The write pointer steps over `write_gap` words after each pixel (times the output passes
    for a convolution); LCTL2 holds that step minus one in a field of
    `write_ptr_increment_bits`."""
    gap = layer.write_gap
    if not gap:
        return
    limit = 2**ctx.device.write_ptr_increment_bits
    if layer.operation == "none":
        step, how = gap, f"{gap}"
    else:
        passes = output_passes(layer, ctx.max_proc)
        step = passes * (gap + 1) - 1
        how = f"{passes} output passes x ({gap} + 1) - 1 = {step}" if passes > 1 else f"{gap}"
    if step >= limit:
        passes_hint = " or fewer output channels (passes)" if layer.operation != "none" else ""
        yield ctx.error(
            layer,
            "write_gap",
            f"{gap}: the write pointer would step {how} words past each pixel; the "
            f"{ctx.device.name} counts at most {limit - 1}: use a smaller `write_gap`"
            f"{passes_hint}.",
        )


def read_gap(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not layer.read_gap:
        return
    if not ctx.device.supports_read_gap:
        yield ctx.error(
            layer,
            "read_gap",
            f"{layer.read_gap}: `read_gap` is not supported on the {ctx.device.name}; use 0.",
        )
    elif input_passes(layer, ctx.max_proc) > 1 and not ctx.device.supports_multipass_read_gap:
        yield ctx.error(
            layer,
            "read_gap",
            f"{layer.read_gap}: `read_gap` works only when the input fits in one pass "
            f"({ctx.max_proc} channels or fewer); this layer has {layer.in_channels}.",
        )


def calcx4_multipass(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if (
        ctx.calcx4(layer)
        and ctx.device.supports_calcx4
        and not ctx.device.supports_multipass_calcx4_partial_quad
        and output_passes(layer, ctx.max_proc) > 1
        and ctx.max_proc != ctx.device.processors
        and not ctx.options.ignore_hw_limits
    ):
        yield ctx.error(
            layer,
            "calcx4",
            f"`calcx4` with multi-pass output needs all {ctx.device.processors} processors, but "
            f"--max-proc limits them to {ctx.max_proc}.",
        )


def read_ahead_instances(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not ctx.read_ahead(layer) or not ctx.device.supports_read_ahead:
        return
    in_off = ctx.in_offset(layer)
    out_off = layer.out_offset
    if in_off is None or out_off is None:
        return
    per = ctx.device.instance_bytes // ctx.device.instance_banks
    rows, cols = hw_input_dim(layer, ctx.device)
    in_end = in_off + 4 * layer.operands * input_passes(layer, ctx.max_proc) * rows * cols - 1
    out_pixels = output_pixels(layer, ctx.device)
    out_end = out_off + 4 * output_passes(layer, ctx.max_proc) * out_pixels - 1
    ins, outs = (in_off // per, in_end // per), (out_off // per, out_end // per)
    if ins[0] == outs[0] or ins[1] == outs[1]:
        yield ctx.error(
            layer,
            "readahead",
            f"with read-ahead, input and output must lie in different memory banks of "
            f"{per:,} bytes: the input ({hex16(in_off)}-{hex16(in_end)}) is in bank(s) "
            f"{ins[0]}-{ins[1]}, the output ({hex16(out_off)}-{hex16(out_end)}) in "
            f"{outs[0]}-{outs[1]}; move `out_offset` or `in_offset` to another bank.",
        )


def quadrants_used(ctx: Context) -> list[int]:
    used = 0
    for layer in ctx.layers:
        used |= layer.processors or 0
    final_map = ctx.output_map(ctx.layer(ctx.final)) or 0
    per = ctx.device.processors_per_group
    mask = (1 << per) - 1
    return [g for g in range(ctx.device.groups) if (used | final_map) >> g * per & mask]


def quadrant_zero(ctx: Context) -> Iterator[EdgesynthError]:
    if not ctx.placed:
        return
    used = quadrants_used(ctx)
    if 0 not in used:
        yield ctx.error(
            ctx.layer(ctx.start),
            "processors",
            f"no layer uses quadrant 0 (processors 0-15); the network uses quadrants "
            f"{used}, but quadrant 0 controls the accelerator and must be used by at least one "
            "layer.",
        )


def _bias_groups(layer: Layer) -> list[int] | None:
    value = layer.bias_group
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    return [value] if isinstance(value, int) else list(value)


def bias_group_quadrants(ctx: Context) -> Iterator[EdgesynthError]:
    if ctx.options.ignore_bias_groups or not ctx.placed:
        return
    used = quadrants_used(ctx)
    for layer in ctx.layers:
        chosen = _bias_groups(layer)
        bad = [g for g in chosen or [] if g not in used]
        if bad:
            yield ctx.error(
                layer,
                "bias_group",
                f"names quadrant {bad[0]}, which no layer of this network uses; choose one of "
                f"the used quadrants {used}.",
            )


def kernel_memory(ctx: Context) -> Iterator[EdgesynthError]:
    """Every processor's kernel memory must hold the kernels of all layers that use it."""
    needed = [0] * ctx.device.processors
    users: list[list[int]] = [[] for _ in range(ctx.device.processors)]
    first_over: dict[int, int] = {}
    for layer in sorted(ctx.layers, key=lambda x: x.index):
        if layer.weight_source is not None or layer.processors is None:
            continue
        out_map = ctx.output_map(layer)
        if out_map is None:
            continue
        quad = ctx.options.fast_fifo_quad and layer.index == ctx.start
        words = kernel_words(
            layer,
            out_map,
            ctx.max_proc,
            ctx.device.processors_sharing_memory,
            quad,
            hw_kernel(ctx, layer),
        )
        if not words:
            continue
        pmap = layer.processors & ((1 << ctx.device.processors_per_group) - 1 if quad else -1)
        for p in range(ctx.device.processors):
            if pmap >> p & 1:
                needed[p] += words
                users[p].append(layer.index)
                if needed[p] > _kernel_capacity(ctx.device, p):
                    first_over.setdefault(p, layer.index)
    if not first_over:
        return
    worst = max(first_over, key=lambda p: needed[p] - _kernel_capacity(ctx.device, p))
    capacity = _kernel_capacity(ctx.device, worst)
    layer = ctx.layer(first_over[worst])
    shown = ", ".join(layer_name(ctx.layer(i)) for i in users[worst])
    others = len(first_over) - 1
    yield ctx.error(
        layer,
        "processors",
        f"the kernels do not fit: processor {worst} holds {capacity:,} kernel words (one 3x3 "
        f"kernel of 8-bit weights each), but layers {shown} need at least "
        f"{needed[worst]:,} of them"
        + (f" ({others} more processors overflow too)" if others else "")
        + "; use fewer or narrower layers, 1x1/smaller kernels, fewer weight bits "
        "(`quantization`), or spread layers over other processors.",
    )


def _kernel_capacity(device: Device, processor: int) -> int:
    large = processor % device.processors_per_group == 0
    return device.mask_width_large if large else device.mask_width_small


def bias_memory(ctx: Context) -> Iterator[EdgesynthError]:
    capacity = ctx.device.bias_words_per_group
    total = 0
    for layer in ctx.layers:
        if layer.groups > 1 or layer.weight_source is not None:
            continue
        out_map = ctx.output_map(layer)
        if out_map is None:
            continue
        if ctx.options.fast_fifo_quad and layer.index == ctx.start:
            continue
        size = bias_bytes(layer, out_map, ctx.device, ctx.max_proc)
        total += size
        if size > capacity:
            yield ctx.error(
                layer,
                "out_channels",
                f"the layer's {layer.out_channels:,} bias values ({size:,} bytes) do not fit in "
                f"one quadrant's bias memory ({capacity:,} bytes); use at most {capacity:,} "
                "output channels with bias, or train this layer without bias.",
            )
    if not ctx.placed:
        return
    quadrants = len(quadrants_used(ctx))
    if total > capacity * quadrants:
        yield ctx.error(
            ctx.layer(ctx.final),
            None,
            f"the network's bias values need {total:,} bytes, but the {quadrants} quadrant(s) "
            f"it uses hold {capacity * quadrants:,} ({capacity:,} each); use more quadrants, "
            "fewer biased output channels, or train some layers without bias.",
        )
