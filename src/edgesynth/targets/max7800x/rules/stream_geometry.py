"""The input buffer of each streaming layer: prefill, rollover and row-skip counter sizes."""

from __future__ import annotations

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.hw_geometry import (
    hw_kernel,
    hw_padding,
    hw_pooled_dim,
)
from edgesynth.targets.max7800x.rules.sizes import (
    ceil_div,
    hw_input_dim,
    input_passes,
    memory_instances,
)


@dataclass(frozen=True)
class StreamBuffer:
    """The circular input buffer of a streaming layer (FIFO input), in bytes from `start`."""

    layer: int
    start: int
    end: int  # start + rollover words x 4 (the vendor's inclusive bound)
    rollover: int  # words
    instances: int  # bit map of the data-memory instances its processors read


def is_last_streaming(ctx: Context, layer: Layer) -> bool:
    following = layer.next_sequence
    return following in (None, -1) or not ctx.streaming(following)


def stream_rollover(ctx: Context, layer: Layer) -> int:
    """Words of input a streaming layer keeps (the FIFO rollover / buffer size)."""
    if layer.index == ctx.start and ctx.options.override_rollover is not None:
        return ctx.options.override_rollover
    if ctx.device.uses_new_streaming:
        return _rollover_new(ctx, layer)
    return _rollover_old(ctx, layer)


def _previous_padded_cols(ctx: Context, layer: Layer) -> int:
    """Columns of the previous layer's (pooled) output, with its padding on both sides."""
    previous = ctx.layer(ctx.previous[layer.index])
    return hw_pooled_dim(ctx, previous)[1] + 2 * hw_padding(ctx, previous)[1]


def _stream_start_old(ctx: Context, layer: Layer) -> int:
    rows, cols = hw_input_dim(layer, ctx.device)
    if layer.index == ctx.start:
        if ctx.options.override_start is not None:
            return ctx.options.override_start
        if layer.streaming:
            start = (layer.pool[0] - 1) * cols + layer.pool[1]
        else:
            start = rows * cols
            if layer.data_format == "CHW":
                start = ceil_div(start, 4)
        return start * layer.pool[0]
    p_kernel = hw_kernel(ctx, ctx.layer(ctx.previous[layer.index]))
    return (
        _previous_padded_cols(ctx, layer) * (p_kernel[0] - 1 + layer.pool[0] - 1)
        + p_kernel[1]
        - 1
        + layer.pool[1]
        + ctx.options.increase_start
    )


def _rollover_old(ctx: Context, layer: Layer) -> int:
    if layer.data_format == "CHW":
        value = 12
    else:
        cols = hw_input_dim(layer, ctx.device)[1]
        value = (
            _stream_start_old(ctx, layer)
            + (layer.pool[0] - 1) * cols
            + max(layer.stride[1], layer.pool_stride[1], layer.pool[1])
        )
    p = input_passes(layer, ctx.max_proc)
    return ceil_div(value, p) * p


def _stream_geometry(ctx: Context, layer: Layer) -> dict[str, int]:
    rows, cols = hw_input_dim(layer, ctx.device)
    pad = hw_padding(ctx, layer)[1]
    row_inc = max(layer.pool[0] * layer.pool_dilation[0], layer.pool_stride[0])
    col_inc = max(layer.pool[1] * layer.pool_dilation[1], layer.pool_stride[1])
    row_prim = pad or layer.pool_stride[0]
    if layer.index > 0:
        effective = cols // col_inc
        if effective * layer.pool_stride[1] + layer.pool[1] > cols:
            effective -= 1
        col_adjust = 0 if col_inc == 1 else cols - effective * col_inc
    else:
        effective = cols // layer.pool_stride[1]
        if effective * layer.pool_stride[1] + layer.pool[1] - 1 > cols:
            effective -= 1
        col_adjust = cols - effective * col_inc
    return {
        "rows": rows,
        "cols": cols,
        "pad": pad,
        "row_inc": row_inc,
        "col_inc": col_inc,
        "row_prim": row_prim,
        "effective": effective,
        "col_adjust": col_adjust,
    }


