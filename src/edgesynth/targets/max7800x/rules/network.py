"""Entry points, and the registry that runs every rule; the layer-count and sequence rules.

The rules are small functions listed in `LAYER_RULES` (called once per executed layer) and
`NETWORK_RULES` (called once per network: whole-network resources, global options); the global
rules (`GLOBAL_RULES`, options and device features) are network rules too. Every rule runs, so one
pass reports every problem. The lists keep the order the rules report in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer, Network
from edgesynth.targets.max7800x.description.spec import LayerSpec, NetworkSpec
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.rules import (
    convolution,
    features,
    layers,
    memory,
    processors,
    streaming,
)
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.memory import bad_offsets
from edgesynth.targets.max7800x.rules.options import RuleOptions, rule_options
from edgesynth.targets.max7800x.rules.text import offset_message, too_many_layers

LayerRule = Callable[[Context, Layer], Iterable[EdgesynthError]]
NetworkRule = Callable[[Context], Iterable[EdgesynthError]]


def find_violations(
    net: Network, device: Device, options: RuleOptions | None = None
) -> list[EdgesynthError]:
    """Every violated device rule, in layer order, without raising.

    `options`: the `rules` group of the options (None: the defaults).
    """
    ctx = Context(net, device, rule_options(options))
    found: list[EdgesynthError] = []
    for rule in NETWORK_RULES:
        found.extend(rule(ctx))
    for layer in ctx.layers:
        for layer_check in LAYER_RULES:
            found.extend(layer_check(ctx, layer))
    found.sort(key=lambda e: -1 if e.layer is None else e.layer)
    return found


def geometry_violations(
    net: Network, device: Device, options: RuleOptions | None = None
) -> list[EdgesynthError]:
    """Only the `GEOMETRY_RULES`: what no placement changes (kernel sizes, padding, strides,
    dilation, what a layer without convolution cannot do), for a network whose placement is
    still to be chosen."""
    ctx = Context(net, device, rule_options(options))
    return [e for layer in ctx.layers for rule in GEOMETRY_RULES for e in rule(ctx, layer)]


def check_network(net: Network, device: Device, options: RuleOptions | None = None) -> None:
    """Raise every violated device rule at once (nothing when the network fits the device)."""
    _raise_all(find_violations(net, device, options))


def spec_violations(spec: NetworkSpec, device: Device) -> list[EdgesynthError]:
    """The rules that need only the YAML (before weights and shapes are known).

    The vendor checks these first, so a network too broken to build is still refused for them:
    the number of layers and the `out_offset`/`in_offset` ranges.
    """
    found: list[EdgesynthError] = []
    if len(spec.layers) > device.max_layers:
        found.append(
            _spec_error(
                spec,
                spec.layers[device.max_layers],
                None,
                too_many_layers(len(spec.layers), device),
            )
        )
    for ls in spec.layers:
        for key, value in bad_offsets(ls, device):
            found.append(_spec_error(spec, ls, key, offset_message(value, device)))
    return found


def check_spec(spec: NetworkSpec, device: Device) -> None:
    """Raise the `spec_violations` (call before building the network)."""
    _raise_all(spec_violations(spec, device))


def _raise_all(errors: list[EdgesynthError]) -> None:
    """Raise the single error, or all of them together (nothing when there are none)."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MultipleErrors(errors)


def _spec_error(spec: NetworkSpec, ls: LayerSpec, key: str | None, message: str) -> EdgesynthError:
    line = ls.lines.get(key, ls.line) if key else ls.line
    return EdgesynthError(
        message, file=spec.path, line=line, layer=ls.index, layer_name=ls.name, key=key
    )


def option_violations(
    net: Network, device: Device, options: RuleOptions | None = None
) -> list[EdgesynthError]:
    """Only the global rules: options and network-wide features the device may lack."""
    ctx = Context(net, device, rule_options(options))
    found: list[EdgesynthError] = []
    for rule in GLOBAL_RULES:
        found.extend(rule(ctx))
    return found


def yaml_layer_count(ctx: Context) -> Iterator[EdgesynthError]:
    limit = ctx.device.max_layers
    if len(ctx.net.layers) > limit:
        layer = ctx.net.layers[limit]
        yield ctx.error(layer, None, too_many_layers(len(ctx.net.layers), ctx.device))


