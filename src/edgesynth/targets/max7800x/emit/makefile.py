"""The project's Makefile for the MSDK (our own; the variables the MSDK's GCC build reads)."""

from __future__ import annotations

from typing import Any

from edgesynth.targets.max7800x.emit.project import render
from edgesynth.targets.max7800x.plan.plan import Plan


def sources(opts: Any) -> tuple[list[str], list[str]]:
    """(Arm sources, RISC-V sources) of the project."""
    api = opts.api_filename if opts.api_filename.lower() != "none" else "cnn.c"
    main = f"{opts.c_filename}.c"
    if opts.riscv:
        return [main], [f"{opts.c_filename}_riscv.c", api, "softmax.c"]
    return [main, api, "softmax.c"], []


def makefile(plan: Plan, opts: Any, name: str) -> str:
    arm, riscv = sources(opts)
    return render(
        "Makefile.j2",
        name=name,
        target=plan.settings.chip.device.name,
        board=opts.board_name,
        riscv=bool(opts.riscv),
        arm_sources=" ".join(arm),
        riscv_sources=" ".join(riscv),
        defines=opts.define,
    )
