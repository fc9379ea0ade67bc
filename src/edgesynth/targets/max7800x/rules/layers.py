"""Layer rules beyond the convolution: pooling, element-wise, flatten, passthrough, output width."""

from __future__ import annotations

from collections.abc import Iterator

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.sizes import (
    ffs,
    has_bias,
    input_passes,
    input_processors_needed,
    popcount,
)
from edgesynth.targets.max7800x.rules.text import map64, pool_key


def pooling(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    key = pool_key(layer)
    ph, pw = layer.pool
    dh, dw = layer.pool_dilation
    if (ph - 1) * dh >= ctx.device.max_pool or (pw - 1) * dw >= ctx.device.max_pool:
        yield ctx.error(
            layer,
            key,
            f"{ph if layer.is_1d else f'{ph}x{pw}'} (dilation {dh}) is larger than the "
            f"hardware pools; pooling windows span at most {ctx.device.max_pool} rows and "
            "columns.",
        )
    sh, sw = layer.pool_stride
    if max(sh, sw) > ctx.device.max_pool_stride:
        yield ctx.error(
            layer,
            "pool_stride",
            f"{sh}: pooling strides can be 1 to {ctx.device.max_pool_stride}.",
        )
    if not layer.is_1d and sh != sw:
        yield ctx.error(
            layer,
            "pool_stride",
            f"{sh}x{sw}: 2D pooling needs the same stride in both dimensions.",
        )
    if (dh, dw) != (1, 1) and layer.pool == (1, 1) and layer.pool_type is None:
        yield ctx.error(
            layer,
            "pool_dilation",
            "needs pooling in the same layer (`max_pool` or `avg_pool`); remove it.",
        )
    limit = ctx.device.max_pool_dilation
    if min(dh, dw) < 1 or max(dh, dw) > limit:
        shown = dh if dh == dw else f"{dh}x{dw}"
        yield ctx.error(
            layer,
            "pool_dilation",
            f"{shown}: pooling dilation can be 1 to {limit} on the {ctx.device.name}."
            if limit > 1
            else f"{shown}: the {ctx.device.name} pools without dilation; remove `pool_dilation` "
            "(dilated pooling needs the MAX78002).",
        )


def eltwise(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    n = layer.operands
    pooled = layer.pool != (1, 1)
    if n > 1 and not 2 <= n <= ctx.device.max_operands:
        yield ctx.error(
            layer,
            "operands",
            f"{n}: element-wise operations take 2 to {ctx.device.max_operands} inputs.",
        )
    if n > 1 and layer.is_1d:
        yield ctx.error(
            layer,
            "eltwise",
            "element-wise operations cannot be combined with Conv1d; use a separate "
            "passthrough layer (`op: add`...) before the Conv1d.",
        )
    if not layer.pool_first:
        if n == 1 or not pooled:
            yield ctx.error(
                layer,
                "pool_first",
                "`pool_first: false` (pool after the element-wise operation) needs both "
                "pooling and an element-wise operation in this layer; remove it.",
            )
        elif n > ctx.device.max_pool_last_operands:
            yield ctx.error(
                layer,
                "operands",
                f"{n}: pooling after an element-wise operation (`pool_first: false`) works with "
                f"at most {ctx.device.max_pool_last_operands} inputs.",
            )
    yield from _eltwise_inputs(ctx, layer)


def _eltwise_inputs(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.operands <= 1 or len(layer.in_sequences) < 2:
        return
    channels = {
        i: (
            ctx.net.input_shape[0] // layer.operands
            if i == NETWORK_INPUT
            else ctx.layer(i).out_channels
        )
        for i in layer.in_sequences
    }
    if len(set(channels.values())) > 1:
        shown = ", ".join(f"layer {i}: {c}" for i, c in channels.items())
        yield ctx.error(
            layer,
            "in_sequences",
            f"the inputs of an element-wise operation must have the same channel count ({shown}).",
        )
    maps = {}
    for i in layer.in_sequences:
        m = ctx.layer(0).processors if i == NETWORK_INPUT else ctx.output_map(ctx.layer(i))
        if m is not None:
            maps[i] = m
    if len(set(maps.values())) > 1:
        shown = ", ".join(f"layer {i}: {map64(m)}" for i, m in maps.items())
        yield ctx.error(
            layer,
            "in_sequences",
            "the inputs of an element-wise operation must be written by the same output "
            f"processors ({shown}); give the producing layers the same `output_processors`.",
        )


def emulated_eltwise(ctx: Context, layer: Layer) -> bool:
    """Multi-pass element-wise operations the MAX78000 runs as a plain data move."""
    n, p = layer.operands, input_passes(layer, ctx.max_proc)
    return ctx.device.emulates_multipass_eltwise and n > 1 and p > 1 and n * p != n + p


def multipass_eltwise(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    n = layer.operands
    p = input_passes(layer, ctx.max_proc)
    if emulated_eltwise(ctx, layer) and (
        layer.operation != "none" or layer.pool != (1, 1) or layer.pool_stride != (1, 1)
    ):
        yield ctx.error(
            layer,
            "operation",
            f"a {n}-input element-wise operation on {layer.in_channels} channels ({p} passes) "
            f"runs as a separate data move on the {ctx.device.name} and cannot pool or "
            "convolve in the same layer (only 2 inputs x 2 passes can); move the pooling or "
            "convolution to its own layer.",
        )
    if (
        not ctx.device.supports_multipass_eltwise_conv_bias
        and n > 1
        and layer.operation != "none"
        and has_bias(layer)
        and layer.groups == 1
    ):
        yield ctx.error(
            layer,
            "eltwise",
            f"on the {ctx.device.name}, an element-wise operation cannot share a layer with a "
            "convolution that has a bias; put the element-wise operation in its own "
            "passthrough layer, or train the convolution without bias.",
        )


def flatten(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if not layer.flatten:
        return
    if layer.operation == "none":
        yield ctx.error(
            layer,
            "flatten",
            "needs a convolution or linear operation; a passthrough layer cannot flatten.",
        )
    if layer.pool != (1, 1):
        yield ctx.error(
            layer,
            "flatten",
            "cannot be combined with pooling in the same layer; pool in the layer before.",
        )
    if layer.streaming:
        yield ctx.error(layer, "flatten", "cannot be combined with `streaming`.")
    pixels = layer.pooled_dim[0] * layer.pooled_dim[1]
    if pixels > ctx.device.max_flatten_pixels:
        yield ctx.error(
            layer,
            "flatten",
            f"folds {layer.pooled_dim[0]}x{layer.pooled_dim[1]} = {pixels:,} pixels into "
            f"channels; the hardware flattens at most {ctx.device.max_flatten_pixels} pixels "
            "(e.g. 16x16); pool further before flattening.",
        )


def flatten_passes(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    """A flattened layer reads its input in passes of equal size: with more input channels
    than processors, every pass must be full (the vendor's tool splits the weights so and
    fails on anything else)."""
    if not layer.flatten:
        return
    count = input_passes(layer, ctx.max_proc)
    shared = ctx.device.processors_sharing_memory
    per_pass = input_processors_needed(layer, ctx.max_proc, shared)
    if count > 1 and count * per_pass != layer.in_channels:
        yield ctx.error(
            layer,
            "flatten",
            f"reads {layer.in_channels} input channels in {count} passes of {per_pass} "
            "processors, the last one partial; a flattened layer needs every pass full: use "
            f"a multiple of {count * shared} channels (e.g. {count * per_pass}) or at most "
            f"{ctx.max_proc}.",
        )


def passthrough_output(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    """What a layer without convolution cannot do, wherever it is placed: an activation, an
    output wider than 8 bits."""
    if layer.operation != "none":
        return
    if layer.activation is not None:
        yield ctx.error(
            layer,
            "activation",
            f"{layer.activation}: a layer without convolution cannot apply an activation; "
            "remove `activation` (or apply it in the producing convolution).",
        )
    if layer.output_width != 8:
        yield ctx.error(
            layer,
            "output_width",
            f"{layer.output_width}: a layer without convolution writes 8-bit data only.",
        )


def passthrough(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.operation != "none":
        return
    yield from passthrough_output(ctx, layer)
    p = input_passes(layer, ctx.max_proc)
    if layer.pool != (1, 1) and p > ctx.device.max_pool_passes and layer.pooled_dim != (1, 1):
        yield ctx.error(
            layer,
            pool_key(layer),
            f"pooling {layer.in_channels} channels ({p} passes) without a convolution is not "
            f"possible on the {ctx.device.name} (at most {ctx.device.max_pool_passes} pass, "
            f"i.e. {ctx.max_proc * ctx.device.max_pool_passes} channels); pool inside the "
            "following convolution layer, or pool down to 1x1.",
        )
    yield from _passthrough_maps(ctx, layer)


def passthrough_group_mismatch(
    in_map: int, out_map: int, per_group: int, groups: int
) -> int | None:
    """The first quadrant where a passthrough layer's output map is not its input processors'
    count, packed (the layer writes each quadrant's channels to consecutive processors of the
    same quadrant); None when every quadrant agrees."""
    mask = (1 << per_group) - 1
    for group in range(groups):
        wanted = (1 << popcount(in_map >> group * per_group & mask)) - 1
        got = out_map >> group * per_group & mask
        if got:
            got >>= ffs(got)
        if got != wanted:
            return group
    return None


def _passthrough_maps(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    in_map, out_map = layer.processors, ctx.output_map(layer)
    if in_map is None or out_map is None:
        return
    per_group = ctx.device.processors_per_group
    mask = (1 << per_group) - 1
    group = passthrough_group_mismatch(in_map, out_map, per_group, ctx.device.groups)
    if group is None:
        return
    key, origin = ctx.output_map_origin(layer)
    yield ctx.error(
        layer,
        key,
        f"{map64(out_map)} (from {origin}): a passthrough layer writes each quadrant's "
        "channels to consecutive processors of the same quadrant, so in every quadrant "
        "the output processors must be as many as the input processors, without gaps "
        f"(`processors` {map64(in_map)}, quadrant {group}: "
        f"{popcount(in_map >> group * per_group & mask)} input processors, output "
        f"{map64(out_map >> group * per_group & mask)}); e.g. use "
        f"{map64(_packed_map(in_map, per_group, ctx.device.groups))}.",
    )


def _packed_map(in_map: int, per_group: int, groups: int) -> int:
    mask = (1 << per_group) - 1
    result = 0
    for group in range(groups):
        n = popcount(in_map >> group * per_group & mask)
        result |= ((1 << n) - 1) << group * per_group
    return result


def output_width(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.output_width not in (8, 32):
        yield ctx.error(layer, "output_width", f"{layer.output_width}: use 8 or 32.")
    elif layer.index == ctx.final and layer.output_width != 8 and layer.activation:
        yield ctx.error(
            layer,
            "output_width",
            f"32-bit output is the raw accumulator and cannot go through the "
            f"{layer.activation} activation; remove the activation (`activation: None`) or "
            "use `output_width: 8`.",
        )
