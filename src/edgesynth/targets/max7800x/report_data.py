"""What `edgesynth report` shows of a MAX78000/MAX78002 folder, read back from what compile
wrote (network.yaml with the placement and the tests/ arrays): every hardware layer, the data
memory as instances x bytes with each tensor's lifetime, the kernel and bias memory, and the
vendor's latency estimate per layer at the CNN clock."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgesynth.targets.report_model import AddressMap, LayerRow, Region, TargetReport

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.cpu.program import CpuProgram
    from edgesynth.targets.max7800x.description.network import Layer, Network
    from edgesynth.targets.max7800x.device import Device
    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.options import Max7800xOptions
    from edgesynth.targets.max7800x.placement.problem import Problem
    from edgesynth.targets.max7800x.plan.plan import Plan

KERNEL_WORD_BYTES = 9  # one 72-bit kernel word


def _bits(mask: int) -> list[int]:
    return [p for p in range(mask.bit_length()) if mask >> p & 1]


def _span(mask: int | None) -> str:
    bits = _bits(mask or 0)
    if not bits:
        return "-"
    return str(bits[0]) if bits[0] == bits[-1] else f"{bits[0]}-{bits[-1]}"


def _operator(layer: Layer) -> str:
    parts = []
    if layer.pool_type and layer.pool != (1, 1):
        parts.append(f"{layer.pool_type}pool {layer.pool[0]}x{layer.pool[1]}")
    if layer.eltwise:
        parts.append(f"{layer.eltwise} of {layer.operands}")
    if layer.operation != "none":
        k = layer.kernel_size
        parts.append(layer.operation + ("" if layer.operation == "linear" else f" {k[0]}x{k[1]}"))
    if layer.activation:
        parts.append(layer.activation)
    return " + ".join(parts) or "passthrough"


def _macs(layer: Layer) -> int:
    if layer.weights is None or layer.operation == "none":
        return 0
    pixels = layer.out_dim if layer.operation != "convtranspose2d" else layer.pooled_dim
    return int(np.prod(pixels)) * int(layer.weights.size)


def _rows(net: Network, cycles: dict[int, int]) -> list[LayerRow]:
    rows = []
    for index in net.order:
        layer = net.layers[index]
        weights = 0 if layer.weights is None else layer.weights.size * layer.quantization // 8
        rows.append(
            LayerRow(
                index=index,
                name=layer.name,
                operator=_operator(layer),
                in_shape=f"{layer.in_channels}x{layer.in_dim[0]}x{layer.in_dim[1]}",
                out_shape=f"{layer.out_channels}x{layer.out_dim[0]}x{layer.out_dim[1]}",
                macs=_macs(layer),
                weight_bytes=int(weights),
                where=f"processors {_span(layer.processors)}, output to "
                f"{_span(layer.output_processors)}",
                cycles=cycles.get(index),
            )
        )
    return rows


def _step(net: Network, step: int) -> str:
    if step == 0:
        return "the input loader"
    if step > len(net.order):
        return "the host"
    layer = net.layers[net.order[step - 1]]
    return f"layer {layer.index} ({layer.name})"


def _data_map(problem: Problem, device: Device) -> AddressMap:
    from edgesynth.targets.max7800x.placement.solve import block_map

    net, shared = problem.net, device.processors_sharing_memory
    regions = []
    for block in problem.blocks:
        if block.fixed_word is None or block.fixed_processor is None:
            continue
        first = block.fixed_processor // shared
        mask = block_map(problem, block, first)
        names = [_tensor_name(net, m.tensor) for m in block.members]
        for instance in sorted({p // shared for p in _bits(mask)}):
            regions.append(
                Region(
                    lane=f"instance {instance}",
                    start=4 * (block.fixed_word - block.skip_words),
                    end=4 * (block.fixed_word + block.words),
                    name=" + ".join(names),
                    layer=f"written by {_step(net, block.born)}",
                    detail=f"last read by {_step(net, block.dies)}; steps {block.born} to "
                    f"{block.dies}; processors {_span(mask)}",
                )
            )
    instances = device.processors // shared
    return AddressMap(
        title=f"{device.name} data memory: {instances} instances of "
        f"{device.instance_bytes:,} B (4 processors each), the tensors as placed",
        lanes=[f"instance {i}" for i in range(instances)],
        size=device.instance_bytes,
        regions=regions,
        note="a tensor spans the instances of its processors; two tensors may share bytes "
        "when their lifetimes (steps) do not overlap",
    )


def _lifetimes(problem: Problem) -> AddressMap:
    """Each data-memory block from the step that writes it to the last that reads it."""
    net = problem.net
    regions, lanes = [], []
    for block in problem.blocks:
        name = " + ".join(_tensor_name(net, m.tensor) for m in block.members)
        lanes.append(name)
        regions.append(
            Region(
                lane=name,
                start=block.born,
                end=block.dies + 1,
                name=name,
                layer=f"written by {_step(net, block.born)}, last read by "
                f"{_step(net, block.dies)} (steps {block.born} to {block.dies})",
            )
        )
    return AddressMap(
        title="data memory: each tensor's lifetime, from the step that writes it to the last "
        "step that reads it (step 0: the input loader; step k: the k-th layer run)",
        lanes=lanes,
        size=problem.steps + 1,
        regions=regions,
        unit="steps",
    )


def _tensor_name(net: Network, tensor: int) -> str:
    if tensor < 0:
        return "input " + "x".join(map(str, net.input_shape))
    layer = net.layers[tensor]
    return f"layer {tensor} out {layer.out_channels}x{layer.out_dim[0]}x{layer.out_dim[1]}"


def _kernel_map(plan: Plan) -> AddressMap:
    s = plan.settings
    regions = []
    for h in s.hw:
        layout = s.kernels.layouts.get(h.index)
        if layout is None or not layout.length:
            continue
        for p in _bits(h.processor_map):
            regions.append(
                Region(
                    lane=f"processor {p}",
                    start=layout.offset,
                    end=layout.offset + layout.length,
                    name=f"layer {h.index} kernels",
                    layer=f"layer {h.index} ({h.layer.name})",
                    detail=f"{layout.count} kernels in words {layout.offset} to "
                    f"{layout.offset + layout.length - 1}",
                )
            )
    width = s.chip.mask_width(1)
    return AddressMap(
        title=f"kernel memory: {s.chip.max_proc} processors x {width} words of 72 bits",
        lanes=[f"processor {p}" for p in range(s.chip.max_proc)],
        size=width,
        regions=regions,
        unit="words",
    )


def _bias_map(plan: Plan, device: Device) -> AddressMap:
    s = plan.settings
    regions = []
    for h in s.hw:
        offsets, group = s.bias.offsets.get(h.index) or [], s.bias.group.get(h.index)
        if group is None:
            continue
        for quadrant in range(len(offsets)) if group == "all" else [int(group)]:
            offset = offsets[quadrant]
            if offset is None:
                continue
            regions.append(
                Region(
                    lane=f"quadrant {quadrant}",
                    start=offset,
                    end=offset + h.output_chan,
                    name=f"layer {h.index} bias",
                    layer=f"layer {h.index} ({h.layer.name})",
                    detail=f"{h.output_chan} bytes from {offset}",
                )
            )
    return AddressMap(
        title=f"bias memory: {device.groups} quadrants x {device.bias_words_per_group} B",
        lanes=[f"quadrant {q}" for q in range(device.groups)],
        size=device.bias_words_per_group,
        regions=regions,
    )


def collect(target: Any, folder: Path, manifest: dict[str, Any]) -> TargetReport:
    """`target` (a Max7800xTarget) reads the folder back; the plan is made again from it."""
    from edgesynth.targets.max7800x.network_sim import SynthesisResult, simulate

    program = target.load(folder, manifest)
    name = str(manifest.get("network", ""))
    if program.cpu_only:  # --cpu-only: no accelerator layers
        report = TargetReport(manifest["target"], name, str(folder), layers=[])
    else:
        net, opts = program.network, program.options
        result = SynthesisResult(net, program.sample, simulate(net, program.sample, opts.sim))
        report = network_report(result, opts, manifest["target"], name, str(folder))
    if program.cpu is not None:
        rows = cpu_rows(program.cpu, len(report.layers))
        report.layers += rows
        if report.total_cycles is not None or program.cpu_only:
            report.total_cycles = (report.total_cycles or 0) + sum(r.cycles or 0 for r in rows)
        report.notes.append(
            "Cortex-M4 cycles are an instruction-count estimate of the generated loops "
            "(`cpu_part.c`), at the same clock"
        )
    if program.then is not None:
        later = collect(target, folder / "segment2", manifest)
        for row in later.layers:
            row.index += len(report.layers)
            row.where = f"CNN accelerator again (segment2/): {row.where}"
        report.layers += later.layers
        if report.total_cycles is not None and later.total_cycles is not None:
            report.total_cycles += later.total_cycles
    return report


def cpu_rows(cpu: CpuProgram, first: int) -> list[LayerRow]:
    """The Cortex-M4 part's layers (`cpu/`), after the accelerator's: what each computes and
    its estimated cycles."""
    from edgesynth.targets.max7800x.cpu.emit import estimate

    rows, costs = [], estimate(cpu)
    for i, (layer, cost) in enumerate(zip(cpu.layers, costs, strict=False)):
        weights = 0 if layer.weight is None else int(layer.weight.size)
        rows.append(
            LayerRow(
                index=first + i,
                name=cost.name,
                operator=layer.kind + (f" ({layer.function})" if layer.function else ""),
                in_shape="x".join(map(str, layer.in_shape)) or "-",
                out_shape="x".join(map(str, layer.out_shape)) or str(layer.size),
                macs=weights * (layer.size // max(1, len(layer.weight))) if weights else 0,
                weight_bytes=weights,
                where="Cortex-M4 (cpu_part.c)",
                cycles=cost.cycles,
            )
        )
    if len(costs) > len(cpu.layers):  # the softmax on the result
        soft = costs[-1]
        rows.append(
            LayerRow(
                first + len(rows),
                soft.name,
                "softmax",
                str(cpu.out_size),
                str(cpu.out_size),
                where="Cortex-M4 (softmax.c)",
                cycles=soft.cycles,
            )
        )
    return rows


def network_report(
    result: SynthesisResult, opts: Max7800xOptions, target: str, network: str, folder: str
) -> TargetReport:
    """The report of a placed, simulated network (`compile`'s folder read back, or what `synth`
    and `plan` made): its plan made again from it."""
    from edgesynth.targets.max7800x.emit.project import clocking
    from edgesynth.targets.max7800x.placement.problem import build_problem
    from edgesynth.targets.max7800x.plan.plan import make_plan
    from edgesynth.targets.max7800x.summary import kernel_memory

    net, device = result.network, opts.build.device
    plan = make_plan(result, opts)
    cycles = dict(plan.latency.layers) if plan.latency is not None else {}
    used, capacity = kernel_memory(plan)
    problem = build_problem(net, device, opts.rules)
    notes = [] if plan.latency is not None else ["the vendor has no latency model for this chip"]
    return TargetReport(
        target=target,
        network=network,
        folder=folder,
        layers=_rows(net, cycles),
        maps=[
            _data_map(problem, device),
            _lifetimes(problem),
            _kernel_map(plan),
            _bias_map(plan, device),
        ],
        clock_hz=round(clocking(opts, device.name).mhz * 1_000_000) if cycles else None,
        total_cycles=plan.latency.total if plan.latency is not None else None,
        facts={
            "kernel memory": f"{used:,} of {capacity:,} B",
            "bias memory used": ", ".join(f"{u} B" for u in plan.settings.bias.used),
        },
        notes=notes,
    )


def write_page(
    result: SynthesisResult,
    opts: Max7800xOptions,
    path: Path,
    *,
    network: Path,
    overwrite: bool,
    inputs: list,
) -> Path:
    """`synth --report` and `plan --report`: the page of the network they placed."""
    from edgesynth.report.cli import write_report
    from edgesynth.report.model import Report

    device = opts.build.device.name
    target = network_report(result, opts, device.lower(), network.stem, str(network))
    report = Report(title=f"edgesynth report: {network.name} on {device}", targets=[target])
    return write_report(report, path, overwrite=overwrite, inputs=inputs)
