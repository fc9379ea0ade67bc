"""Dimensions, channel counts, and the input/output processor maps of each layer."""

from __future__ import annotations

from collections.abc import Iterator

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.layers import emulated_eltwise
from edgesynth.targets.max7800x.rules.sizes import (
    ffs,
    input_passes,
    input_processors_needed,
    output_passes,
    output_processors_needed,
    popcount,
)
from edgesynth.targets.max7800x.rules.text import dims, layer_name, map64, plural


def dimensions(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_row_col
    for what, dim, key in (("input", layer.in_dim, "in_dim"), ("output", layer.out_dim, None)):
        if max(dim) > limit:
            yield ctx.error(
                layer,
                key,
                f"the {what} is {dims(dim, layer)}, larger than the {limit} rows/columns the "
                f"{ctx.device.name} handles; downscale or fold the data (more channels, fewer "
                "pixels).",
            )
    frame = layer.in_dim[0] * layer.in_dim[1] * input_passes(layer, ctx.max_proc)
    if frame >= ctx.device.max_frame_words:
        yield ctx.error(
            layer,
            "in_dim",
            f"the input ({dims(layer.in_dim, layer)} x {input_passes(layer, ctx.max_proc)} "
            f"passes = {frame:,} words) exceeds the hardware's frame counter "
            f"({ctx.device.max_frame_words:,}).",
        )


def channel_counts(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_channels
    if layer.in_channels > limit:
        before = " (before flattening)" if layer.flatten else ""
        yield ctx.error(
            layer,
            "in_channels",
            f"the layer has {layer.in_channels:,} input channels{before}; the "
            f"{ctx.device.name} handles at most {limit:,} (64 processors x 16 passes).",
        )
    if layer.out_channels > limit:
        yield ctx.error(
            layer,
            "out_channels",
            f"the layer has {layer.out_channels:,} output channels; the {ctx.device.name} "
            f"handles at most {limit:,} (64 processors x 16 passes).",
        )
    p = input_passes(layer, ctx.max_proc)
    if (
        not layer.flatten
        and layer.in_channels <= limit
        and p > ctx.device.max_passes
        and not (layer.operation == "none" and emulated_eltwise(ctx, layer))
    ):
        yield ctx.error(
            layer,
            "in_channels",
            f"{layer.in_channels} input channels on {ctx.max_proc} processors need {p} "
            f"passes; the hardware counts at most {ctx.device.max_passes}.",
        )


def input_processors(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    pmap = layer.processors
    if pmap is None:
        return
    need = input_processors_needed(layer, ctx.max_proc, ctx.device.processors_sharing_memory)
    have = popcount(pmap)
    if have != need:
        p = input_passes(layer, ctx.max_proc)
        before = " (before flattening)" if layer.flatten else ""
        operands = (
            f" per operand ({layer.operands} element-wise inputs share the same processors)"
            if layer.operands > 1
            else ""
        )
        layout = (
            "one processor per channel" if p == 1 else f"{need} processors per pass, {p} passes"
        )
        yield ctx.error(
            layer,
            "processors",
            f"{map64(pmap)} enables {plural(have, 'processor')}, but the layer's "
            f"{plural(layer.in_channels, 'input channel')}{before}{operands} need exactly "
            f"{need} ({layout}); set `processors` to a map with {need} bits, e.g. "
            f"{map64(_suggest_map(need, layer.data_format, ctx, pmap))}"
            + _also_output_of(ctx, layer)
            + ".",
        )


def _also_output_of(ctx: Context, layer: Layer) -> str:
    """Note the producers whose output map defaults to this layer's (wrong) `processors`."""
    producers = [
        other
        for other in ctx.layers
        if other.next_sequence == layer.index
        and other.output_processors is None
        and other.index != ctx.final
        and layer.processors is not None
        and popcount(layer.processors)
        != output_processors_needed(other, ctx.max_proc, ctx.device.processors_sharing_memory)
    ]
    if not producers:
        return ""
    shown = " and ".join(
        f"layer {layer_name(p)} ({plural(p.out_channels, 'output channel')})" for p in producers
    )
    return f" (the same map receives the output of {shown}, which has no `output_processors`)"


def _suggest_map(count: int, data_format: str, ctx: Context, current: int = 0) -> int:
    """A processor map with `count` processors, starting where `current` starts if it fits."""
    step = ctx.device.processors_sharing_memory if data_format == "CHW" else 1
    first = ffs(current) if current else 0
    if first + (count - 1) * step >= ctx.device.processors:
        first = 0
    result = 0
    for i in range(count):
        if first + i * step < ctx.device.processors:
            result |= 1 << first + i * step
    return result


def output_processors(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    out_map = ctx.output_map(layer)
    if out_map is None:
        return
    need = output_processors_needed(layer, ctx.max_proc, ctx.device.processors_sharing_memory)
    have = popcount(out_map)
    if have != need and not _reported_by_next_layer(ctx, layer, out_map):
        p = output_passes(layer, ctx.max_proc)
        key, origin = ctx.output_map_origin(layer)
        layout = "one per channel" if p == 1 else f"{need} per pass, {p} passes"
        yield ctx.error(
            layer,
            key,
            f"the output goes to {map64(out_map)} (from {origin}), "
            f"{plural(have, 'processor')}, but {plural(layer.out_channels, 'output channel')} "
            f"need exactly {need} ({layout}); set `output_processors` (or the next layer's "
            f"`processors`) to a map with {need} bits.",
            line=ctx.net.spec.lines.get("output_map") if key == "output_map" else None,
        )


def _reported_by_next_layer(ctx: Context, layer: Layer, out_map: int) -> bool:
    """The output map is the next layer's `processors`, and that layer reports its bit count."""
    if layer.output_processors is not None or layer.index == ctx.final:
        return False
    following = ctx.layer(layer.next_sequence)
    return (
        following.processors == out_map
        and following.index in ctx.previous
        and popcount(out_map)
        != input_processors_needed(following, ctx.max_proc, ctx.device.processors_sharing_memory)
    )


def data_format(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.data_format != "CHW":
        return
    if layer.index != ctx.start:
        yield ctx.error(
            layer,
            "data_format",
            "CHW: only the first layer can read CHW data (every layer writes HWC); remove "
            "`data_format` here.",
        )
    pmap = layer.processors
    if pmap is None:
        return
    shared = ctx.device.processors_sharing_memory
    for instance in range(ctx.device.processors // shared):
        bits = pmap >> instance * shared & (1 << shared) - 1
        if popcount(bits) > 1:
            first = instance * shared
            yield ctx.error(
                layer,
                "processors",
                f"{map64(pmap)} enables {popcount(bits)} of processors {first}-{first + 3}, which "
                "share one data-memory instance; with CHW input every channel needs its own "
                "instance: enable at most one processor in each group of 4 (e.g. "
                f"{map64(_suggest_map(popcount(pmap), 'CHW', ctx, pmap))}), or use HWC.",
            )
            return
