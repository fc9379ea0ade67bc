"""What the MAX7800x target calls for a split network: the split, the CPU program and its
checks, the partition it reports, and the CPU part's files in the emitted folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.ir import graph as g
from edgesynth.targets.base import TensorFormat
from edgesynth.targets.max7800x.cpu.emit import LayerCost, estimate
from edgesynth.targets.max7800x.cpu.memory import check_memory
from edgesynth.targets.max7800x.cpu.program import CpuProgram
from edgesynth.targets.max7800x.cpu.split import Split, find_split
from edgesynth.targets.max7800x.device import Device

if TYPE_CHECKING:
    from edgesynth.proof import Proof
    from edgesynth.targets.max7800x.options import Max7800xOptions
    from edgesynth.targets.max7800x.placement.verify import RunResult
    from edgesynth.targets.max7800x.plan.plan import Plan

__all__ = ["cpu_notes", "cpu_output", "cpu_part", "emit_cpu_part", "find_split", "prove_cpu"]

PROJECT = "project"


def cpu_part(
    graph: g.Graph,
    split: Split,
    calibration: np.ndarray,
    prefix: g.Graph,
    device: Device,
    back: g.QType | None = None,
) -> CpuProgram:
    """The CPU program of `split` (`prefix`: the accelerator's part, quantized; `back`: the
    codes the accelerator takes back), checked against the chip's SRAM and flash."""
    from edgesynth.targets.max7800x.cpu.lower import lower_suffix

    qtype = prefix.tensors[prefix.outputs[0]].qtype or g.INT8
    program = lower_suffix(graph, split, calibration, qtype, back)
    check_memory(program, device.name, split.cut)
    return program


def cpu_output(program: CpuProgram, graph: g.Graph) -> TensorFormat:
    """The network's result as the CPU part returns it."""
    bits = program.out_bits
    qtype = g.QType(bits, True, program.out_scale)
    name = program.layers[-1].name if program.layers else graph.outputs[0]
    return TensorFormat.of(name, (program.out_size,), qtype)


def cpu_notes(split: Split, program: CpuProgram, device: Device) -> list[str]:
    """What `compile` prints: where the network splits, which operators run where, and the
    Cortex-M4 part's estimated cycles per layer and in all."""
    from edgesynth.targets.max7800x.commands.firmware import MEMORY

    moved = next((n for n in split.suffix if not isinstance(n, g.Flatten | g.Reshape)), None)
    order = estimate(program)
    costs = {c.name: c for c in order}
    lines = [
        f"split at `{moved.name if moved else split.cut}` ({split.reason}):",
        "  CNN accelerator: " + ", ".join(f"`{n.name}`" for n in split.prefix.nodes),
        f"  Cortex-M4 (project/cpu_part.c, reading `{split.cut}` as cnn_unload() leaves it):",
    ]
    nodes = {n.name for n in split.suffix} | {"softmax"}
    extra = [c for c in order if c.name not in nodes]  # the requantizations operators need
    for node in split.suffix:
        cost = costs.get("softmax" if isinstance(node, g.Softmax) else node.name)
        while cost and extra and order.index(extra[0]) < order.index(cost):
            lines.append(_cost_line(extra.pop(0)))
        what = f"~{cost.cycles:,} cycles" if cost else "no code (the buffer is read as it is)"
        lines.append(f"    `{node.name}` ({node.op}): {what}")
    lines += [_cost_line(c) for c in extra]
    cycles = sum(c.cycles for c in costs.values())
    mhz = MEMORY[device.name].core_clock / 1e6
    lines.append(
        f"  Cortex-M4 estimate: {cycles:,} cycles, {cycles / mhz / 1000:.2f} ms at {mhz:g} MHz "
        "(an instruction-count model of the generated loops, not a measurement)"
    )
    return lines


def _cost_line(cost: LayerCost) -> str:
    return f"    `{cost.name}` ({cost.kind}): ~{cost.cycles:,} cycles"


def accelerator_note(project: Plan, options: Max7800xOptions, device: str) -> list[str]:
    """The accelerator part's estimated cycles (the latency model; MAX78000 only)."""
    from edgesynth.targets.max7800x.emit.project import clocking

    if project.latency is None:
        return []
    clock = clocking(options, device)
    cycles = project.latency.total
    return [
        f"  CNN accelerator estimate: {cycles:,} cycles, {cycles / clock.mhz / 1000:.3f} ms at "
        f"{clock.mhz:g} MHz (the accelerator's latency model)"
    ]


def split_latency(
    cnn_cycles: int, cnn_hz: int, program: CpuProgram, device: str
) -> tuple[int, int]:
    """The accelerator's estimate and the Cortex-M4 part's, one after the other, as cycles of
    the Cortex-M4's clock (and that clock)."""
    from edgesynth.targets.max7800x.commands.firmware import MEMORY

    cpu_hz = MEMORY[device].core_clock
    cpu_cycles = sum(c.cycles for c in estimate(program))
    return round(cnn_cycles * cpu_hz / cnn_hz) + cpu_cycles, cpu_hz


def emit_cpu_part(
    program: CpuProgram, accelerator_output: np.ndarray, folder: Path, texts: dict[str, str],
    device: str, back: bool = False,
) -> list[str]:  # fmt: skip
    """Add `cpu_part.c`/`.h` to the project's `texts` (the known answer: the CPU part on the
    accelerator's known answer; `back`: the accelerator takes the result back, and segment2.c
    checks it) and write the CPU program's files (`edgesynth run` reads them)."""
    from edgesynth.targets.max7800x.cpu.emit import render_cpu_part
    from edgesynth.targets.max7800x.cpu.simulate import simulate

    expected = None if back else simulate(program, np.asarray(accelerator_output)[None])[0]
    texts.update(render_cpu_part(program, PROJECT, device, expected, back=back))
    return program.save(folder)


def prove_cpu(program: CpuProgram, project: Path, run: RunResult) -> Proof:
    """The proof of the project's cpu_part.c: built for this PC, it computes what the CPU
    part's simulator computes on the accelerator's output from the proof run (`run`)."""
    from edgesynth.proof import DEFECT_REMEDY
    from edgesynth.targets.max7800x.cpu.host import prove_cpu_part
    from edgesynth.targets.max7800x.placement.verify import run_output

    return prove_cpu_part(program, project, run_output(run), DEFECT_REMEDY)
