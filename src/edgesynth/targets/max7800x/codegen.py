"""The MSDK project for a synthesized network: plan it and render every file.

`edgesynth izer` (and `edgesynth synth`) call `project_files` after synthesis and write the
files to TEST_DIR/PREFIX through `outputs.output_folder` (staged, moved into place only when
every file is complete).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgesynth.targets.max7800x.emit import generate
from edgesynth.targets.max7800x.emit.makefile import makefile
from edgesynth.targets.max7800x.options import Max7800xOptions
from edgesynth.targets.max7800x.plan.plan import Plan, make_plan
from edgesynth.targets.max7800x.plan.report import render_table

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.commands.izer_args import IzerOptions
    from edgesynth.targets.max7800x.network_sim import SynthesisResult

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
    "--snoop-loop",
    "--fixed-input",
}


def project_files(
    result: SynthesisResult, opts: Max7800xOptions, name: str
) -> tuple[Plan, dict[str, str]]:
    """Plan the network and render every file of its project (nothing is written)."""
    plan = make_plan(result, opts)
    return plan, render_project(plan, opts, name)


def render_project(plan: Plan, opts: Max7800xOptions, name: str) -> dict[str, str]:
    """Every file of the project a plan describes, by name (nothing is written)."""
    project = generate(plan, opts, name, opts.project.config_file)
    files = dict(project.files)
    files["Makefile"] = makefile(plan, opts, name)
    if opts.project.log:
        files[opts.project.log_filename] = render_table(plan)
    return files


def ignored_options(opts: IzerOptions) -> list[str]:
    """The given code-generation options this generator does not act on."""
    from edgesynth.targets.max7800x.commands.izer_args import codegen_only_options_used

    return [o for o in codegen_only_options_used(opts) if o.split(" ")[0] not in HONOURED]
