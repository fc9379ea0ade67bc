"""Write the MSDK project for a synthesized network: plan, render, stage, move into place.

This is the one call `edgesynth izer` (and `edgesynth synth`) make after synthesis. The
project goes to TEST_DIR/PREFIX, written into a staging folder first and moved into place only
when every file is complete.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import npy_path, staged_directory
from edgesynth.targets.max7800x.emit import generate
from edgesynth.targets.max7800x.emit.makefile import makefile
from edgesynth.targets.max7800x.plan.plan import Plan, make_plan
from edgesynth.targets.max7800x.plan.report import render_table

# Code-generation options this generator honours (the others are the vendor's RTL-simulation,
# IDE and debugging options; they are accepted and listed in a note).
HONOURED = {
    "--softmax",
    "--timer",
    "--no-timer",
    "--riscv",
    "--riscv-flash",
    "--no-riscv-flash",
    "--riscv-cache",
    "--no-riscv-cache",
    "--riscv-debug",
    "--riscv-exclusive",
    "--fifo",
    "--fast-fifo",
    "--fast-fifo-quad",
    "--no-fifo-wait",
    "--fifo-go",
    "--mexpress",
    "--no-mexpress",
    "--compact-data",
    "--unload",
    "--no-unload",
    "--no-kat",
    "--boost",
    "--no-wfi",
    "--energy",
    "--switch-delay",
    "--pipeline",
    "--no-pipeline",
    "--pll",
    "--no-pll",
    "--apb",
    "--balance-speed",
    "--max-speed",
    "--clock-divider",
    "--forever",
    "--stop-start",
    "--verify-kernels",
    "--verify-writes",
    "--ready-sel",
    "--mlator",
    "--unroll-mlator",
    "--clock-trim",
    "--ready-sel-fifo",
    "--ready-sel-aon",
    "--define",
    "--define-default-arm",
    "--define-default-riscv",
    "--legacy-kernels",
    "--simple1b",
    "--slow-load",
    "--no-compact-data",
    "--ignore-energy-warning",
    "--ignore-mlator-warning",
    "--debug",
    "-D",
    "--debug-computation",
    "--debug-latency",
    "--kernel-format",
    "--init-tram",
    "--zero-sram",
    "--pretend-zero-sram",
    "--write-zero-registers",
    "--powerdown",
    "--ext-rdy",
    "--max-verify-length",
    "--max-checklines",
    "--debugwait",
    "--c-filename",
    "--api-filename",
    "--weight-filename",
    "--sample-filename",
    "--sample-output-filename",
    "-L",
    "--log",
    "--no-log",
    "--log-filename",
    "--overwrite",
    "--display-checkpoint",
    "--new-kernel-loader",
    "--embedded-code",
    "-e",
    "--synthesize-input",
    "--synthesize-words",
    "--one-shot",
    "--override-start",
    "--increase-start",
    "--override-rollover",
    "--override-delta1",
    "--increase-delta1",
    "--override-delta2",
    "--increase-delta2",
    "--debug-new-streaming",
    "--weight-start",
    "--deepsleep",
    "--board-name",
    "--no-deduplicate-weights",
}


@dataclass
class WrittenProject:
    folder: Path
    plan: Plan
    files: list[str]


def project_files(result: Any, opts: Any, name: str) -> tuple[Plan, dict[str, str]]:
    """Plan the network and render every file of its project (nothing is written)."""
    plan = make_plan(result, opts)
    project = generate(plan, opts, name, opts.config_file)
    files = dict(project.files)
    files["Makefile"] = makefile(plan, opts, name)
    if opts.log:
        files[opts.log_filename] = render_table(plan)
    return plan, files


def write_project(result: Any, opts: Any) -> WrittenProject | None:
    """Write TEST_DIR/PREFIX (the vendor's layout); None for RTL-simulation runs."""
    if not opts.embedded_code:
        print(
            "note: RTL simulation files are not generated (--rtl/--rtl-preload); only the "
            "known-answer output is computed.",
            file=sys.stderr,
        )
        return None
    if not opts.prefix:
        raise EdgesynthError("the output folder needs a name: pass --prefix (and --test-dir).")
    name = opts.prefix
    plan, files = project_files(result, opts, name)
    folder = Path(opts.test_dir or ".") / name
    with staged_directory(folder) as stage:
        stage.chmod(0o755)  # the staging folder is created private
        for filename, text in files.items():
            (stage / filename).write_text(text)
        if opts.result_numpy and opts.generate_kat:
            target = npy_path(stage / opts.result_numpy)
            target.parent.mkdir(parents=True, exist_ok=True)
            np.save(target, result.output)
    return WrittenProject(folder=folder, plan=plan, files=sorted(files))


def ignored_options(opts: Any) -> list[str]:
    """The given code-generation options this generator does not act on."""
    from edgesynth.targets.max7800x.izer_args import codegen_only_options_used

    return [o for o in codegen_only_options_used(opts) if o.split(" ")[0] not in HONOURED]
