"""The placement as a person reads it: data-memory, kernel-memory and bias-memory maps.

`memory_map` lists every tensor: the processors and memory instances that hold it, its byte
range in each instance, the layer that writes it and the last layer that reads it. `kernel_map`
and `bias_map` come from the plan the code generator uses (the kernel allocator's columns, the
bias quadrant and offset), so they show what the firmware will write.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgesynth.targets.max7800x.description.buffers import DATA_BUFFER
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT
from edgesynth.targets.max7800x.placement import Placement
from edgesynth.targets.max7800x.placement.problem import label
from edgesynth.targets.max7800x.placement.solve import block_map
from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.rules import ffs, fls


@dataclass
class TensorPlace:
    """One block of data memory: what it holds and when."""

    names: list[str]
    processors: int  # processor map
    first_byte: int
    end_byte: int  # exclusive
    written_by: str
    last_reader: str
    born: int
    dies: int


def processor_range(pmap: int) -> str:
    low, high = ffs(pmap), fls(pmap)
    return str(low) if low == high else f"{low}-{high}"


def _step_name(placement: Placement, step: int) -> str:
    order = placement.problem.net.order
    if step == 0:
        return "input loader"
    if step > len(order):
        return "host (output)"
    return label(placement.problem.net.layers[order[step - 1]])


def tensors(placement: Placement) -> list[TensorPlace]:
    problem, solution = placement.problem, placement.solution
    net = problem.net
    run = {NETWORK_INPUT, DATA_BUFFER, *(net.sim_order or net.order)}
    result = []
    for block in problem.blocks:
        names = []
        for m in block.members:
            if m.tensor == NETWORK_INPUT:
                c, *dims = net.input_shape
                names.append(f"input {c}x{'x'.join(map(str, dims))}")
            elif m.tensor == DATA_BUFFER:
                buffer = net.spec.data_buffer[0]
                names.append(f"data buffer `{buffer.name}` {buffer.channels}x{block.words}")
            else:
                layer = net.layers[m.tensor]
                dims = "x".join(map(str, layer.out_dim))
                names.append(f"{label(layer)} out {layer.out_channels}x{dims}")
        start = solution.word[block.index] - block.skip_words
        skipped = all(m.tensor not in run for m in block.members)  # a snoop unit skips them
        result.append(
            TensorPlace(
                names=names,
                processors=block_map(problem, block, solution.instance[block.index]),
                first_byte=4 * start,
                end_byte=4 * (solution.word[block.index] + block.words),
                written_by=(
                    "earlier runs"
                    if any(m.tensor == DATA_BUFFER for m in block.members)
                    else _step_name(placement, block.born) + (" (skipped)" if skipped else "")
                ),
                last_reader="-" if skipped else _step_name(placement, block.dies),
                born=block.born,
                dies=block.dies,
            )
        )
    return result


def memory_map(placement: Placement) -> list[str]:
    device = placement.problem.device
    lines = [
        f"data memory ({device.instance_bytes:,} bytes per instance of 4 processors; "
        "byte ranges are within each instance):",
        f"  {'tensor':34} {'processors':>10}  {'bytes':15} {'written by':>18}  last read by",
    ]
    for t in sorted(tensors(placement), key=lambda t: (t.born, t.first_byte)):
        span = f"0x{t.first_byte:05x}-0x{t.end_byte - 1:05x}"
        lines.append(
            f"  {' + '.join(t.names):34} {processor_range(t.processors):>10}  {span:15} "
            f"{t.written_by:>18}  {t.last_reader}"
        )
    return lines


def kernel_map(plan: Plan) -> list[str]:
    s = plan.settings
    lines = [
        f"kernel memory ({s.chip.mask_width(1):,} words of 72 bits per processor):",
        f"  {'layer':24} {'processors':>10}  columns",
    ]
    for h in s.hw:
        layout = s.kernels.layouts.get(h.index)
        if layout is None or not layout.length:
            continue
        cols = f"{layout.offset}-{layout.offset + layout.length - 1}"
        lines.append(f"  {label(h.layer):24} {processor_range(h.processor_map):>10}  {cols}")
    return lines


def bias_map(plan: Plan) -> list[str]:
    s = plan.settings
    lines = ["bias memory (bytes per quadrant):", f"  {'layer':24} quadrant  bytes"]
    for h in s.hw:
        offsets = s.bias.offsets.get(h.index)
        group = s.bias.group.get(h.index)
        if not offsets or group is None:
            continue
        quadrants = range(len(offsets)) if group == "all" else [group]
        for quadrant in quadrants:
            offset = offsets[quadrant]
            if offset is None:
                continue
            end = offset + h.output_chan - 1
            lines.append(f"  {label(h.layer):24} {quadrant:>8}  {offset}-{end}")
    used = ", ".join(f"{u}" for u in s.bias.used)
    lines.append(f"  used per quadrant: {used}")
    return lines


def latency_lines(plan: Plan) -> list[str]:
    if plan.latency is None:
        return ["latency: the vendor has no latency model for this device"]
    rough = " (rough: streaming layers)" if plan.latency.rough else ""
    per_layer = ", ".join(f"{i}: {c:,}" for i, c in plan.latency.layers)
    return [f"estimated latency: {plan.latency.total:,} cycles{rough} ({per_layer})"]
