"""A layer's kernel, padding and pooled size as the hardware runs them, which depend on the
layers around it (a streamed 1x1 convolution runs as 3x3; a dilated Conv1d may run as Conv2d):
what a rule, the planner and the placement read from a `Context`."""

from __future__ import annotations

from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.sizes import dilated_conv1d_mode, hw_input_dim


def emulated_1x1(ctx: Context, layer: Layer) -> bool:
    """A streamed 1x1 Conv2d runs as a 3x3 kernel with padding 1 (first streaming layers)."""
    previous = ctx.previous.get(layer.index, -1)
    return (
        ctx.device.emulates_1x1_streaming
        and layer.index <= ctx.device.max_stream_layers
        and layer.kernel_size == (1, 1)
        and layer.operation in ("conv2d", "convtranspose2d")
        and (layer.streaming or (previous >= 0 and ctx.layer(previous).streaming))
    )


def hw_padding(ctx: Context, layer: Layer) -> tuple[int, int]:
    """Padding as the hardware applies it."""
    full = ctx.device.max_kernel_2d - 1  # the padding of a full-size (3x3) kernel
    if emulated_1x1(ctx, layer) or dilated_conv1d_mode(layer, ctx.device) == "conv2d":
        return (full // 2, full // 2)
    if layer.operation == "convtranspose2d":
        return (full - layer.pad[0], full - layer.pad[1])
    return layer.pad


def hw_kernel(ctx: Context, layer: Layer) -> tuple[int, int]:
    """Kernel rows x columns as the hardware runs them."""
    if emulated_1x1(ctx, layer) or dilated_conv1d_mode(layer, ctx.device) == "conv2d":
        return (ctx.device.max_kernel_2d, ctx.device.max_kernel_2d)
    if dilated_conv1d_mode(layer, ctx.device) == "stretch":
        return ((layer.kernel_size[0] - 1) * layer.dilation[0] + 1, 1)
    return layer.kernel_size


def hw_pooled_dim(ctx: Context, layer: Layer) -> tuple[int, int]:
    if dilated_conv1d_mode(layer, ctx.device) == "conv2d":
        return hw_input_dim(layer, ctx.device)
    return layer.pooled_dim
