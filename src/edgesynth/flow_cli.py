"""`edgesynth compile`, `run` and `targets`: one command line for every target (see `flow`), and
the one compile path a target's own `compile` sub-command runs too (`TargetCompile`)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.cliargs import add_overwrite, parse_options
from edgesynth.errors import EdgesynthError, warn
from edgesynth.wording import plural

if TYPE_CHECKING:
    from edgesynth.targets.base import Program, TensorFormat


def compile_cmd(args: argparse.Namespace) -> int:
    """Compile MODEL for one target into the output folder (for `-t all` or a list of
    targets: `compile_all`, each target through `compile_from_args`)."""
    from edgesynth.compile_all import compile_all, is_target_list, refuse_list_options

    if is_target_list(args.target):
        return compile_all(args, compile_from_args)
    refuse_list_options(args)
    inputs = [args.model, args.checkpoint, args.calibration, args.sample_input]
    export = _integer_onnx_file(args, inputs)
    page = _report_file(args, inputs)
    program, files = compile_from_args(args, args.target, parse_options(args.option), export=export)
    fmt = program.inputs[0]
    kind = f"{'' if fmt.signed else 'u'}int{fmt.bits}"
    print(
        f"{Path(args.model).name} -> {program.target}: "
        f"{plural(len(program.layers), 'hardware layer')}, "
        f"input {'x'.join(map(str, fmt.shape))} {kind}"
    )
    for note in program.notes:
        print(note)
    if program.proof is not None:
        print(program.proof.line)
    print(f"wrote {', '.join(files)} in {args.output}")
    if export is not None:
        from edgesynth.outputs import write_file_atomic

        write_file_atomic(
            export,
            program.integer_onnx,  # type: ignore[attr-defined]  # gap8 only (checked above)
            overwrite=args.overwrite,
            inputs=inputs,
            option="--export-integer-onnx",
        )
        print(f"wrote {export}: the integer network (RequantShift ONNX)")
    if page is not None:
        from edgesynth.report.cli import folder_page

        print(f"wrote {folder_page(args.output, page, overwrite=args.overwrite, inputs=inputs)}")
    return 0


def _report_file(args: argparse.Namespace, inputs: list) -> Path | None:
    """`--report`: OUT/report.html, checked before any work."""
    if not args.report:
        return None
    from edgesynth.report.cli import checked_page

    return checked_page(args.output, overwrite=args.overwrite, inputs=inputs)


def _integer_onnx_file(args: argparse.Namespace, inputs: list) -> Path | None:
    """`--export-integer-onnx FILE`, checked before any work (for the targets that quantize a
    float model into a RequantShift ONNX network)."""
    if args.export_integer_onnx is None:
        return None
    from edgesynth.errors import UsageError
    from edgesynth.outputs import check_output_file
    from edgesynth.targets.base import get_target, target_class, target_names

    target = get_target(args.target)
    if not target.exports_integer_onnx:
        able = [n for n in target_names() if target_class(n).exports_integer_onnx]
        raise UsageError(
            f"--export-integer-onnx is for -t {' or -t '.join(able)}, not -t {target.name}"
        )
    return check_output_file(
        args.export_integer_onnx,
        overwrite=args.overwrite,
        inputs=inputs,
        option="--export-integer-onnx",
    )


def compile_from_args(
    args: argparse.Namespace,
    target_name: str,
    options: dict[str, object],
    reader_options: dict[str, object] | None = None,
    export: Path | None = None,
) -> tuple[Program, list[str]]:
    """The one compile path (`edgesynth compile` and every target's own `compile`): refuse an
    unknown target, option or a bad output folder before any work, read the model, lower,
    check (every error at once), plan, emit into a staging folder, prove the files there
    (unless --no-verify) and only then move them into place. Prints the warnings. With
    `export` (--export-integer-onnx), a float model is quantized under that file's name."""
    from edgesynth.flow import compile_to, load_array, load_model
    from edgesynth.outputs import output_folder
    from edgesynth.targets.base import get_target

    target = get_target(target_name)  # an unknown target is refused before any work
    target.check_option_keys(options)  # so is an unknown --option key
    options = {**options, **_target_flags(args, target.name, target.compile_flags)}
    inputs = [args.model, args.checkpoint, args.calibration, args.sample_input]
    output_folder(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    graph = load_model(
        args.model,
        checkpoint=args.checkpoint,
        sample_input=args.sample_input,
        target=target.name,
        options=reader_options,
    )
    calibration = None
    if args.calibration is not None:
        calibration = load_array(args.calibration, "calibration data", "--calibration")
    options = dict(options)
    if args.sample_input is not None and target.takes_sample:
        options.setdefault("sample", load_array(args.sample_input, "sample", "--sample-input"))
    if export is not None:
        if graph.is_integer:
            raise EdgesynthError(
                f"{args.model} is an integer network already; there is nothing to export",
                key="--export-integer-onnx",
            )
        options.setdefault("network_name", export.stem)
    try:
        program, files = compile_to(
            graph,
            target.name,
            calibration=calibration,
            options=options,
            out=args.output,
            overwrite=args.overwrite,
            inputs=inputs,
            verify=args.verify,
        )
    except EdgesynthError as err:  # about --calibration's data: name its file too
        if err.key == "--calibration" and err.file is None and args.calibration is not None:
            err.file = str(args.calibration)
            err.args = (err.render(),)
        raise
    for w in program.warnings:
        print(f"edgesynth: warning: {w}", file=sys.stderr)
    if not args.verify and target.executor is not None:
        from edgesynth.proof import unproven

        print(f"edgesynth: warning: {unproven('the program', target.executor)}", file=sys.stderr)
    return program, files


TARGET_FLAGS = {"cpu_only": "--cpu-only", "riscv": "--riscv"}  # `compile` flags of some targets


def _target_flags(
    args: argparse.Namespace, target: str, takes: tuple[str, ...]
) -> dict[str, object]:
    """The target flags given (`--cpu-only`, `--riscv`), as options; one the target does not
    take is a usage error naming the targets that do."""
    from edgesynth.errors import UsageError
    from edgesynth.targets.base import target_class, target_names

    given = {key: True for key in TARGET_FLAGS if getattr(args, key, False)}
    for key in given:
        if key not in takes:
            able = [n for n in target_names() if key in target_class(n).compile_flags]
            raise UsageError(
                f"{TARGET_FLAGS[key]} is for -t {' or -t '.join(able)}, not -t {target}",
                prog="edgesynth compile",
            )
    return given


@dataclass(frozen=True)
class TargetCompile:
    """A target package's own `compile` (`edgesynth gati compile ...`): `compile_from_args`,
    the same code as `edgesynth compile -t TARGET`, with the target's options as flags."""

    target: str  # the registered target it compiles for
    description: str
    arguments: Callable[[argparse.ArgumentParser], None]  # adds the target's own flags
    options: Callable[[argparse.Namespace], dict[str, object]]  # its flags -> target options
    report: Callable[[argparse.Namespace, Program, list[str]], None]  # prints the summary
    model_help: str = "the model file"
    calibration_required: bool = False
    reader_options: Callable[[argparse.Namespace], dict[str, object]] | None = None


def add_target_compile(
    commands: argparse._SubParsersAction, spec: TargetCompile, help: str
) -> argparse.ArgumentParser:
    """Add `compile` to a target package's command group."""
    c = commands.add_parser("compile", help=help, description=spec.description)
    c.add_argument("model", type=Path, metavar="MODEL", help=spec.model_help)
    _shared_compile_arguments(c, calibration_required=spec.calibration_required)
    spec.arguments(c)
    c.set_defaults(handler=functools.partial(_target_compile_cmd, spec))
    return c


def _target_compile_cmd(spec: TargetCompile, args: argparse.Namespace) -> int:
    reader = spec.reader_options(args) if spec.reader_options else None
    program, files = compile_from_args(args, spec.target, spec.options(args), reader)
    spec.report(args, program, files)
    if program.proof is not None:
        print(program.proof.line)
    return 0


def _warn_integer_input(path: Path, dtype: object, fmt: TensorFormat) -> None:
    """Integer data given without --integer may be values (pixels 0..255) mistaken for codes."""
    value = f" (value = code x {fmt.scale:g})" if fmt.scale is not None else ""
    warn(
        f"`--input`: {path} holds integers ({dtype}), taken as the program's {fmt.bits}-bit "
        f"input codes{value}, not as values; pass --integer when they are codes (the outputs "
        "are then codes too), or give float values to have them quantized"
    )


def run_cmd(args: argparse.Namespace) -> int:
    """Run a batch through a compiled folder; write the outputs, one row per input."""
    from edgesynth.flow import load_array, run_folder
    from edgesynth.outputs import check_output_file, save_npy_atomic

    inputs = [args.input, args.program]
    if args.output is not None:
        check_output_file(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    x = load_array(args.input, "input", "--input")
    result = run_folder(args.program, x)
    if x.dtype.kind in "iu" and not args.integer:
        _warn_integer_input(args.input, x.dtype, result.program.inputs[0])
    if args.integer:
        y = result.codes
    else:
        y = result.outputs()
    target = result.program.target
    print(f"ran {plural(len(y), 'input')} on {target}'s bit-exact model; outputs {y.shape[1:]}")
    if y.ndim == 2 and y.shape[1] > 1:
        top = y.argmax(axis=1)
        shown = ", ".join(map(str, top[:10])) + (" ..." if len(top) > 10 else "")
        print(f"top-1: {shown}")
    if args.output is not None:
        written = save_npy_atomic(
            args.output, y, overwrite=args.overwrite, inputs=inputs, option="--output"
        )
        print(f"wrote {written}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `compile` and `run` to the `edgesynth` command line."""
    from edgesynth.targets.registry import model_kinds

    c = subparsers.add_parser(
        "compile",
        help="compile a model for one target (`edgesynth targets` lists them)",
        description="Read MODEL into the network graph, lower it for --target (quantizing a "
        "float model with --calibration), check every device rule, plan it and write the "
        "target's files and compiled.json into the output folder. MODEL: " + model_kinds() + ".",
    )
    c.add_argument("model", type=Path, metavar="MODEL", help="the model file")
    c.add_argument(
        "--target",
        "-t",
        required=True,
        metavar="NAME",
        help="the accelerator (`edgesynth targets` lists them); `all` or a comma-separated "
        "list (NAME,NAME) compiles for each into OUT/NAME/ and prints one table (MACs, "
        "memory, latency estimate, and with --data the top-1 agreement with the float model): "
        "a target that refuses the network is a row naming the rule it breaks, not a failure; "
        "the exit status is 1 only when no target compiles",
    )
    c.add_argument(
        "--data",
        "-d",
        type=Path,
        metavar="PATH",
        help="with -t all or a list: samples (.npy N x input, .npz (x, y) or a folder of "
        "images) to measure each target's top-1 agreement with the float model (ONNX Runtime) on",
    )
    c.add_argument(
        "--labels",
        type=Path,
        metavar="NPY",
        help="with --data: one integer class per sample; the table adds each target's accuracy",
    )
    c.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="with -t all or a list: also write the table as JSON",
    )
    c.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a target's option (repeatable); an unknown KEY is refused naming the ones the "
        "target takes",
    )
    c.add_argument(
        "--export-integer-onnx",
        type=Path,
        metavar="FILE",
        help="a float model, for a target that quantizes it into integer ONNX (gap8): also "
        "write that network as RequantShift ONNX (what `edgesynth pulp compile` reads)",
    )
    _shared_compile_arguments(c, calibration_required=False)
    c.add_argument(
        "--cpu-only",
        action="store_true",
        help="MAX78000/MAX78002: compile the whole network for the Cortex-M4 in integer C, no "
        "accelerator layers, with its estimated cycles beside the accelerator's (a float "
        "model, with --calibration)",
    )
    c.add_argument(
        "--riscv",
        action="store_true",
        help="MAX78000/MAX78002: the RISC-V core runs the network (main_riscv.c), the layers "
        "after the accelerator's (cpu_part.c) too; the Cortex-M4 starts it",
    )
    c.add_argument(
        "--report",
        action="store_true",
        help="also write OUT/report.html: the page `edgesynth report OUT` writes (layers, "
        "memory pictures, time per layer; with -t all the targets side by side)",
    )
    c.set_defaults(handler=compile_cmd)

    r = subparsers.add_parser(
        "run",
        help="run inputs through a compiled folder's bit-exact model",
        description="Run the inputs through the target's bit-exact model of the compiled "
        "program. Float inputs are quantized with the program's input scale; integer inputs "
        "are taken as the program's codes. Outputs are dequantized floats (with the host's "
        "softmax when the model ends in one), or the raw integers with --integer.",
    )
    r.add_argument("program", type=Path, metavar="DIR", help="a folder written by compile")
    r.add_argument(
        "--input",
        "-i",
        type=Path,
        required=True,
        metavar="NPY",
        help="inputs (.npy): N x input, or one sample",
    )
    r.add_argument("--output", "-o", type=Path, metavar="NPY", help="write the outputs (.npy)")
    r.add_argument(
        "--integer",
        action="store_true",
        help="integer --input holds the program's input codes; write the integer output codes",
    )
    add_overwrite(r, "the --output file")
    r.set_defaults(handler=run_cmd)

    t = subparsers.add_parser("targets", help="list the targets `compile --target` takes")
    t.set_defaults(handler=targets_cmd)


def _shared_compile_arguments(c: argparse.ArgumentParser, *, calibration_required: bool) -> None:
    """What every `compile` takes: the model's companions, the output folder, the proof."""
    c.add_argument(
        "--checkpoint",
        type=Path,
        metavar="PTH",
        help="trained weights for a vendor YAML (.pth.tar)",
    )
    c.add_argument(
        "--calibration",
        "-c",
        type=Path,
        required=calibration_required,
        metavar="NPY",
        help="float inputs (N x input) to quantize a float model with",
    )
    c.add_argument(
        "--sample-input",
        type=Path,
        metavar="NPY",
        help="a vendor YAML's sample (default tests/sample_<dataset>.npy)",
    )
    c.add_argument("--output", "-o", type=Path, required=True, metavar="DIR", help="output folder")
    c.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the compiler's files in a non-empty output folder (nothing else)",
    )
    c.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="write the files without first running them on the target's executor (such as "
        "the virtual MAX7800x or a functional model); by default a program that misses the "
        "simulator's answer is refused, nothing written",
    )


def targets_cmd(args: argparse.Namespace) -> int:
    """Print every registered target with its one-line summary."""
    from edgesynth.targets.registry import target_names

    names = target_names()  # none registered: one message, before loading any target
    from edgesynth.targets.base import get_target

    for name in names:
        print(f"{name:<10} {get_target(name).summary}")
    return 0
