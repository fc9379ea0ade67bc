"""The project's Makefile for the MSDK (our own; the variables the MSDK's GCC build reads)."""

from __future__ import annotations

from edgesynth.targets.max7800x.emit.project import render
from edgesynth.targets.max7800x.options import Max7800xOptions
from edgesynth.targets.max7800x.plan.plan import Plan


def sources(opts: Max7800xOptions) -> tuple[list[str], list[str]]:
    """(Arm sources, RISC-V sources) of the project."""
    api = opts.project.api_filename if opts.project.api_filename.lower() != "none" else "cnn.c"
    main = f"{opts.project.c_filename}.c"
    cpu = ["cpu_part.c"] if opts.cpu_part else []
    if opts.cpu_back:  # the second accelerator program (cpu/segment.py)
        cpu += ["segment2.c", "segment2_input.c", "cnn_segment2.c"]
    if opts.rules.riscv:
        return [main], [f"{opts.project.c_filename}_riscv.c", api, "softmax.c", *cpu]
    return [main, api, "softmax.c", *cpu], []


def makefile(plan: Plan, opts: Max7800xOptions, name: str) -> str:
    arm, riscv = sources(opts)
    return render(
        "Makefile.j2",
        name=name,
        target=plan.settings.chip.device.name,
        board=opts.project.board_name,
        riscv=bool(opts.rules.riscv),
        arm_sources=" ".join(arm),
        riscv_sources=" ".join(riscv),
        defines=opts.project.define,
    )
