"""`edgesynth synth` and `edgesynth build`: the native commands around code generation.

`synth NET.yaml [CHECKPOINT] --device D --sample-input X.npy -o OUT/` writes the same project
as the vendor command line (`edgesynth izer`), with the native option names, except where the
vendor's firmware is wrong (edgesynth's own path: `IzerOptions.write_for_write` false);
`build PROJECT/` compiles a generated project for the chip and prints its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgesynth.errors import EdgesynthError


@dataclass
class SynthOptions:
    network: Path
    checkpoint: Path | None
    out: Path
    device: str = "MAX78000"
    sample_input: Path | None = None
    softmax: bool = False
    fifo: bool = False
    fast_fifo: bool = False
    riscv: bool = False
    timer: int | None = None
    known_answer: bool = True
    unload: bool = True
    boost: str | None = None
    overwrite: bool = False
    verbose: bool = False
    verify: bool = True  # run the project's writes on the virtual device before writing it
    izer_options: list[str] = field(default_factory=list)  # any other vendor option, as is


def izer_argv(o: SynthOptions) -> list[str]:
    """The vendor command line equivalent to the native options."""
    out = Path(o.out)
    if not out.name:
        raise EdgesynthError("-o needs a folder name, e.g. -o out/mnist", key="-o")
    argv = ["--device", o.device, "--config-file", str(o.network)]
    argv += ["--test-dir", str(out.parent), "--prefix", out.name]
    if o.checkpoint is not None:
        argv += ["--checkpoint-file", str(o.checkpoint)]
    if o.sample_input is not None:
        argv += ["--sample-input", str(o.sample_input)]
    flags = {
        "--softmax": o.softmax,
        "--fifo": o.fifo,
        "--fast-fifo": o.fast_fifo,
        "--riscv": o.riscv,
        "--no-kat": not o.known_answer,
        "--no-unload": not o.unload,
        "--overwrite": o.overwrite,
        "--verbose": o.verbose,
        "--no-verify": not o.verify,
    }
    argv += [flag for flag, on in flags.items() if on]
    if o.timer is not None:
        argv += ["--timer", str(o.timer)]
    if o.boost is not None:
        argv += ["--boost", o.boost]
    return argv + list(o.izer_options)


def run_synth(o: SynthOptions) -> None:
    from edgesynth.targets.max7800x.commands.izer import run_izer
    from edgesynth.targets.max7800x.commands.option_names import NATIVE

    run_izer(izer_argv(o), NATIVE, write_for_write=False)


def run_build(project: Path, device: str | None = None, riscv: bool | None = None) -> None:
    from edgesynth.targets.max7800x.commands.firmware import build_project

    result = build_project(project, device=device, riscv=riscv)
    print(result.report())
