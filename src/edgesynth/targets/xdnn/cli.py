"""`edgesynth xdnn compile | decode | run | check-quant`: argparse wiring (`register`) and the
plain functions the commands and the tests call."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesynth.cliargs import add_overwrite
from edgesynth.errors import EdgesynthError
from edgesynth.flow_cli import TargetCompile, add_target_compile
from edgesynth.wording import plural

if TYPE_CHECKING:  # loaded by the handlers, not by `edgesynth --help`
    import numpy as np

    from edgesynth.ir.graph import Graph
    from edgesynth.targets.base import Program


# -- plain functions ------------------------------------------------------------------------
def compile_graph(
    graph: Graph,
    calibration: np.ndarray,
    out: Path,
    *,
    engine: str = "28x32",
    bits: int = 8,
    fc_on_host: bool = False,
    overwrite: bool = False,
    inputs: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """Lower, check, plan and emit `graph` into `out` (the output-folder rules: staged, nothing
    else in the folder touched)."""
    from edgesynth.flow import compile_to

    program, files = compile_to(
        graph,
        "xdnn",
        calibration=calibration,
        options={"engine": engine, "bits": bits, "fc_on_host": fc_on_host},
        out=out,
        overwrite=overwrite,
        inputs=inputs,
    )
    return {"program": program, "files": files}


def decode_file(path: Path) -> str:
    """Every command of a `script.bin`, `.cmd` or ml-suite compiler `.json`, by field name."""
    from edgesynth.targets.xdnn import commands
    from edgesynth.targets.xdnn.executor.decode import decode, describe
    from edgesynth.targets.xdnn.scriptmodel import MAGIC

    path = Path(path)
    try:
        head = path.read_bytes()[:8]
    except OSError as err:
        raise EdgesynthError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    if head == MAGIC or path.suffix == ".bin":
        return describe(decode(path.read_bytes(), str(path)))
    prog = commands.read_program(path)
    text = commands.describe(prog.commands)
    notes = [n for n in prog.notes if n.op]
    if notes:
        text += "\nnotes:\n" + "\n".join(f"    {n.text}" for n in notes)
    return text


def run_program(folder: Path, x: np.ndarray) -> np.ndarray:
    """Inputs through the functional model on the folder's files; dequantized outputs with the
    host's softmax when the model ends in one, one row per input."""
    from edgesynth.flow import run_folder

    result = run_folder(folder, x)
    return result.program.postprocess(result.values)


def check_quant_file(path: Path) -> tuple[str, int]:
    """The check-quant report and its exit status (1 when anything differs)."""
    from edgesynth.targets.xdnn.quantfile import check_quant, read_quant

    report = check_quant(read_quant(Path(path)))
    lines = [
        f"{path}: {plural(report.layers, 'layer')}, {report.channels} channels, solver "
        f"{report.policy.name} (post-shift {report.policy.postshift}, scale in "
        f"({report.policy.scale_min}, {2 * report.policy.scale_min}])"
    ]
    for m in report.mismatches[:50]:
        lines.append(
            f"  {m.layer} channel {m.channel}: file (pre, scale, post) = "
            f"{tuple(map(int, m.file))}, solver {tuple(map(int, m.solved))}"
        )
    if len(report.mismatches) > 50:
        lines.append(f"  ... {len(report.mismatches) - 50} more")
    lines += [f"  {s}" for s in report.out_of_field]
    lines.append(
        f"{len(report.mismatches)} mismatches, {len(report.out_of_field)} fields out of range"
    )
    return "\n".join(lines), int(bool(report.mismatches or report.out_of_field))


def _compile_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--engine", default="28x32", choices=["14x32", "28x32", "56x32"])
    c.add_argument("--bits", type=int, default=8, choices=[8, 16])
    c.add_argument(
        "--fc-on-host",
        action="store_true",
        help="run the trailing fully-connected layers on the host in float (as ml-suite's "
        "deployment does)",
    )


def _compile_options(args: argparse.Namespace) -> dict[str, object]:
    return {"engine": args.engine, "bits": args.bits, "fc_on_host": args.fc_on_host}


