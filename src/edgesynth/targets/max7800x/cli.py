"""The MAX7800x commands, `edgesynth max7800x ...` and (as aliases, where they were first) at
the top level: `izer` (the vendor's command line), `simulate`, `synth` (the C project, native
option names), `plan` (automatic placement and memory maps), `build` (cross-compile it) and
`device` (the virtual device, `vdevice/cli.py`).

Only argparse here; the handlers import the synthesizer when they run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from edgesynth.targets.max7800x.device import device_name


def izer_main(argv: list[str]) -> int:
    """`edgesynth izer ARGV` (the plugin's `raw_commands` name it)."""
    if "-h" in argv or "--help" in argv:  # the help needs the options only, not the synthesizer
        from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args

        parse_izer_args(argv)
    from edgesynth.targets.max7800x.commands.izer import run_izer

    run_izer(argv)
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from edgesynth.targets.max7800x.commands.simulate_cmd import run_simulate

    run_simulate(
        network=args.network,
        checkpoint=args.checkpoint,
        device=args.device,
        sample_input=args.sample_input,
        save=args.save,
        output=args.output,
        stop_after=args.stop_after,
        avg_pool_rounding=args.avg_pool_rounding,
        overwrite=args.overwrite,
    )
    return 0


def _synth(args: argparse.Namespace) -> int:
    from edgesynth.targets.max7800x.commands.synth_cmd import SynthOptions, run_synth

    run_synth(
        SynthOptions(
            network=args.network,
            checkpoint=args.checkpoint,
            out=args.out,
            device=args.device,
            sample_input=args.sample_input,
            softmax=args.softmax,
            fifo=args.fifo,
            fast_fifo=args.fast_fifo,
            riscv=args.riscv,
            timer=args.timer,
            known_answer=args.known_answer,
            unload=args.unload,
            boost=args.boost,
            overwrite=args.overwrite,
            verbose=args.verbose,
            report=args.report,
            verify=args.verify,
            izer_options=list(args.izer_option or []),
        )
    )
    return 0


def _plan(args: argparse.Namespace) -> int:
    from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions, run_plan

    run_plan(
        PlanOptions(
            network=args.network,
            checkpoint=args.checkpoint,
            device=args.device,
            sample_input=args.sample_input,
            output=args.out,
            picture=args.picture,
            report=args.report,
            overwrite=args.overwrite,
            device_check=args.check,
            izer_options=tuple(args.izer_option or ()),
        )
    )
    return 0


def _build(args: argparse.Namespace) -> int:
    from edgesynth.targets.max7800x.commands.synth_cmd import run_build

    run_build(args.project, device=args.device, riscv=args.riscv)
    return 0


def _network_arguments(parser: argparse.ArgumentParser) -> None:
    """NETWORK [CHECKPOINT] --device --sample-input: a vendor network and what it runs on."""
    parser.add_argument("network", type=Path, metavar="NETWORK", help="YAML network description")
    parser.add_argument(
        "checkpoint",
        type=Path,
        nargs="?",
        metavar="CHECKPOINT",
        help="quantized checkpoint (.pth.tar; omit for `arch: test`)",
    )
    parser.add_argument(
        "--device", type=device_name, default="MAX78000", help="MAX78000 or MAX78002"
    )
    parser.add_argument(
        "--sample-input",
        type=Path,
        metavar="NPY",
        help="sample .npy (default: tests/sample_<dataset>.npy)",
    )


def _no_verify_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help=f"write {what} without first running its writes on the virtual device (by "
        "default a project that misses its known answer is refused and nothing is written)",
    )


