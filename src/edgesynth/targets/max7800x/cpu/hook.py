"""What the MAX7800x target calls for a split network: the split, the CPU program and its
checks, the partition it reports, and the CPU part's files in the emitted folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesynth.ir import graph as g
from edgesynth.targets.base import TensorFormat
from edgesynth.targets.max7800x.cpu.emit import estimate
from edgesynth.targets.max7800x.cpu.memory import check_memory
from edgesynth.targets.max7800x.cpu.program import CpuProgram
from edgesynth.targets.max7800x.cpu.split import Split, find_split
from edgesynth.targets.max7800x.device import Device

__all__ = ["cpu_notes", "cpu_output", "cpu_part", "emit_cpu_part", "find_split"]

PROJECT = "project"


def cpu_part(
    graph: g.Graph, split: Split, calibration: np.ndarray, prefix: g.Graph, device: Device
) -> CpuProgram:
    """The CPU program of `split` (`prefix`: the accelerator's part, quantized), checked
    against the chip's SRAM and flash."""
    from edgesynth.targets.max7800x.cpu.lower import lower_suffix

    qtype = prefix.tensors[prefix.outputs[0]].qtype or g.INT8
    program = lower_suffix(graph, split, calibration, qtype)
    check_memory(program, device.name, split.cut)
    return program


def cpu_output(program: CpuProgram, graph: g.Graph) -> TensorFormat:
    """The network's result as the CPU part returns it."""
    bits = program.out_bits
    qtype = g.QType(bits, True, program.out_scale)
    name = program.layers[-1].name if program.layers else graph.outputs[0]
    return TensorFormat.of(name, (program.out_size,), qtype)


def cpu_notes(split: Split, program: CpuProgram, device: Device) -> list[str]:
    """Which operators run where, and the CPU part's estimated cycles."""
    from edgesynth.targets.max7800x.commands.firmware import MEMORY

    first = split.suffix[0]
    moved = next((n for n in split.suffix if not isinstance(n, g.Flatten | g.Reshape)), first)
    on_chip = ", ".join(f"`{n.name}`" for n in split.prefix.nodes)
    on_cpu = ", ".join(f"`{n.name}`" for n in split.suffix)
    cycles = sum(c.cycles for c in estimate(program))
    mhz = MEMORY[device.name].core_clock / 1e6
    return [
        f"`{moved.name}` ({moved.op}): {split.reason}: the network is split there; the CNN "
        f"accelerator runs {on_chip}; the Cortex-M4 runs {on_cpu} (project/cpu_part.c, on the "
        f"accelerator's output `{split.cut}` as cnn_unload() leaves it)",
        f"the Cortex-M4 part takes an estimated {cycles:,} cycles ({cycles / mhz / 1000:.2f} ms "
        f"at {mhz:g} MHz; an instruction-count model of its loops, not a measurement)",
    ]


def emit_cpu_part(
    program: CpuProgram, accelerator_output: np.ndarray, folder: Path, texts: dict[str, str],
    device: str,
) -> list[str]:  # fmt: skip
    """Add `cpu_part.c`/`.h` to the project's `texts` (the known answer: the CPU part on the
    accelerator's known answer) and write the CPU program's files (`edgesynth run` reads them)."""
    from edgesynth.targets.max7800x.cpu.emit import render_cpu_part
    from edgesynth.targets.max7800x.cpu.simulate import simulate

    expected = simulate(program, np.asarray(accelerator_output)[None])[0]
    texts.update(render_cpu_part(program, PROJECT, device, expected))
    return program.save(folder)