def _compile_report(args: argparse.Namespace, program: Program, files: list[str]) -> None:
    print(
        f"{args.model.name}: {len(program.layers)} xDNN commands on the {args.engine} engine, "
        f"{args.bits}-bit; IMEM peak {program.plan.peak} bytes ({program.plan.mode} regions)"
    )
    print(f"wrote {', '.join(files)} in {args.output}")


COMPILE = TargetCompile(
    target="xdnn",
    description="Compile MODEL into program.cmd, program.json, script.bin, filters.bin, "
    "quant.json, imem_map.json and compiled.json in the output folder: `edgesynth compile -t "
    "xdnn` with the xDNN options as flags.",
    arguments=_compile_arguments,
    options=_compile_options,
    report=_compile_report,
    model_help="float ONNX model",
    calibration_required=True,
)


def decode_cmd(args: argparse.Namespace) -> int:
    """Print every command of a script.bin, .cmd or compiler .json, by field name."""
    print(decode_file(args.file))
    return 0


def run_cmd(args: argparse.Namespace) -> int:
    """Run a compiled folder on the functional model; write the float outputs."""
    from edgesynth.flow import load_array
    from edgesynth.outputs import check_output_file, save_npy_atomic

    inputs = [args.input, args.program]
    check_output_file(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    import numpy as np

    x = load_array(args.input, "input", "--input")
    y = run_program(args.program, x)
    written = save_npy_atomic(
        args.output,
        y.astype(np.float32),
        overwrite=args.overwrite,
        inputs=inputs,
        option="--output",
    )
    print(f"ran {plural(len(y), 'input')}; wrote {written} {tuple(y.shape)}")
    return 0


def check_quant_cmd(args: argparse.Namespace) -> int:
    """Recompute every channel's (pre-shift, scale, post-shift) of an ml-suite quantization file."""
    text, status = check_quant_file(args.file)
    print(text)
    return status


def xdnn_main(argv: list[str]) -> int:
    """`edgesynth xdnn ARGV` (the plugin's `raw_commands` name it): the `edgesynth` parser with
    only this command, so no other command's parser is built (or its module imported). The
    program's garbage collector starts once it is parsed, as for the argparse commands."""
    from edgesynth import collector
    from edgesynth.cli import add_commands, build_parser

    parser = build_parser(commands=False)
    register(add_commands(parser))
    args = parser.parse_args(["xdnn", *argv])
    collector.start()
    return int(args.handler(args) or 0)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `xdnn compile | decode | run | check-quant` to the `edgesynth` command line."""
    xdnn = subparsers.add_parser(
        "xdnn",
        help="Xilinx xDNN target: compile, decode, run, check-quant",
        description="Xilinx xDNN: compile float ONNX CNNs to XN* commands, a CSR script, an IMEM "
        "map and a filter image; decode programs; run the functional model.",
    )
    commands = xdnn.add_subparsers(
        title="commands", dest="xdnn_command", metavar="COMMAND", required=True
    )
    add_target_compile(commands, COMPILE, help="compile a float ONNX CNN")
    d = commands.add_parser("decode", help="print every command of script.bin, .cmd or .json")
    d.add_argument("file", type=Path, metavar="FILE")
    d.set_defaults(handler=decode_cmd)
    r = commands.add_parser("run", help="run a compiled program on the functional model")
    r.add_argument("program", type=Path, metavar="DIR", help="folder written by `xdnn compile`")
    r.add_argument("--input", "-i", type=Path, required=True, metavar="NPY", help="inputs (.npy)")
    r.add_argument(
        "--output", "-o", type=Path, required=True, metavar="NPY", help="float outputs (.npy)"
    )
    add_overwrite(r, "the --output file")
    r.set_defaults(handler=run_cmd)
    q = commands.add_parser("check-quant", help="recompute every channel's (pre, scale, post)")
    q.add_argument("file", type=Path, metavar="FILE", help="an ml-suite quantization .json")
    q.set_defaults(handler=check_quant_cmd)
    xdnn.set_defaults(raw_handler=xdnn_main)
