"""`edgesynth synth` and `edgesynth build`: the native commands around code generation.

`synth NET.yaml [CHECKPOINT] --device D --sample-input X.npy -o OUT/` writes the same project
as the vendor command line (`edgesynth izer`), with the native option names, except where the
vendor's firmware is wrong (edgesynth's own path: `Max7800xOptions.write_for_write` false).
Its options become the typed `Max7800xOptions` here (`synth_options`), with no vendor command
line; only `--izer-option`s are vendor options, read by `izer` (`with_vendor_options`).
`build PROJECT/` compiles a generated project for the chip and prints its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError, UsageError

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.options import Max7800xOptions


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
    report: bool = False  # also write OUT/report.html (`edgesynth report`)
    verify: bool = True  # run the project's writes on the virtual device before writing it
    izer_options: list[str] = field(default_factory=list)  # any other vendor option, as is


def _port_pin(text: str) -> tuple[int, int]:
    """`--boost PORT.PIN` (e.g. 2.5)."""
    try:
        port, pin = (int(s, 0) for s in text.split("."))
    except ValueError:
        raise UsageError(
            f"`--boost`: `{text}` is not a port.pin such as 2.5", prog="edgesynth synth"
        ) from None
    return port, pin


def synth_options(o: SynthOptions) -> Max7800xOptions:
    """What the core is told for the native options: the vendor's defaults for the device, on
    edgesynth's own path (not write for write); `--izer-option`s over them (read by `izer`)."""
    from edgesynth.targets.max7800x.commands.izer import with_vendor_options

    return with_vendor_options(native_options(o), list(o.izer_options))[0]


def native_options(o: SynthOptions) -> Max7800xOptions:
    """What the core is told for the native options alone."""
    from edgesynth.targets.max7800x.commands.option_names import NATIVE
    from edgesynth.targets.max7800x.description.assemble_options import BuildOptions
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.targets.max7800x.options import Max7800xOptions, ProjectOptions
    from edgesynth.targets.max7800x.rules.options import RuleOptions

    boost = None if o.boost is None else _port_pin(o.boost)
    if o.fast_fifo and not o.riscv:
        raise EdgesynthError("`--fast-fifo` requires `--riscv`.")
    return Max7800xOptions(
        build=BuildOptions(
            device=get_device(o.device),
            checkpoint=None if o.checkpoint is None else str(o.checkpoint),
            sample_input=None if o.sample_input is None else str(o.sample_input),
            names=NATIVE,
        ),
        rules=RuleOptions(fifo=o.fifo or o.fast_fifo, fast_fifo=o.fast_fifo, riscv=o.riscv),
        project=ProjectOptions(
            config_file=str(o.network),
            boost=boost,
            riscv_flash=o.riscv,
            riscv_cache=o.riscv,
            softmax=o.softmax,
            unload=o.unload,
            generate_kat=o.known_answer,
            timer=o.timer,
        ),
    )


def run_synth(o: SynthOptions) -> None:
    from edgesynth.targets.max7800x.commands.izer import (
        ProjectRun,
        vendor_run,
        with_vendor_options,
        write_project,
    )
    from edgesynth.targets.max7800x.commands.option_names import NATIVE

    out = Path(o.out)
    if not out.name:
        raise EdgesynthError("-o needs a folder name, e.g. -o out/mnist", key="-o")
    from edgesynth.targets.max7800x.commands.synth_cpu import with_cpu_layers

    options, vendor = with_vendor_options(native_options(o), list(o.izer_options))
    options, cpu = with_cpu_layers(options)
    inputs: list[Path | str | None] = [o.network, o.checkpoint, o.sample_input, Path("tests")]
    run = ProjectRun(
        folder=out,
        name=out.name,
        inputs=inputs,
        names=NATIVE,
        overwrite=o.overwrite,
        verbose=o.verbose,
        verify=o.verify,
    )
    page = _report_file(o, inputs)
    result = write_project(options, run if vendor is None else vendor_run(run, vendor), cpu)
    if page is not None:
        from edgesynth.targets.max7800x.report_data import write_page

        written = write_page(
            result, options, page, network=o.network, overwrite=o.overwrite, inputs=inputs
        )
        print(f"wrote {written}")


def _report_file(o: SynthOptions, inputs: list) -> Path | None:
    """`--report`: OUT/report.html, checked before any work."""
    if not o.report:
        return None
    from edgesynth.report.cli import checked_page

    return checked_page(Path(o.out), overwrite=o.overwrite, inputs=inputs)


def run_build(project: Path, device: str | None = None, riscv: bool | None = None) -> None:
    from edgesynth.targets.max7800x.commands.firmware import build_project

    result = build_project(project, device=device, riscv=riscv)
    print(result.report())
