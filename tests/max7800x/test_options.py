"""The typed options of the MAX7800x core (`options.Max7800xOptions`): what the vendor's
command line maps to, the device's defaults, and the planner called from Python without one."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest

import needs
from edgesynth.targets.max7800x.codegen import project_files
from edgesynth.targets.max7800x.commands.izer import core_options, plan_izer
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.description.assemble_options import BuildOptions
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.options import Max7800xOptions, PlanOptions, ProjectOptions
from edgesynth.targets.max7800x.pipeline import SynthesisJob, synthesize
from edgesynth.targets.max7800x.plan.plan import make_plan
from edgesynth.targets.max7800x.plan.report import render_table
from edgesynth.targets.max7800x.rules import RuleOptions
from edgesynth.targets.max7800x.target import Max78000, Max78002, synthesis_options

CORPUS = Path(__file__).parents[2].parent / "shared" / "corpus"
OUT = ["--test-dir", ".", "--prefix", "p"]


def vendor(*args: str, write_for_write: bool = True, base: Path | None = None) -> Max7800xOptions:
    opts = parse_izer_args([*args, *OUT])
    return core_options(replace(opts, write_for_write=write_for_write), base)


@pytest.mark.parametrize(
    ("device", "pipeline", "delay"), [("MAX78000", False, 0), ("MAX78002", True, 10)]
)
def test_the_device_fills_what_was_left_open(device: str, pipeline: bool, delay: int) -> None:
    options = Max7800xOptions.for_device(device)
    assert (options.rules.pipeline, options.rules.pll) == (pipeline, pipeline)
    assert options.project.enable_delay == delay
    # what is given stays as given
    given = Max7800xOptions.for_device(device, rules=RuleOptions(pipeline=False, pll=False))
    assert (given.rules.pipeline, given.rules.pll) == (False, False)


def test_the_options_are_frozen() -> None:
    options = Max7800xOptions.for_device("MAX78000")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.write_for_write = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.plan.mexpress = False  # type: ignore[misc]


def test_for_device_refuses_the_build_options_of_another_device() -> None:
    with pytest.raises(ValueError, match="MAX78002"):
        Max7800xOptions.for_device("MAX78002", build=BuildOptions(device=get_device("MAX78000")))


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_the_vendor_defaults_are_the_typed_defaults(device: str) -> None:
    args = ("--device", device, "--config-file", "net.yaml")
    expected = Max7800xOptions.for_device(
        device, project=ProjectOptions(config_file="net.yaml"), write_for_write=True
    )
    assert vendor(*args) == expected


def test_each_option_lands_in_its_group() -> None:
    options = vendor(
        "--device", "MAX78002", "--config-file", "net.yaml", "--fast-fifo-quad", "--riscv",
        "--no-mexpress", "--weight-start", "4", "--softmax", "--stop-after", "2",
        "--override-delta1", "0x10", "--avg-pool-rounding", "--boost", "2.5",
    )  # fmt: skip
    # implied by the vendor: --fast-fifo-quad -> --fast-fifo -> --fifo; --riscv -> flash, cache
    assert options.rules == RuleOptions(
        fifo=True,
        fast_fifo=True,
        fast_fifo_quad=True,
        riscv=True,
        avg_pool_rounding=True,
        pipeline=True,
        pll=True,
        override_delta1=0x10,
    )
    assert options.plan == PlanOptions(mexpress=False, weight_start=4)
    assert options.build.stop_after == 2
    assert options.sim.avg_pool_rounding
    assert (options.project.softmax, options.project.boost) == (True, (2, 5))
    assert (options.project.riscv_flash, options.project.riscv_cache) == (True, True)


@pytest.mark.parametrize("target", [Max78000, Max78002])
def test_the_compile_path_is_told_the_vendor_defaults(target, tmp_path: Path) -> None:
    """`compile`'s options are what `izer --device D --config-file network.yaml` gives,
    on edgesynth's own path."""
    expected = vendor(
        "--device", target.device_name, "--config-file", "network.yaml",
        write_for_write=False, base=tmp_path,
    )  # fmt: skip
    assert synthesis_options(target.device_name, tmp_path) == expected


@pytest.mark.corpus
def test_the_planner_runs_from_python_without_an_argv(monkeypatch) -> None:
    """The typed options built in Python plan and emit, byte for byte, what `edgesynth izer`
    plans and emits for the same command line."""
    case = needs.in_corpus(CORPUS / "cases" / "MAX78002" / "test-ffsreadahead-multipass")
    info = json.loads((case / "case.json").read_text())
    config = "tests/test-ffsreadahead-multipass.yaml"
    assert "--fast-fifo-quad" in info["args"] and "--riscv" in info["args"]
    device = get_device("MAX78002")
    options = Max7800xOptions(
        build=BuildOptions(device=device, base_dir=case),
        rules=RuleOptions(fifo=True, fast_fifo=True, fast_fifo_quad=True, riscv=True),
        project=ProjectOptions(config_file=config, riscv_flash=True, riscv_cache=True),
        write_for_write=True,
    )
    result = synthesize(SynthesisJob(config, options))
    plan = make_plan(result, options)
    ours = project_files(result, options, "p")[1]

    monkeypatch.chdir(case)
    argv = [*info["args"], *OUT]
    vendor_result, vendor_plan = plan_izer(argv)
    assert core_options(parse_izer_args(argv), case) == options
    assert render_table(plan) == render_table(vendor_plan)
    assert ours == project_files(vendor_result, core_options(parse_izer_args(argv)), "p")[1]