ONLY = "MAX7800x only: "  # what the help of a command only the MAX7800x target has begins with


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `edgesynth max7800x izer | simulate | synth | plan | build | device`, and the same
    commands at the top level (`edgesynth izer ...`), where they were first: aliases, with the
    same behaviour and output."""
    group = subparsers.add_parser(
        "max7800x",
        help="MAX78000/MAX78002 commands: izer, simulate, synth, plan, build, device",
        description="The commands only the MAX78000/MAX78002 target has. Each also runs "
        "without the `max7800x` word (`edgesynth simulate ...`).",
    )
    commands = group.add_subparsers(
        title="commands", dest="max7800x_command", metavar="COMMAND", required=True
    )
    for add in COMMANDS:
        add(commands)
        add(subparsers)


def _add_izer(subparsers: argparse._SubParsersAction) -> None:
    izer = subparsers.add_parser(
        "izer",
        help=ONLY + "the vendor's ai8xize.py command line, unchanged (`edgesynth izer --help`)",
        add_help=False,
    )
    izer.set_defaults(raw_handler=izer_main)


def _add_simulate(subparsers: argparse._SubParsersAction) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help=ONLY + "simulate a network bit-exactly and print a per-layer summary",
        description="Simulate a MAX78000/MAX78002 network bit-exactly and print a per-layer "
        "summary (shapes, operations, weight bits, shift, min/max).",
    )
    _network_arguments(sim)
    sim.add_argument(
        "--save",
        type=Path,
        metavar="FOLDER",
        help="folder to save every layer's output in, as layerNN.npy",
    )
    sim.add_argument(
        "--output", type=Path, metavar="NPY", help="save the network output (int64 .npy)"
    )
    sim.add_argument(
        "--overwrite",
        action="store_true",
        help="let --save replace the layerNN.npy files of a non-empty folder and --output "
        "replace its file",
    )
    sim.add_argument("--stop-after", type=int, metavar="N", help="stop after this layer")
    sim.add_argument(
        "--avg-pool-rounding",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="round average pooling",
    )
    sim.set_defaults(handler=_simulate)


def _add_synth(subparsers: argparse._SubParsersAction) -> None:
    synth = subparsers.add_parser(
        "synth",
        help=ONLY + "write the MAX78000/MAX78002 C project for a network (native option names)",
        description="Write the MSDK C project for a network: the files the vendor tool writes "
        "(cnn.c, cnn.h, weights.h, main.c, sampledata.h, sampleoutput.h, Makefile ...), "
        "write for write identical to the vendor's, except where the vendor's firmware would "
        "miss its own known answer (calcx4 kernels written over another layer's, fast-FIFO "
        "channels not fed): there edgesynth writes what computes it. `edgesynth izer` takes "
        "the vendor's options and writes exactly what the vendor's tool writes.",
    )
    _network_arguments(synth)
    synth.add_argument(
        "-o", "--out", type=Path, required=True, metavar="FOLDER", help="project folder to write"
    )
    synth.add_argument("--softmax", action="store_true", help="add the software softmax")
    synth.add_argument("--fifo", action="store_true", help="feed the input through the FIFOs")
    synth.add_argument(
        "--fast-fifo", action="store_true", help="feed the input through the fast FIFO"
    )
    synth.add_argument("--riscv", action="store_true", help="run the network from the RISC-V core")
    synth.add_argument("--timer", type=int, metavar="N", help="time the inference with timer N")
    _synth_generation_arguments(synth)
    synth.add_argument(
        "--overwrite", action="store_true", help="replace the files of an existing project"
    )
    synth.add_argument("--verbose", action="store_true", help="print the plan")
    synth.add_argument(
        "--report",
        action="store_true",
        help="also write OUT/report.html: the page `edgesynth report` writes (layers, memory "
        "pictures, time per layer)",
    )
    _no_verify_argument(synth, "the project")
    synth.add_argument(
        "--izer-option",
        action="append",
        metavar="OPT",
        help="any other vendor option, e.g. --izer-option=--mlator (repeatable)",
    )
    synth.set_defaults(handler=_synth)


def _synth_generation_arguments(synth: argparse.ArgumentParser) -> None:
    """What `synth` generates beside the network: the known-answer check, cnn_unload, boost."""
    synth.add_argument(
        "--known-answer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="generate the known-answer check",
    )
    synth.add_argument(
        "--unload",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="generate cnn_unload()",
    )
    synth.add_argument("--boost", metavar="PORT.PIN", help="boost circuit port.pin, e.g. 2.5")


def _add_plan(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser(
        "plan",
        help=ONLY + "choose processors and memory offsets for a network and show its memory maps",
        description="Place a MAX78000/MAX78002 network: every layer whose YAML leaves out "
        "`processors`, `output_processors`, `in_offset` or `out_offset` gets them from a "
        "constraint search (OR-Tools CP-SAT) that keeps live data apart, fits the kernels and "
        "minimizes latency and memory. Prints the data-memory, kernel-memory and bias-memory "
        "maps and the latency estimate, and runs the project's writes on the virtual device.",
    )
    _network_arguments(plan)
    plan.add_argument(
        "-o", "--out", type=Path, metavar="PLANNED.yaml", help="write the YAML with the placement"
    )
    plan.add_argument(
        "--picture", type=Path, metavar="MAP.png", help="draw the memory maps (.png, .svg, .pdf)"
    )
    plan.add_argument(
        "--report",
        type=Path,
        metavar="PAGE.html",
        help="write the HTML page `edgesynth report` writes (layers, memory, time per layer)",
    )
    plan.add_argument(
        "--overwrite", action="store_true", help="replace existing -o/--picture/--report files"
    )
    plan.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the project's writes on the virtual device (default: on)",
    )
    plan.add_argument(
        "--no-verify",
        dest="check",
        action="store_false",
        help="the same as --no-check",
    )
    plan.add_argument(
        "--izer-option",
        action="append",
        metavar="OPT",
        help="a vendor option that changes the network, e.g. --izer-option=--fifo (repeatable)",
    )
    plan.set_defaults(handler=_plan)


def _add_build(subparsers: argparse._SubParsersAction) -> None:
    build = subparsers.add_parser(
        "build",
        help=ONLY + "compile a generated project for the chip and print its size",
        description="Compile a generated MAX78000/MAX78002 project with Debian's cross "
        "compilers (arm-none-eabi-gcc, riscv64-unknown-elf-gcc), -Wall -Wextra -Werror, and "
        "print the size of each memory region.",
    )
    build.add_argument("project", type=Path, metavar="PROJECT", help="a generated project folder")
    build.add_argument(
        "--device", type=device_name, help="MAX78000 or MAX78002 (default: the project's)"
    )
    build.add_argument(
        "--riscv",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="build the RISC-V program too (default: when the project has one)",
    )
    build.set_defaults(handler=_build)


def _add_device(subparsers: argparse._SubParsersAction) -> None:
    from edgesynth.targets.max7800x.vdevice.cli import register as register_device

    register_device(subparsers)


COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _add_izer,
    _add_simulate,
    _add_synth,
    _add_plan,
    _add_build,
    _add_device,
)
