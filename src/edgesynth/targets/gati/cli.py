"""`edgesynth gati ...`: compile an ONNX CNN, decode a program, run it on the functional model.

Only argparse at import time; the handlers import the compiler (and ONNX) when they run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.cliargs import add_overwrite
from edgesynth.errors import EdgesynthError
from edgesynth.flow_cli import TargetCompile, add_target_compile
from edgesynth.targets.gati import device
from edgesynth.wording import plural

if TYPE_CHECKING:
    from edgesynth.targets.base import Program


def _compile_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--dispatch",
        action="append",
        metavar="NODE",
        help="also send this node's (or tensor's) output to the CPU (repeatable)",
    )
    c.add_argument(
        "--on-chip-acc-bytes",
        type=int,
        default=device.ON_CHIP_ACC_BYTES,
        metavar="N",
        help="bytes of on-chip partial-sum buffer assumed for OnChipAcc",
    )


def _compile_options(args: argparse.Namespace) -> dict[str, object]:
    return {"dispatch": tuple(args.dispatch or ()), "on_chip_acc_bytes": args.on_chip_acc_bytes}


def _compile_report(args: argparse.Namespace, program: Program, files: list[str]) -> None:
    """The layer table, the files written and the known answer."""
    from edgesynth.targets.base import MANIFEST
    from edgesynth.targets.gati.emit import BLOB, EXPECTED, REPORT, SAMPLE, STREAM
    from edgesynth.targets.gati.report import build_report
    from edgesynth.targets.gati.target import GatiProgram

    assert isinstance(program, GatiProgram) and program.plan is not None
    prog, output = program.plan.compiled, args.output
    report = build_report(prog)
    print(
        f"{args.model.name}: {plural(len(prog.layers), 'layer')}, "
        f"{report['instruction_count']} instructions, "
        f"{prog.dram_bytes} bytes of DRAM, about {report['total_cycles']} cycles"
    )
    for layer in report["layers"]:
        print(
            f"  {layer['index']:>3} {layer['engine'].upper():<4} {layer['name']:<24} "
            f"{'x'.join(map(str, layer['in_shape'])):>12} -> "
            f"{'x'.join(map(str, layer['out_shape'])):<10} {layer['cycles']:>9} cycles"
        )
    print(f"wrote {', '.join(str(output / n) for n in (BLOB, STREAM, REPORT, MANIFEST))}")
    if SAMPLE in files:
        print(
            f"known answer: {output / SAMPLE} (the first calibration sample and DISPATCH) must "
            f"make the FPGA send back {output / EXPECTED}"
        )


COMPILE = TargetCompile(
    target="gati",
    description="Compile MODEL into Gati instructions (program.bin), a DWP stream "
    "(program.dwp), a JSON report, compiled.json and, for a float model, a known-answer pair "
    "(sample.dwp, sample_expected.dwp) in the output folder: `edgesynth compile -t gati` "
    "with the Gati options as flags.",
    arguments=_compile_arguments,
    options=_compile_options,
    report=_compile_report,
    model_help="float ONNX model (or an integer one)",
    calibration_required=False,
)


def decode_cmd(args: argparse.Namespace) -> int:
    """Print every instruction of FILE as a table of named fields."""
    from edgesynth.targets.gati.decoder import describe

    path: Path = args.file
    if not path.is_file():
        what = "is a folder, not a program file" if path.is_dir() else "no such file"
        raise EdgesynthError(what, file=str(path))
    data = path.read_bytes()
    if data.startswith((b"\x93NUMPY", b"PK\x03\x04")):
        what = "a NumPy .npy file" if data[:1] == b"\x93" else "a zip archive (a checkpoint?)"
        raise EdgesynthError(
            f"is {what}, not a Gati program (program.bin or a .dwp stream from `gati compile`).",
            file=str(path),
        )
    try:
        text = describe(data, args.format)
    except EdgesynthError as err:
        if err.file is None:
            err.file = str(path)
            err.args = (err.render(),)
        raise
    print(text)
    return 0


def run_cmd(args: argparse.Namespace) -> int:
    """Run the compiled program on the functional model; write the dequantized outputs."""
    import numpy as np

    from edgesynth.outputs import check_output_file, save_npy_atomic
    from edgesynth.targets.gati.emit import load_float_npy, load_outputs
    from edgesynth.targets.gati.host import run_program

    inputs = [args.input, args.program]
    check_output_file(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    stream, host = load_outputs(args.program)
    x = load_float_npy(args.input, "input")
    y, _ = run_program(stream, host, x)
    written = save_npy_atomic(
        args.output,
        y.astype(np.float32),
        overwrite=args.overwrite,
        inputs=inputs,
        option="--output",
    )
    print(f"ran {plural(x.shape[0], 'input')}; wrote {written} {tuple(y.shape)}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `gati compile | decode | run` to the `edgesynth` command line."""
    gati = subparsers.add_parser(
        "gati",
        help="Gati FPGA systolic-array target: compile, decode, run",
        description="Gati FPGA accelerator: compile ONNX CNNs, decode programs, run the "
        "functional model.",
    )
    commands = gati.add_subparsers(
        title="commands", dest="gati_command", metavar="COMMAND", required=True
    )

    add_target_compile(
        commands,
        COMPILE,
        help="compile an ONNX model into instructions, a DWP stream and a report",
    )

    d = commands.add_parser(
        "decode",
        help="print every instruction of a program, field by field",
        description="Print every instruction of FILE (program.bin or a DWP stream) as a table "
        "of named fields.",
    )
    d.add_argument("file", type=Path, metavar="FILE", help="program.bin or a .dwp stream")
    d.add_argument("--format", choices=("auto", "blob", "dwp"), default="auto")
    d.set_defaults(handler=decode_cmd)

    r = commands.add_parser(
        "run",
        help="run a compiled program on the functional model",
        description="Run the compiled program on the functional model; write the "
        "dequantized outputs.",
    )
    r.add_argument("program", type=Path, metavar="DIR", help="folder written by `gati compile`")
    r.add_argument(
        "--input", "-i", type=Path, required=True, metavar="NPY", help="float inputs (.npy)"
    )
    r.add_argument(
        "--output", "-o", type=Path, required=True, metavar="NPY", help="float outputs (.npy)"
    )
    add_overwrite(r, "the --output file")
    r.set_defaults(handler=run_cmd)
