"""`synth` and `plan` make the core's options from their own options, without a vendor command
line: what they make equals the vendor's reading of the equivalent `izer` command line (on
edgesynth's own path), option for option; `--izer-option`s are read by `izer` over them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from edgesynth.errors import EdgesynthError, UsageError
from edgesynth.targets.max7800x.commands.izer import core_options
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.commands.option_names import NATIVE
from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions, _core_options
from edgesynth.targets.max7800x.commands.synth_cmd import SynthOptions, synth_options

BASE = ["--config-file", "net.yaml", "--test-dir", "out", "--prefix", "p"]


def vendor(argv: list[str]):  # type: ignore[no-untyped-def]
    """The vendor's reading of `argv`, on edgesynth's own path, options named natively."""
    return core_options(replace(parse_izer_args(BASE + argv), write_for_write=False), names=NATIVE)


SYNTH = [
    ({}, ["--device", "MAX78000"]),
    (
        {"device": "MAX78002", "checkpoint": Path("c.pth.tar"), "sample_input": Path("s.npy")},
        ["--device", "MAX78002", "--checkpoint-file", "c.pth.tar", "--sample-input", "s.npy"],
    ),
    (
        {"softmax": True, "fifo": True, "timer": 0, "boost": "2.5"},
        ["--device", "MAX78000", "--softmax", "--fifo", "--timer", "0", "--boost", "2.5"],
    ),
    (
        {"riscv": True, "fast_fifo": True, "known_answer": False, "unload": False},
        ["--device", "MAX78000", "--riscv", "--fast-fifo", "--no-kat", "--no-unload"],
    ),
    (
        {"device": "MAX78002", "riscv": True, "izer_options": ["--fast-fifo-quad", "--mlator"]},
        ["--device", "MAX78002", "--riscv", "--fast-fifo-quad", "--mlator"],
    ),
]


@pytest.mark.parametrize(("native", "argv"), SYNTH)
def test_synth_options_are_the_vendors_reading(native: dict, argv: list[str]) -> None:
    o = SynthOptions(
        **{"network": Path("net.yaml"), "checkpoint": None, "out": Path("o"), **native}
    )
    assert synth_options(o) == vendor(argv)


def test_plan_options_are_the_vendors_reading() -> None:
    o = PlanOptions(Path("net.yaml"), Path("c.pth.tar"), "MAX78002", izer_options=("--fifo",))
    argv = ["--device", "MAX78002", "--checkpoint-file", "c.pth.tar", "--fifo"]
    assert _core_options(o) == vendor(argv)


def test_native_refusals() -> None:
    with pytest.raises(EdgesynthError, match=r"^`--fast-fifo` requires `--riscv`\.$"):
        synth_options(SynthOptions(Path("n.yaml"), None, Path("o"), fast_fifo=True))
    with pytest.raises(UsageError, match=r"`--boost`: `x` is not a port\.pin such as 2\.5"):
        synth_options(SynthOptions(Path("n.yaml"), None, Path("o"), boost="x"))
    # an --izer-option that needs a native option sees it
    o = SynthOptions(Path("n.yaml"), None, Path("o"), riscv=True, izer_options=["--deepsleep"])
    assert synth_options(o).rules.deepsleep
    with pytest.raises(EdgesynthError, match="`--deepsleep` requires `--riscv`"):
        synth_options(replace(o, riscv=False))


def test_vendor_options_of_the_run_are_honoured() -> None:
    from edgesynth.targets.max7800x.commands.izer import ProjectRun, vendor_run, with_vendor_options
    from edgesynth.targets.max7800x.commands.synth_cmd import native_options

    o = SynthOptions(Path("n.yaml"), None, Path("o"))
    extra = ["--no-warn-zero", "--sample-numpy-filename", "out.npy", "--no-verify"]
    options, given = with_vendor_options(native_options(o), extra)
    assert options == native_options(o) and given is not None
    run = vendor_run(ProjectRun(Path("o"), "o", [], NATIVE), given)
    assert (run.warn_zero, run.result_numpy, run.verify) == (False, "out.npy", False)
    _, given = with_vendor_options(native_options(o), ["--sample-numpy-filename", "../x.npy"])
    with pytest.raises(EdgesynthError, match="must be a file name inside"):
        vendor_run(ProjectRun(Path("o"), "o", [], NATIVE), given)  # type: ignore[arg-type]
