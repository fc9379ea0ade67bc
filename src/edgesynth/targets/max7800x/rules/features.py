"""Global rules: command-line options and network-wide features the device may lack."""

from __future__ import annotations

from collections.abc import Iterator

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.description.sequence import link_target
from edgesynth.targets.max7800x.rules.context import Context
from edgesynth.targets.max7800x.rules.text import map64, plural
from edgesynth.targets.max7800x.snoop_unit import units_from_words


def device_features(ctx: Context) -> Iterator[EdgesynthError]:
    dev = ctx.device
    for key, supported, flag in (
        ("calcx4", dev.supports_calcx4, ctx.options.calcx4),
        ("readahead", dev.supports_read_ahead, ctx.options.rd_ahead),
    ):
        if supported:
            continue
        option = "--calcx4" if key == "calcx4" else "--read-ahead"
        users = [layer for layer in ctx.layers if getattr(layer.spec, key)]
        if users:
            yield ctx.error(
                users[0],
                key,
                f"`{key}` is not supported on the {dev.name}; remove it"
                + (
                    f" (also set in layers {', '.join(str(u.index) for u in users[1:])})"
                    if len(users) > 1
                    else ""
                )
                + ".",
            )
        elif flag:
            yield ctx.global_error(None, f"`{option}` is not supported on the {dev.name}.")
    if ctx.net.spec.snoop is not None and not dev.supports_snoop:
        yield ctx.global_error("snoop", f"`snoop` is not supported on the {dev.name}; remove it.")
    for option, on, supported in (
        ("--link-layer", ctx.options.link_layer, dev.supports_link_layer),
        ("--fifo-go", ctx.options.fifo_go, dev.supports_fifo_go),
        ("--one-shot", ctx.options.one_shot, dev.supports_oneshot),
        ("--pipeline", bool(ctx.options.pipeline), dev.supports_pipeline),
        ("--pll", bool(ctx.options.pll), dev.supports_pll),
    ):
        if on and not supported:
            yield ctx.global_error(None, f"`{option}` is not supported on the {dev.name}.")


def start_layer(ctx: Context) -> Iterator[EdgesynthError]:
    start = ctx.options.start_layer
    if start == 0:
        return
    dev = ctx.device
    if not dev.supports_link_layer:
        yield ctx.global_error(
            None, f"`--start-layer` is not supported on the {dev.name} (networks start at 0)."
        )
    elif start > dev.max_start_layer:
        yield ctx.global_error(
            None,
            f"`--start-layer {start}`: the {dev.name} can start at layers 0 to "
            f"{dev.max_start_layer}.",
        )
    if any(layer.streaming for layer in ctx.layers):
        yield ctx.global_error(None, "`--start-layer` must be 0 when layers stream.")
    if ctx.options.uses_fifo:
        yield ctx.global_error(None, "`--start-layer` must be 0 when the input uses a FIFO.")


def fifo_input(ctx: Context) -> Iterator[EdgesynthError]:
    first = ctx.layer(ctx.start)
    opts = ctx.options
    if not opts.uses_fifo:
        if first.streaming and not opts.allow_streaming:
            yield ctx.error(
                first,
                "streaming",
                "a streaming first layer reads its input from the FIFOs; add `--fifo` (or "
                "`--fast-fifo`).",
            )
        return
    chw = first.data_format == "CHW"
    channels = first.in_channels
    limit = ctx.device.fifo_channels_chw if chw else ctx.device.fifo_channels_hwc
    if channels > limit or channels > ctx.device.fifo_channels_hwc:
        yield ctx.error(
            first,
            "in_channels",
            f"the input has {channels} channels; the FIFOs take at most "
            f"{ctx.device.fifo_channels_chw} (CHW) or {ctx.device.fifo_channels_hwc} (HWC).",
        )
    allowed = ctx.device.fifo_processors_chw if chw else ctx.device.fifo_processors_hwc
    if first.processors is not None and first.processors & ~allowed:
        yield ctx.error(
            first,
            "processors",
            f"{map64(first.processors)}: FIFO input reaches only processors "
            + ("0, 16, 32 and 48 (CHW)" if chw else "0-3, 16-19, 32-35 and 48-51 (HWC)")
            + f", i.e. a subset of {map64(allowed)}.",
        )
    if opts.uses_fast_fifo:
        yield from _fast_fifo_input(ctx, first)


def _fast_fifo_input(ctx: Context, first: Layer) -> Iterator[EdgesynthError]:
    chw = first.data_format == "CHW"
    limit = ctx.device.fast_fifo_channels_chw if chw else ctx.device.fast_fifo_channels_hwc
    if first.in_channels > limit:
        yield ctx.error(
            first,
            "in_channels",
            f"the fast FIFO takes {plural(limit, 'input channel')} "
            f"({'CHW' if chw else 'HWC'}); this input has {first.in_channels}.",
        )
    if first.output_width != 8:
        yield ctx.error(
            first,
            "output_width",
            f"{first.output_width}: with the fast FIFO the first layer must write 8-bit output.",
        )
    if first.operation == "none":
        yield ctx.error(
            first,
            "operation",
            "with the fast FIFO the first layer must convolve (not a passthrough).",
        )
    if not ctx.options.riscv:
        yield ctx.global_error(None, "`--fast-fifo` requires `--riscv`.")


def snoop_links(ctx: Context) -> Iterator[EdgesynthError]:
    """A `snoop_sequence` link (NXTLYR) is taken only when a snoop unit that gates links (C1 bit
    2) triggered in the layer; with no such unit in `snoop` the accelerator always takes it, so
    a known answer that continues elsewhere fails on the board."""
    if not ctx.device.supports_snoop:
        return
    if any(u.gates_links for u in units_from_words(ctx.net.spec.snoop or [])):
        return
    run = ctx.net.sim_order or ctx.net.order
    for layer in ctx.layers:
        target = link_target(layer)
        if layer.spec.snoop_sequence is None or target is None or layer.index not in run:
            continue  # no `snoop_sequence` link (`next_sequence` links are the run's own)
        position = run.index(layer.index)
        following = run[position + 1] if position + 1 < len(run) else None
        if target in (layer.index + 1, following):
            continue
        what = "stops" if following is None else f"continues with layer {following}"
        yield ctx.error(
            layer,
            "snoop_sequence",
            f"{target} links this layer to layer {target}, and no snoop unit gates links "
            "(`snoop` enables none with C1 bit 2), so the accelerator always takes the link, "
            f"but the known answer {what} (`simulated_sequence`); add a unit that gates links "
            f"to `snoop`, or declare `simulated_sequence: {target}`.",
        )
