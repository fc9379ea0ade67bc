"""`edgesynth gati ...`: compile an ONNX CNN, decode a program, run it on the functional model."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import save_npy_atomic
from edgesynth.targets.gati import hw
from edgesynth.targets.gati.artifacts import (
    BLOB,
    EXPECTED,
    REPORT,
    SAMPLE,
    STREAM,
    load_npy,
    load_outputs,
    write_outputs,
)

app = typer.Typer(
    help="Gati FPGA accelerator: compile ONNX CNNs, decode programs, run the functional model.",
    no_args_is_help=True,
    add_completion=False,
)


def _user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Print an EdgesynthError as one message on stderr, no traceback, exit status 1.

    SystemExit (not typer.Exit) so that the status survives `edgesynth.cli.main`, which runs
    the app with standalone_mode=False.
    """

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EdgesynthError as exc:
            typer.echo(f"edgesynth: error: {exc.render()}", err=True)
            raise SystemExit(1) from None

    return wrapper


@app.command("compile")
@_user_errors
def compile_cmd(
    model: Annotated[Path, typer.Argument(help="Float ONNX model.")],
    calibration: Annotated[
        Path, typer.Option("--calibration", "-c", help="Calibration inputs (.npy, N x input).")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory.")],
    dispatch: Annotated[
        list[str] | None,
        typer.Option("--dispatch", help="Also send this node's (or tensor's) output to the CPU."),
    ] = None,
    on_chip_acc_bytes: Annotated[
        int,
        typer.Option(help="Bytes of on-chip partial-sum buffer assumed for OnChipAcc."),
    ] = hw.ON_CHIP_ACC_BYTES,
) -> None:
    """Compile MODEL into Gati instructions, a DWP stream and a JSON report."""
    from edgesynth.targets.gati.compiler import compile_onnx

    if not model.is_file():
        raise EdgesynthError(f"{model}: no such file")
    calib = load_npy(calibration, "calibration data")
    prog = compile_onnx(model, calib, dispatch or (), on_chip_acc_bytes)
    report = write_outputs(prog, output, calib[:1])
    typer.echo(
        f"{model.name}: {len(prog.layers)} layers, {report['instruction_count']} instructions, "
        f"{prog.dram_bytes} bytes of DRAM, about {report['total_cycles']} cycles"
    )
    for layer in report["layers"]:
        typer.echo(
            f"  {layer['index']:>3} {layer['engine'].upper():<4} {layer['name']:<24} "
            f"{'x'.join(map(str, layer['in_shape'])):>12} -> "
            f"{'x'.join(map(str, layer['out_shape'])):<10} {layer['cycles']:>9} cycles"
        )
    for w in prog.warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(f"wrote {output / BLOB}, {output / STREAM}, {output / REPORT}")
    typer.echo(
        f"known answer: {output / SAMPLE} (the first calibration sample and DISPATCH) must "
        f"make the FPGA send back {output / EXPECTED}"
    )


@app.command("decode")
@_user_errors
def decode_cmd(
    file: Annotated[Path, typer.Argument(help="Instruction blob (program.bin) or DWP stream.")],
    fmt: Annotated[str, typer.Option("--format", help="auto, blob or dwp.")] = "auto",
) -> None:
    """Print every instruction of FILE as a table of named fields."""
    from edgesynth.targets.gati.decoder import describe

    if not file.is_file():
        raise EdgesynthError(f"{file}: no such file")
    typer.echo(describe(file.read_bytes(), fmt))


@app.command("run")
@_user_errors
def run_cmd(
    program: Annotated[Path, typer.Argument(help="Directory written by `gati compile`.")],
    input: Annotated[Path, typer.Option("--input", "-i", help="Float32 inputs (.npy).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Float outputs (.npy).")],
) -> None:
    """Run the compiled program on the functional model; write the dequantized outputs."""
    from edgesynth.targets.gati.host import run_program

    stream, host = load_outputs(program)
    x = load_npy(input, "input")
    y, _ = run_program(stream, host, x)
    written = save_npy_atomic(output, y.astype(np.float32))
    typer.echo(f"ran {x.shape[0]} inputs; wrote {written} {tuple(y.shape)}")
