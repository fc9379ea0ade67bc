"""Convolution rules: kernel sizes, padding, stride, dilation, groups, weights, output shift."""

from __future__ import annotations

from collections.abc import Iterator

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.sizes import (
    dilated_conv1d_mode,
    ffs,
    input_passes,
    output_skip_bytes,
)
from edgesynth.targets.max7800x.rules.text import hex16, map64, pool_key


def kernel_size(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    kh, kw = layer.kernel_size
    sizes = ctx.device.conv2d_kernel_sizes
    transpose = ctx.device.transpose_kernel_size
    if layer.operation == "conv2d" and not (kh == kw and kh in sizes):
        allowed = " or ".join(f"{k}x{k}" for k in sizes)
        largest = max(sizes)
        yield ctx.error(
            layer,
            "kernel_size",
            f"{kh}x{kw} is not a Conv2d kernel size the hardware has; use {allowed} (stack "
            f"{largest}x{largest} layers for a larger receptive field).",
        )
    elif layer.operation == "convtranspose2d" and (kh, kw) != (transpose, transpose):
        yield ctx.error(
            layer,
            "kernel_size",
            f"{kh}x{kw} is not supported for ConvTranspose2d; the only kernel size is "
            f"{transpose}x{transpose}.",
        )
    elif layer.is_1d and not 1 <= kh <= ctx.device.max_kernel_1d:
        yield ctx.error(
            layer,
            "kernel_size",
            f"{kh} is not a Conv1d kernel length the hardware has; use 1 to "
            f"{ctx.device.max_kernel_1d}.",
        )


def padding(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    ph, pw = layer.pad
    shown = str(ph) if layer.is_1d else f"{ph}" if ph == pw else f"[{ph}, {pw}]"
    if layer.operation == "none":
        if ph or pw:
            yield ctx.error(
                layer,
                "pad",
                f"{shown}: a layer without convolution (passthrough/element-wise) cannot pad; "
                "set `pad: 0`.",
            )
        return
    if max(ph, pw) > ctx.device.max_pad:
        yield ctx.error(
            layer,
            "pad",
            f"{shown} is more padding than the hardware supports; use 0 to {ctx.device.max_pad}.",
        )
        return
    if layer.operation == "convtranspose2d":
        return
    kh, kw = layer.kernel_size
    if ph >= kh or (not layer.is_1d and pw >= kw):
        kernel = str(kh) if layer.is_1d else f"{kh}x{kw}"
        yield ctx.error(
            layer,
            "pad",
            f"{shown} is not smaller than the {kernel} kernel; use at most {kh - 1}"
            + (" (a 1x1 kernel takes `pad: 0`)." if kh == 1 else "."),
        )


def padded_multipass_conv1d(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if (
        layer.is_1d
        and layer.pad[0] > 0
        and input_passes(layer, ctx.max_proc) > 1
        and not ctx.device.supports_multipass_padded_conv1d
        and not ctx.options.ignore_hw_limits
    ):
        yield ctx.error(
            layer,
            "pad",
            f"{layer.pad[0]}: the {ctx.device.name} cannot pad a Conv1d with more than "
            f"{ctx.max_proc} input channels ({layer.in_channels} channels = "
            f"{input_passes(layer, ctx.max_proc)} passes); use `pad: 0` (pad the data "
            f"beforehand), or at most {ctx.max_proc} input channels.",
        )


def transpose_padding(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.operation == "convtranspose2d":
        hw_pads = [layer.dilation[a] * (layer.kernel_size[a] - 1) - layer.pad[a] for a in (0, 1)]
        allowed = ctx.device.supported_transpose_pads
        if any(p not in allowed for p in hw_pads):
            yield ctx.error(
                layer,
                "pad",
                f"{layer.pad[0]} is not supported for ConvTranspose2d with a 3x3 kernel; use "
                f"0, 1 or 2.",
            )
        out_pads = ctx.device.supported_transpose_output_pads
        if any(p not in out_pads for p in layer.output_padding):
            yield ctx.error(
                layer,
                "output_padding",
                f"{layer.output_padding[0]} is not supported for ConvTranspose2d; the output "
                f"padding is fixed to {', '.join(map(str, out_pads))}.",
            )
    elif any(layer.output_padding):
        yield ctx.error(
            layer,
            "output_padding",
            f"{layer.output_padding[0]}: output padding exists only for ConvTranspose2d; "
            "remove it.",
        )


def stride(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    sh, sw = layer.stride
    up = ctx.device.transpose_stride
    if layer.operation == "convtranspose2d":
        if (sh, sw) != (up, up):
            yield ctx.error(
                layer,
                "stride",
                f"{sh}: ConvTranspose2d always upsamples with stride {up}; remove `stride`.",
            )
        return
    one = ctx.device.conv1d_stride
    if sh != one or (not layer.is_1d and sw != one):
        shown = str(sh) if layer.is_1d or sh == sw else f"{sh}x{sw}"
        yield ctx.error(
            layer,
            "stride",
            f"{shown}: the hardware convolves with stride {one} only; use `pool_stride` (with "
            f"pooling) to subsample, or a stride-{one} layer followed by pooling.",
        )


def dilation(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    dh, dw = layer.dilation
    if not layer.is_1d:
        if dh > 1 or dw > 1:
            what = (
                "a layer without convolution"
                if layer.operation == "none"
                else (f"{_op_name(layer)}")
            )
            yield ctx.error(
                layer,
                "dilation",
                f"{dh if dh == dw else f'{dh}x{dw}'} on {what}: dilation > 1 is supported "
                "for Conv1d only; use `dilation: 1` (stack layers or pool for a larger "
                "receptive field).",
            )
        return
    if dh <= 1:
        return
    k = layer.kernel_size[0]
    if k == 1:
        yield ctx.error(
            layer,
            "dilation",
            f"{dh} with a kernel of length 1 has no effect the hardware can run; use a kernel "
            "length of 2 or more, or `dilation: 1`.",
        )
    mode = dilated_conv1d_mode(layer, ctx.device)
    if mode == "unsupported":
        yield ctx.error(
            layer,
            "dilation",
            f"{dh} with kernel length {k} spans {(k - 1) * dh + 1} samples; the hardware "
            f"stretches kernels up to a span of {ctx.device.max_dilated_1d_span} and runs longer "
            f"spans only for kernels of length {ctx.device.max_dilation_1d_kernel} or less. "
            f"Use a kernel length of at most {ctx.device.max_dilation_1d_kernel}, or a dilation "
            f"of at most {max(1, (ctx.device.max_dilated_1d_span - 1) // max(1, k - 1))}.",
        )
    elif mode == "conv2d":
        yield from _folded_dilation_limits(ctx, layer)


def _folded_dilation_limits(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    dh = layer.dilation[0]
    why = f"with dilation {dh} (the layer runs on 3x3 hardware)"
    if layer.pool[0] != 1:
        yield ctx.error(
            layer,
            pool_key(layer),
            f"pooling is not possible {why}; pool in a separate layer.",
        )
    if layer.pad[0] > ctx.device.max_dilation_1d_pad:
        yield ctx.error(
            layer,
            "pad",
            f"{layer.pad[0]}: padding must be {ctx.device.max_dilation_1d_pad} {why}.",
        )
    if layer.operands != 1:
        yield ctx.error(
            layer,
            "operands",
            f"element-wise inputs are not possible {why}; use a separate layer.",
        )
    for key, on in (
        ("bypass", bool(layer.spec.bypass)),
        ("flatten", layer.flatten),
        ("readahead", ctx.read_ahead(layer)),
        ("streaming", layer.streaming),
    ):
        if on:
            yield ctx.error(layer, key, f"`{key}` must be off {why}.")
    if dh > ctx.device.max_dilation_1d:
        yield ctx.error(
            layer,
            "dilation",
            f"{dh} exceeds the largest Conv1d dilation of the {ctx.device.name}, "
            f"{ctx.device.max_dilation_1d}.",
        )
    skip = output_skip_bytes(layer, ctx.device)
    if layer.out_offset is not None and layer.out_offset < skip:
        yield ctx.error(
            layer,
            "out_offset",
            f"{hex16(layer.out_offset)}: {why} the hardware writes {skip} bytes before the "
            f"output; set `out_offset` to at least {hex16(skip)}.",
        )


def _op_name(layer: Layer) -> str:
    return {
        "conv1d": "Conv1d",
        "conv2d": "Conv2d",
        "convtranspose2d": "ConvTranspose2d",
        "linear": "Linear",
        "none": "a passthrough layer",
    }.get(layer.operation, layer.operation)


def groups(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    g = layer.groups
    if g <= 1:
        return
    if not ctx.device.supports_depthwise:
        yield ctx.error(
            layer,
            "groups",
            f"{g}: grouped and depthwise convolutions are not supported on the "
            f"{ctx.device.name}; use `groups: 1` (or the MAX78002, which supports "
            "depthwise convolutions with groups = input channels = output channels).",
        )
    if layer.in_channels % g or layer.out_channels % g:
        yield ctx.error(
            layer,
            "groups",
            f"{g} does not divide the {layer.in_channels} input channels and "
            f"{layer.out_channels} output channels.",
        )
    elif ctx.device.supports_depthwise and (g != layer.in_channels or g != layer.out_channels):
        yield ctx.error(
            layer,
            "groups",
            f"{g}: the hardware runs only full (`groups: 1`) or depthwise convolutions, where "
            f"groups = input channels = output channels; this layer has {layer.in_channels} "
            f"input and {layer.out_channels} output channels.",
        )
    if layer.flatten:
        yield ctx.error(layer, "flatten", f"cannot be combined with `groups: {g}`.")
    if layer.bias_group is not None:
        yield ctx.error(
            layer,
            "bias_group",
            "cannot be chosen for a depthwise layer (its bias values are spread over all of "
            "its quadrants); remove `bias_group`.",
        )
    yield from _depthwise_alignment(ctx, layer)


def _depthwise_alignment(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    out_map = ctx.output_map(layer)
    if out_map and ffs(out_map) % 4:
        key, origin = ctx.output_map_origin(layer)
        yield ctx.error(
            layer,
            key,
            f"{map64(out_map)} (from {origin}) starts at processor {ffs(out_map)}; a depthwise "
            "layer's output must start at a multiple of 4 (0, 4, 8, ...).",
        )
    pmap = layer.processors
    if pmap and ffs(pmap) % 4 and (pmap >> ffs(pmap)) >> ctx.device.processors_per_group:
        yield ctx.error(
            layer,
            "processors",
            f"{map64(pmap)} spans quadrants but starts at processor {ffs(pmap)}; a depthwise "
            "layer spanning quadrants must start at a multiple of 4.",
        )


def weight_format(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if layer.binary and not ctx.device.supports_binary_weights:
        yield ctx.error(
            layer,
            "quantization",
            f"binary (-1/+1) weights are not supported on the {ctx.device.name}; use "
            "`quantization` 1, 2, 4 or 8.",
        )
    if (
        layer.has_weights
        and not layer.binary
        and layer.quantization == 1
        and any(other.binary for other in ctx.layers)
    ):
        yield ctx.error(
            layer,
            "quantization",
            "1-bit weights (0/-1) cannot be used in a network that also has binary (-1/+1) "
            "weights: the device interprets all 1-bit weights one way; use 2-bit weights here.",
        )
    if layer.spec.bypass and not ctx.device.supports_kernel_bypass:
        yield ctx.error(
            layer,
            "bypass",
            f"kernel bypass is not supported on the {ctx.device.name}; remove `bypass`.",
        )


def output_shift(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_output_shift
    if layer.operation == "none":
        if layer.output_shift:
            yield ctx.error(
                layer,
                "output_shift",
                f"{layer.output_shift}: a layer without convolution cannot shift its output; "
                "remove `output_shift`.",
            )
        return
    if not -limit <= layer.output_shift <= limit:
        implicit = 0 if layer.spec.bypass else 8 - layer.quantization
        bits = "binary" if layer.binary else f"{layer.quantization}-bit"
        yield ctx.error(
            layer,
            "output_shift",
            f"{layer.output_shift - implicit} is outside the range {bits} weights allow, "
            f"[{-limit - implicit}, +{limit - implicit}] (the hardware shifts by at most "
            f"{limit}, and {bits} weights already add {implicit}).",
        )
