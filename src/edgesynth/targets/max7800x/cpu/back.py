"""The accelerator taking a split network back after its Cortex-M4 part (issue 25): the
operators after the CPU part compiled as a second accelerator program, a configuration of its
own (emitted in `segment2/`). Its input is the CPU part's result, requantized to the scale its
quantizer gives its input; its known answer's input is the CPU part's known answer (the first
program's known answer through the CPU part), so the three known answers form one chain."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.base import CompileOptions, Program

if TYPE_CHECKING:
    from edgesynth.ir import graph as g
    from edgesynth.targets.max7800x.cpu.program import CpuProgram
    from edgesynth.targets.max7800x.cpu.split import Split
    from edgesynth.targets.max7800x.device import Device
    from edgesynth.targets.max7800x.pipeline import Built

SEGMENT = "segment2"  # the later accelerator program's folder inside the emitted folder
P = TypeVar("P", bound=Program)


def lower_back(
    lower: Callable[[g.Graph, CompileOptions, Split | None], P],
    device: Device,
    graph: g.Graph,
    split: Split,
    options: CompileOptions,
    first: tuple[g.Graph, Built],
) -> tuple[CpuProgram, P]:
    """The CPU part of `split` (which has `back`) and the accelerator program after it
    (`lower`: the target's lowering of a float graph at a split; `first`: the accelerator's
    first part, quantized, and its built network)."""
    from edgesynth.targets.max7800x.cpu.hook import cpu_part
    from edgesynth.targets.max7800x.cpu.lower import values
    from edgesynth.targets.max7800x.cpu.simulate import simulate as run_cpu
    from edgesynth.targets.max7800x.cpu.split import find_split
    from edgesynth.targets.max7800x.network_sim import simulate

    rest, result = split.back, split.result
    assert rest is not None and result is not None and options.calibration is not None
    shape = rest.tensors[rest.inputs[0]].shape
    calibration = values(graph, np.asarray(options.calibration), result)
    calibration = calibration.reshape(len(calibration), *shape)
    probe = lower(rest, CompileOptions(calibration), find_split(rest, device))
    takes = probe.graph.tensors[probe.graph.inputs[0]].qtype
    quantized, built = first
    cpu = cpu_part(graph, split, options.calibration, quantized, device, takes)
    out = simulate(built.network, built.sample)[-1].output
    sample = run_cpu(cpu, np.asarray(out)[None])[0].reshape(shape)
    then = lower(rest, CompileOptions(calibration, {"sample": sample}), find_split(rest, device))
    if getattr(then, "cpu", None) is not None:
        raise EdgesynthError(  # caught: the CPU part then runs to the end
            "the accelerator's second program would leave it again (one return is supported)"
        )
    return cpu, then


def back_notes(split: Split) -> list[str]:
    """What `compile` prints about the accelerator's second program (`plan` adds its
    estimate, and its own notes)."""
    assert split.back is not None
    names = ", ".join(f"`{n.name}`" for n in split.back.nodes if not n.name.endswith("/flatten"))
    lines = [f"  CNN accelerator again ({SEGMENT}/project, reading `{split.result}` "
             f"as the Cortex-M4 part leaves it in data memory): {names}"]  # fmt: skip
    return lines
