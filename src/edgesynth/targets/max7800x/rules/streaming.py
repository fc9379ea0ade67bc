"""Streaming rules: which layers may stream, their input buffers and row-skip counters."""

from __future__ import annotations

from collections.abc import Iterator

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.hw_geometry import (
    hw_padding,
)
from edgesynth.targets.max7800x.rules.sizes import (
    memory_instances,
    output_passes,
    output_pixels,
    output_skip_bytes,
)
from edgesynth.targets.max7800x.rules.stream_geometry import (
    StreamBuffer,
    is_last_streaming,
    stream_buffers,
    stream_delta2,
)
from edgesynth.targets.max7800x.rules.text import dims, hex16, layer_name, map64


def streaming_sequence(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not layer.streaming:
        return
    previous = ctx.previous.get(layer.index, -1)
    if layer.index != ctx.start and previous >= 0 and not ctx.layer(previous).streaming:
        yield ctx.error(
            layer,
            "streaming",
            f"layer {previous}, which runs before this one, does not stream; streaming layers "
            "must be the first layers of the network, one after another.",
        )
    if layer.index >= ctx.device.max_stream_layers:
        yield ctx.error(
            layer,
            "streaming",
            f"only the first {ctx.device.max_stream_layers} layers (0 to "
            f"{ctx.device.max_stream_layers - 1}) can stream; stream fewer layers, or pool "
            "earlier so that later layers fit in data memory.",
        )
    following = layer.next_sequence
    if layer.index <= ctx.device.max_stream_layers and following not in (None, -1, layer.index + 1):
        yield ctx.error(
            layer,
            "next_sequence",
            f"{following}: a streaming layer must be followed by layer {layer.index + 1}.",
        )
    if (
        layer.operation == "none"
        and not ctx.device.supports_streaming_passthrough
        and layer.index <= ctx.device.max_stream_layers
    ):
        yield ctx.error(
            layer,
            "streaming",
            f"a layer without convolution cannot stream on the {ctx.device.name}; only "
            "Conv1d, Conv2d and ConvTranspose2d layers can.",
        )
    if (
        not ctx.device.supports_stream_nonpad_final
        and is_last_streaming(ctx, layer)
        and layer.index <= ctx.device.max_stream_layers
    ):
        pad = hw_padding(ctx, layer)
        if pad[0] == 0 or pad[1] == 0:
            yield ctx.error(
                layer,
                "pad",
                f"{layer.pad[0]}: on the {ctx.device.name} the last streaming layer must pad "
                "its input (`pad: 1` or 2).",
            )


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Closed ranges [a0, a1] and [b0, b1] share a byte (touching counts, like the vendor)."""
    return a[0] <= b[1] and b[0] <= a[1]


def streaming_buffers(ctx: Context) -> Iterator[EdgesynthError]:
    buffers = stream_buffers(ctx)
    for index, buf in buffers.items():
        layer = ctx.layer(index)
        yield from _stream_buffer_vs_output(ctx, layer, buf)
        if buf.end >= ctx.device.instance_bytes and not ctx.options.no_error_stop:
            yield ctx.error(
                layer,
                "in_offset",
                f"the streaming input buffer ({buf.rollover:,} words) from {hex16(buf.start)} "
                f"ends at {hex16(buf.end)}, past the {ctx.device.instance_bytes:,}-byte memory "
                f"instance; lower `in_offset` (the previous layer's `out_offset`) to below "
                f"{hex16(ctx.device.instance_bytes - buf.rollover * 4)}.",
            )
        for other in buffers.values():
            if other.layer >= index:
                break
            if (
                other.instances & buf.instances
                and _overlap((buf.start, buf.end), (other.start, other.end))
                and not ctx.options.overwrite_ok
            ):
                yield ctx.error(
                    layer,
                    "in_offset",
                    f"the streaming input buffer {hex16(buf.start)}-{hex16(buf.end)} "
                    f"(processors {map64(layer.processors or 0)}) overlaps the buffer of "
                    f"streaming layer {layer_name(ctx.layer(other.layer))} "
                    f"({hex16(other.start)}-{hex16(other.end)}, processors "
                    f"{map64(ctx.layer(other.layer).processors or 0)}) in a shared memory "
                    "instance; give the streaming layers disjoint `out_offset` ranges or "
                    "processors in different memory instances.",
                )
            if ctx.read_ahead(layer) and _bank(ctx, buf.start) == _bank(ctx, other.start):
                yield ctx.error(
                    layer,
                    "readahead",
                    f"with read-ahead, every streaming layer needs its own memory bank; this "
                    f"layer's buffer shares bank {_bank(ctx, buf.start)} with layer "
                    f"{layer_name(ctx.layer(other.layer))}.",
                )
        if is_last_streaming(ctx, layer):
            yield from _final_stream_output(ctx, layer, buffers)


def _bank(ctx: Context, offset: int) -> int:
    return offset // (ctx.device.instance_bytes // ctx.device.instance_banks)


def _stream_buffer_vs_output(
    ctx: Context, layer: Layer, buf: StreamBuffer
) -> Iterator[EdgesynthError]:
    """A streaming layer's output must not run into its own input buffer."""
    out_map = ctx.output_map(layer)
    if out_map is None or not out_map & (layer.processors or 0) or ctx.options.no_error_stop:
        return
    out_offset = layer.out_offset or 0
    out_start = out_offset - output_skip_bytes(layer, ctx.device)
    if buf.start < out_start:
        if buf.end >= out_start:
            yield ctx.error(
                layer,
                "out_offset",
                f"{hex16(out_offset)}: the output would overwrite this layer's streaming input "
                f"buffer ({hex16(buf.start)}-{hex16(buf.end)}, {buf.rollover:,} words); raise "
                f"`out_offset` above {hex16(buf.end)}.",
            )
        return
    if out_offset + buf.rollover * 4 >= buf.start:
        yield ctx.error(
            layer,
            "out_offset",
            f"{hex16(out_offset)}: the output runs into this layer's streaming input buffer at "
            f"{hex16(buf.start)} ({buf.rollover:,} words); move `out_offset` more than "
            f"{buf.rollover * 4:,} bytes below `in_offset`, or above the buffer.",
        )
    if layer.index == ctx.final:
        pixels = output_pixels(layer, ctx.device)
        size = pixels * output_passes(layer, ctx.max_proc) * 4
        if out_offset + size >= buf.start:
            yield ctx.error(
                layer,
                "out_offset",
                f"{hex16(out_offset)}: the {dims(layer.out_dim, layer)} output ({size:,} bytes) "
                f"runs into this layer's streaming input buffer at {hex16(buf.start)}.",
            )


def _final_stream_output(
    ctx: Context, layer: Layer, buffers: dict[int, StreamBuffer]
) -> Iterator[EdgesynthError]:
    out_map = ctx.output_map(layer)
    if out_map is None or layer.out_offset is None or ctx.options.overwrite_ok:
        return
    instances = memory_instances(out_map, ctx.device.processors_sharing_memory)
    pixels = output_pixels(layer, ctx.device)
    end = layer.out_offset + pixels * 4 * layer.output_width // 8
    for other in buffers.values():
        if other.layer > layer.index:
            break
        if other.instances & instances and _overlap(
            (layer.out_offset, end), (other.start, other.end)
        ):
            yield ctx.error(
                layer,
                "out_offset",
                f"the output of the last streaming layer ({hex16(layer.out_offset)}-{hex16(end)}, "
                f"output processors {map64(out_map)}) overlaps the streaming input buffer of "
                f"layer {layer_name(ctx.layer(other.layer))} ({hex16(other.start)}-"
                f"{hex16(other.end)}); move `out_offset` past {hex16(other.end)}.",
            )


def streaming_delta(ctx: Context) -> Iterator[EdgesynthError]:
    """The row-skip counter of each streaming layer must fit its register."""
    limit = 1 << ctx.device.stream_delta2_bits
    for layer in ctx.layers:
        if not layer.streaming:
            continue
        delta2 = stream_delta2(ctx, layer)
        if delta2 >= limit:
            yield ctx.error(
                layer,
                "pool_stride",
                f"streaming this {dims(layer.in_dim, layer)} input with pooling stride "
                f"{layer.pool_stride[0]} skips {delta2:,} words per row, more than the "
                f"streaming counter holds ({limit - 1:,}); reduce pooling or the input width.",
            )
