"""The whole plan: hardware layers, kernel and bias memory, register writes, input, known answer.

`make_plan(result, options)` takes a synthesized network (its layers, sample and simulated
outputs) and the typed options (`options.Max7800xOptions`) and returns a `Plan` the code
generator renders and the user can inspect (`Plan.summary()`, the vendor's per-layer
configuration table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.plan.bias import BiasMemory, plan_bias
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer, build_hw_layers
from edgesynth.targets.max7800x.plan.inputs import InputPlan, plan_input
from edgesynth.targets.max7800x.plan.kat import KatBlock, expected_words, kat_blocks
from edgesynth.targets.max7800x.plan.kernel_loader import KernelBlock, kernel_blocks
from edgesynth.targets.max7800x.plan.kernels import KernelOptions, plan_kernels
from edgesynth.targets.max7800x.plan.latency import Latency, estimate
from edgesynth.targets.max7800x.plan.registers import configure_writes, init_writes, start_writes
from edgesynth.targets.max7800x.plan.settings import PlanSettings
from edgesynth.targets.max7800x.plan.streaming import stream_registers
from edgesynth.targets.max7800x.plan.writes import Writes

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.options import Max7800xOptions


@dataclass
class Plan:
    """Every write the generated C makes, by the function that makes it, and what decided them."""

    settings: PlanSettings
    init: Writes
    configure: Writes
    start: Writes
    go: Writes
    kernels: list[KernelBlock]
    inputs: InputPlan
    kat: list[KatBlock]
    output_shape: tuple[int, ...]
    latency: Latency | None = None

    @property
    def bias(self) -> BiasMemory:
        return self.settings.bias

    def per_layer(self, value) -> list:
        """`value(index)` for every layer 0..final as the vendor lists them."""
        return [value(i) for i in range(self.settings.layer_count)]

    @property
    def kernel_offsets(self) -> list[int]:
        layouts = self.settings.kernels.layouts
        return self.per_layer(lambda i: layouts[i].offset if i in layouts else 0)

    @property
    def kernel_lengths(self) -> list[int]:
        layouts = self.settings.kernels.layouts
        return self.per_layer(lambda i: layouts[i].length if i in layouts else 0)

    @property
    def kernel_counts(self) -> list[int]:
        layouts = self.settings.kernels.layouts
        return self.per_layer(lambda i: layouts[i].count if i in layouts else 0)

    @property
    def bias_quadrants(self) -> list[int | str | None]:
        return self.per_layer(lambda i: self.bias.group.get(i))

    @property
    def bias_offsets(self) -> list[list[int | None]]:
        groups = self.settings.chip.groups
        return self.per_layer(lambda i: self.bias.offsets.get(i, [None] * groups))

    @property
    def hw(self) -> list[HwLayer]:
        return self.settings.hw


def _groups_used(hw: list[HwLayer], final: HwLayer, chip: Chip) -> list[int]:
    used = 0
    for h in hw:
        used |= h.processor_map
    used |= final.output_processor_map
    return [g for g in range(chip.groups) if chip.group_bits(used, g)]


def make_plan(result: SynthesisResult, opts: Max7800xOptions) -> Plan:
    try:
        return _make_plan(result, opts)
    except EdgesynthError as err:
        err.file = err.file or result.network.spec.path
        raise


def _make_plan(result: SynthesisResult, opts: Max7800xOptions) -> Plan:
    net = result.network
    chip = Chip.of(net_device(net), opts.rules.max_proc)
    build = opts.build
    stop = None if build.stop_after is None else build.stop_after - build.skip_yaml_layers
    hw = build_hw_layers(net, chip, opts.rules, stop, not opts.plan.no_deduplicate_weights)
    by_index = {h.index: h for h in hw}
    order = net.order
    first, final = order[0], order[-1]
    processor_map_0 = by_index[first].processor_map
    if opts.rules.fast_fifo_quad:
        m = processor_map_0
        by_index[first].processor_map = m << 48 | m << 32 | m << 16 | m
    terminating = net.sim_order[-1] if net.sim_order else final
    groups_used = _groups_used(hw, by_index[final], chip)
    if 0 not in groups_used:
        raise EdgesynthError(
            "quadrant 0 is not used by any layer; the accelerator needs it (the vendor tool "
            "refuses this too). Move a layer's processors into processors 0-15.",
            file=net.spec.path,
        )
    fifo_group = bool(opts.rules.fast_fifo)
    if opts.rules.fast_fifo and processor_map_0 != 1 and processor_map_0 & 0x0E == 0:
        fifo_group = False
    s = PlanSettings(
        chip=chip,
        opts=opts,
        net_spec=net.spec,
        hw=hw,
        first=first,
        final=final,
        terminating=terminating,
        layer_count=max(order) + 1,
        groups_used=groups_used,
        processor_map_0=processor_map_0,
        pipeline=bool(opts.rules.pipeline),
        any_bias=any(layer.bias is not None for layer in net.layers[: max(order) + 1]),
        binary=any(h.quantization == -1 for h in hw),
        fifo_group=fifo_group,
    )
    s.kernels = plan_kernels(
        hw,
        chip,
        KernelOptions(
            weight_start=opts.plan.weight_start,
            legacy_kernels=opts.plan.legacy_kernels,
            fast_fifo_quad=opts.rules.fast_fifo_quad,
            zero_sram=opts.plan.zero_sram,
            write_for_write=opts.write_for_write,
        ),
    )
    s.bias = plan_bias(hw, chip, groups_used, opts.rules.fast_fifo_quad)
    s.streams = stream_registers(s)
    init = init_writes(s)
    configure = configure_writes(s)
    start, go = start_writes(s)
    kernels = kernel_blocks(s.kernels, chip, opts.plan.mexpress, opts.plan.zero_sram)
    inputs = plan_input(s, result.sample)
    outputs = {r.index: r.output for r in result.layers}
    entries: list[tuple[int, int, int]] = []
    for index in net.sim_order or order:
        h = by_index.get(index)
        if h is None:
            continue
        if (
            h.layer.output
            or index == terminating
            or (not any(layer.output for layer in net.layers) and index == final)
        ):
            entries.extend(expected_words(h, s, outputs[index]))
    kat = kat_blocks(entries, opts.plan.max_count)
    return Plan(
        settings=s,
        init=init,
        configure=configure,
        start=start,
        go=go,
        kernels=kernels,
        inputs=inputs,
        kat=kat,
        output_shape=tuple(result.output.shape),
        latency=estimate(s, net.sim_order or order),
    )


def net_device(net):
    from edgesynth.targets.max7800x.device import get_device

    return get_device(net.device)