def _stream_start_new(ctx: Context, layer: Layer) -> int:
    """The prefill (in HWC words) before a streaming layer starts (MAX78002 equations)."""
    g = _stream_geometry(ctx, layer)
    cols, pad, col_inc = g["cols"], g["pad"], g["col_inc"]
    if layer.index == ctx.start:
        if ctx.options.override_start is not None:
            return ctx.options.override_start
        if not layer.streaming:
            return g["rows"] * cols
        if layer.pool_stride[0] == 1 and layer.pool[0] == 1:
            return col_inc
        start = (g["row_inc"] * (cols + 2 * pad) + pad + 2 * col_inc) * layer.operands
    else:
        first = g["row_prim"] if layer.index > 0 else pad
        start = (
            first * (cols + 2 * pad)
            + (g["row_inc"] * (cols + 2 * pad) + pad + 2 * col_inc) * layer.operands
        )
        if is_last_streaming(ctx, layer) and layer.index > 0:
            start += g["col_adjust"] * layer.pool_stride[1]
    if ctx.read_ahead(layer):
        start += layer.pool_stride[1]
    return start


def _rollover_new(ctx: Context, layer: Layer) -> int:
    g = _stream_geometry(ctx, layer)
    start = _stream_start_new(ctx, layer)
    chw = layer.data_format == "CHW"
    if layer.index == ctx.start:
        value = start + g["col_inc"] + (layer.pool_stride[1] - 1) * (g["cols"] + 2 * g["pad"])
        return value * layer.pool_stride[1] * 4 if chw else value
    p = input_passes(layer, ctx.max_proc)
    value = start + (p - 1) * (g["row_inc"] * g["cols"] + g["pad"] + g["col_inc"]) + g["col_inc"]
    value = ceil_div(value, p) * p
    return ceil_div(value, 4) if chw else value


def stream_buffers(ctx: Context) -> dict[int, StreamBuffer]:
    """The input buffer of every streaming layer (only with FIFO input)."""
    if not ctx.options.uses_fifo:
        return {}
    result: dict[int, StreamBuffer] = {}
    for layer in sorted(ctx.layers, key=lambda x: x.index):
        offset = ctx.in_offset(layer)
        if not layer.streaming or layer.processors is None or offset is None:
            continue
        rollover = stream_rollover(ctx, layer)
        pmap = layer.processors
        if ctx.options.fast_fifo_quad and layer.index == 0:
            pmap |= 0x0001000100010001
        result[layer.index] = StreamBuffer(
            layer.index,
            offset,
            offset + rollover * 4,
            rollover,
            memory_instances(pmap, ctx.device.processors_sharing_memory),
        )
    return result


def stream_delta2(ctx: Context, layer: Layer) -> int:
    cols = hw_input_dim(layer, ctx.device)[1]
    chw = layer.data_format == "CHW"
    stride_r, stride_c = layer.pool_stride
    if not ctx.device.uses_new_streaming:
        if layer.index == ctx.start:
            if ctx.options.override_delta2 is not None:
                return ctx.options.override_delta2
            return (layer.pool[0] - 1) * cols * layer.operands
        return (
            (stride_r - 1) * _previous_padded_cols(ctx, layer)
            + layer.pool[1] * layer.operands
            + ctx.options.increase_delta2
        )
    g = _stream_geometry(ctx, layer)
    delta1 = stride_c * layer.operands
    if layer.index == ctx.start:
        if ctx.options.override_delta2 is not None:
            return ctx.options.override_delta2
        if stride_r == 1 and layer.pool[0] == 1:
            delta1 -= 1
    if chw:
        delta1 = ceil_div(delta1, 4)
    if layer.index != ctx.start:
        delta1 += ctx.options.increase_delta1
    if layer.index > 0:
        delta2 = (
            delta1 + g["col_adjust"] if stride_r == 1 else ((stride_r - 1) * cols + g["col_adjust"])
        )
    else:
        skipped = max(0, cols - g["effective"] * stride_c)
        delta2 = (
            delta1 + skipped
            if stride_r == 1
            else ((stride_r - 1) * cols + skipped + layer.pool[1] - 1)
        )
    if chw:
        delta2 = ceil_div(delta2, 4)
    if layer.index == ctx.start:
        pipeline = (
            ctx.device.supports_pipeline if ctx.options.pipeline is None else (ctx.options.pipeline)
        )
        if pipeline and delta2 > 0:
            delta2 += 1
    else:
        delta2 += ctx.options.increase_delta2
    return delta2
