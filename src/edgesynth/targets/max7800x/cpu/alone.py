"""`compile --cpu-only`: the whole float network as the Cortex-M4's integer program (the CPU part
with no accelerator layers before it: `split.whole_network`), its project and its estimate
beside the accelerator's (the comparison ai8x-synthesis #361 asks for).

The input is quantized to int8 codes on one scale (the calibration data's largest magnitude is
127 codes); the rest is `lower.lower_suffix`, as for the layers after a split. The project:
main.c (the sample input, cpu_part() and its known-answer check), cpu_part.c/.h, softmax.c, a
small cnn.h (the names cpu_part.c and softmax.c take from it) and the Makefile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgesynth.ir import graph as g
from edgesynth.targets.max7800x.commands.firmware import MEMORY
from edgesynth.targets.max7800x.cpu.emit import estimate
from edgesynth.targets.max7800x.cpu.program import CpuProgram
from edgesynth.targets.max7800x.device import Device

if TYPE_CHECKING:
    from edgesynth.targets.base import TargetSummary

PROJECT = "project"
SOURCES = "main.c cpu_part.c softmax.c"  # the Makefile's


def lower_whole(graph: g.Graph, calibration: np.ndarray, device: Device) -> CpuProgram:
    """The whole float `graph` as one CPU program, checked against the chip's SRAM and flash."""
    from edgesynth.targets.max7800x.cpu.lower import lower_suffix
    from edgesynth.targets.max7800x.cpu.memory import check_memory
    from edgesynth.targets.max7800x.cpu.split import whole_network

    split = whole_network(graph, device)
    top = float(np.max(np.abs(np.asarray(calibration, np.float64)), initial=0.0))
    program = lower_suffix(graph, split, calibration, g.QType(8, True, (top or 1.0) / 127))
    check_memory(program, device.name, split.cut)
    return program


def cycles(program: CpuProgram) -> int:
    return sum(c.cycles for c in estimate(program))


def _time(count: int, hz: float) -> str:
    return f"{count / hz * 1000:.3f} ms at {hz / 1e6:g} MHz"


def alone_notes(program: CpuProgram, device: str, accelerator: str) -> list[str]:
    """What `compile --cpu-only` prints: each layer's estimated cycles, the total, and
    `accelerator` (the same network with the CNN accelerator, `accelerator_line`)."""
    hz = MEMORY[device].core_clock
    lines = ["--cpu-only: the whole network on the Cortex-M4 (project/cpu_part.c), no CNN "
             "accelerator layers:"]  # fmt: skip
    lines += [f"    `{c.name}` ({c.kind}): ~{c.cycles:,} cycles" for c in estimate(program)]
    lines.append(
        f"  Cortex-M4 estimate: {cycles(program):,} cycles, {_time(cycles(program), hz)} (an "
        "instruction-count model of the generated loops, not a measurement)"
    )
    return [*lines, accelerator]


def accelerator_line(cnn_cycles: int | None, clock_hz: int | None, cpu: int, device: str) -> str:
    """The accelerator's side for `--cpu-only` (`cnn_cycles`: the compiled program's estimate
    in cycles of `clock_hz`, the Cortex-M4's part included when the network splits)."""
    head = "  with the CNN accelerator (compile without --cpu-only): "
    if cnn_cycles is None or not clock_hz:
        return head + "no estimate (the accelerator's latency model is the MAX78000's only)"
    hz = MEMORY[device].core_clock
    ratio = cpu / hz / (cnn_cycles / clock_hz)
    return (
        head + f"{cnn_cycles:,} cycles, {_time(cnn_cycles, clock_hz)} (its latency model"
        f"{', the Cortex-M4 part included' if clock_hz == hz else ''}): --cpu-only takes "
        f"{ratio:,.1f} times as long"
    )


def refused_line(message: str) -> str:
    return f"  with the CNN accelerator: none (compiling without --cpu-only fails: {message})"


def whole_line(program: CpuProgram, device: str) -> str:
    """For a split network: the whole network on the Cortex-M4 (what --cpu-only makes)."""
    hz = MEMORY[device].core_clock
    count = cycles(program)
    return (
        f"  the whole network on the Cortex-M4 (--cpu-only): ~{count:,} cycles, "
        f"{_time(count, hz)} (the same instruction-count model)"
    )


def _word_lines(words: np.ndarray, per_line: int = 8) -> list[str]:
    flat = [f"0x{int(w):08x}" for w in words]
    return [", ".join(flat[i : i + per_line]) + "," for i in range(0, len(flat), per_line)]


def project_texts(
    program: CpuProgram, sample: np.ndarray, device: str, board: str
) -> dict[str, str]:
    """The --cpu-only project's files; the known answer: the simulator on `sample` (codes)."""
    from edgesynth.targets.max7800x.cpu.emit import render_cpu_part
    from edgesynth.targets.max7800x.cpu.host import unload_words
    from edgesynth.targets.max7800x.cpu.simulate import simulate
    from edgesynth.targets.max7800x.emit.project import render

    x = np.asarray(sample, np.int64).reshape(1, -1)
    texts = render_cpu_part(program, PROJECT, device, simulate(program, x)[0], alone=True)
    texts["cnn.h"] = render("cnn_cpu.h.j2", name=PROJECT)
    texts["softmax.c"] = render("softmax.c.j2", name=PROJECT)
    texts["main.c"] = render(
        "main_cpu.c.j2", name=PROJECT, device=device, inputs=program.in_size,
        input_lines=_word_lines(unload_words(program, x)[0]),
        mhz=f"{MEMORY[device].core_clock / 1e6:g}",
    )  # fmt: skip
    texts["Makefile"] = render(
        "Makefile.j2", name=PROJECT, target=device, board=board, riscv=False,
        arm_sources=SOURCES, riscv_sources="", defines="",
    )  # fmt: skip
    return texts


def whole_note(graph: g.Graph, calibration: np.ndarray, device: Device) -> list[str]:
    """A split network's `whole_line` ([] where the Cortex-M4 cannot run it all)."""
    from edgesynth.errors import EdgesynthError

    try:
        return [whole_line(lower_whole(graph, calibration, device), device.name)]
    except EdgesynthError:
        return []


def alone_summary(program: CpuProgram, macs: int, device: str) -> TargetSummary:
    """What `compile -t all` tabulates of a --cpu-only program: its MACs and estimate."""
    from edgesynth.targets.base import TargetSummary

    return TargetSummary(macs=macs, cycles=cycles(program), clock_hz=MEMORY[device].core_clock)