def avgpool_reset_layers(ctx: Context) -> list[int]:
    """Layers before which the MAX78002 inserts a hidden layer (average pool after eltwise)."""
    if not ctx.device.requires_avgpool_reset_after_eltwise:
        return []
    result = []
    for layer in ctx.layers:
        previous = ctx.previous.get(layer.index, -1)
        if (
            layer.index > 0
            and previous >= 0
            and ctx.layer(previous).operands > 1
            and layer.pool_type == "avg"
        ):
            result.append(layer.index)
    return result


def hardware_layer_count(ctx: Context) -> Iterator[EdgesynthError]:
    hidden = len(avgpool_reset_layers(ctx))
    repeat = max(1, ctx.options.repeat_layers)
    used = repeat * (ctx.final + hidden)
    if used > ctx.device.max_layers and len(ctx.net.layers) <= ctx.device.max_layers:
        extra = (
            f" plus {hidden} hidden layer(s) the device inserts to reset average pooling after "
            "an element-wise layer"
            if hidden
            else ""
        )
        times = f", repeated {repeat} times" if repeat > 1 else ""
        yield ctx.error(
            ctx.layer(ctx.final),
            None,
            f"the network ends at layer {ctx.final}{extra}{times}, which needs {used} hardware "
            f"layers; the {ctx.device.name} has {ctx.device.max_layers}.",
        )


def sequence_support(ctx: Context, layer: Layer) -> Iterator[EdgesynthError]:
    if ctx.device.supports_link_layer:
        return
    following = layer.next_sequence
    if following not in (None, -1, layer.index + 1):
        yield ctx.error(
            layer,
            "next_sequence",
            f"jumps to layer {following}, but the {ctx.device.name} runs layers in order "
            f"only; remove `next_sequence` (the next layer is {layer.index + 1}) or use the "
            "MAX78002.",
        )
    later = [i for i in layer.in_sequences if i != NETWORK_INPUT and i >= layer.index]
    if later:
        yield ctx.error(
            layer,
            "in_sequences",
            f"reads the output of layer {later[0]}, which runs after this one on the "
            f"{ctx.device.name}; `in_sequences` may only name earlier layers (or -1 for the "
            "input) on this device.",
        )


# ------------------------------------------------------------------------------------------------
# The registry (the order of each list is the order violations of one layer are reported in)

LAYER_RULES: list[LayerRule] = [
    sequence_support,
    convolution.kernel_size,
    convolution.padding,
    convolution.transpose_padding,
    convolution.stride,
    convolution.dilation,
    convolution.groups,
    convolution.weight_format,
    convolution.output_shift,
    layers.pooling,
    layers.eltwise,
    layers.multipass_eltwise,
    layers.flatten,
    layers.flatten_passes,
    layers.passthrough,
    layers.output_width,
    processors.dimensions,
    processors.channel_counts,
    processors.input_processors,
    processors.output_processors,
    processors.data_format,
    memory.input_memory,
    memory.output_memory,
    convolution.padded_multipass_conv1d,
    memory.write_gap,
    memory.read_gap,
    memory.calcx4_multipass,
    memory.read_ahead_instances,
    streaming.streaming_sequence,
]

# The layer rules no placement changes: checked before the placer runs.
GEOMETRY_RULES: list[LayerRule] = [
    convolution.kernel_size,
    convolution.padding,
    convolution.transpose_padding,
    convolution.stride,
    convolution.dilation,
    layers.flatten_passes,
    layers.passthrough_output,
]

GLOBAL_RULES: list[NetworkRule] = [
    features.device_features,
    features.start_layer,
    features.fifo_input,
    features.snoop_links,
]

NETWORK_RULES: list[NetworkRule] = [
    yaml_layer_count,
    hardware_layer_count,
    memory.offset_ranges,
    streaming.streaming_buffers,
    streaming.streaming_delta,
    memory.quadrant_zero,
    memory.bias_group_quadrants,
    memory.kernel_memory,
    memory.bias_memory,
    *GLOBAL_RULES,
]
