"""`edgesynth xdnn compile | decode | run | check-quant`: argparse wiring (`register`) and the
plain functions the commands and the tests call."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.graph import Graph
from edgesynth.outputs import save_npy_atomic, staged_directory
from edgesynth.targets.base import MANIFEST, CompileOptions, TensorFormat


# -- plain functions ------------------------------------------------------------------------
def compile_graph(
    graph: Graph, calibration: np.ndarray, out: Path, *, engine: str = "28x32", bits: int = 8
) -> dict[str, Any]:
    """Lower, check, plan and emit `graph` into `out` (staged: nothing is left on error)."""
    from edgesynth.targets.xdnn.target import XdnnTarget

    target = XdnnTarget()
    program = target.compile(graph, CompileOptions(calibration, {"engine": engine, "bits": bits}))
    with staged_directory(Path(out)) as stage:
        files = target.emit(program, stage)
        manifest = target.manifest(program, files)
        manifest["host_tail"] = program.extra["lowered"].host_tail
        manifest["engine"] = engine
        manifest["bits"] = bits
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return {"program": program, "manifest": manifest}


def read_onnx_graph(model: Path) -> Graph:
    """The float graph of an ONNX model, from the shared ONNX front end."""
    try:
        from edgesynth.frontends.onnx import read_onnx  # type: ignore[attr-defined]
    except ImportError:
        raise EdgesynthError(
            "the ONNX front end (edgesynth.frontends.onnx) is not part of this build yet"
        ) from None
    return read_onnx(model)


def decode_file(path: Path) -> str:
    """Every command of a `script.bin`, `.cmd` or ml-suite compiler `.json`, by field name."""
    from edgesynth.targets.xdnn import commands
    from edgesynth.targets.xdnn.scriptdecode import decode, describe
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
    """Float inputs through the functional model; dequantized float outputs, one row each."""
    from edgesynth.targets.base import read_manifest
    from edgesynth.targets.xdnn.target import run_folder

    manifest = read_manifest(Path(folder))
    fmt_in = TensorFormat.from_json(manifest["inputs"][0])
    fmt_out = TensorFormat.from_json(manifest["outputs"][0])
    x = np.asarray(x)
    if tuple(x.shape[1:]) != tuple(fmt_in.shape):
        raise EdgesynthError(
            f"the program takes N x {'x'.join(map(str, fmt_in.shape))} inputs, not "
            f"{'x'.join(map(str, x.shape))}",
            key="--input",
        )
    q = fmt_in.quantize(x) if np.issubdtype(x.dtype, np.floating) else x.astype(np.int64)
    y = fmt_out.dequantize(run_folder(Path(folder), q))
    tail = manifest.get("host_tail")
    if tail:
        z = y - y.max(axis=1, keepdims=True)
        e = np.exp(z)
        y = (
            np.log(e / e.sum(axis=1, keepdims=True))
            if tail == "logsoftmax"
            else e / e.sum(axis=1, keepdims=True)
        )
    return y


def check_quant_file(path: Path) -> tuple[str, int]:
    """The check-quant report and its exit status (1 when anything differs)."""
    from edgesynth.targets.xdnn.quantfile import check_quant, read_quant

    report = check_quant(read_quant(Path(path)))
    lines = [
        f"{path}: {report.layers} layers, {report.channels} channels, solver "
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


def _load_npy(path: Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise EdgesynthError(f"cannot read {what} {path}: {err}") from None


# -- argparse -------------------------------------------------------------------------------
def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("xdnn", help="Xilinx xDNN: compile, decode, run, check-quant")
    sub = p.add_subparsers(dest="xdnn_command", required=True)
    c = sub.add_parser("compile", help="compile a float ONNX CNN")
    c.add_argument("model", type=Path)
    c.add_argument("--calibration", "-c", type=Path, required=True)
    c.add_argument("--engine", default="28x32", choices=["14x32", "28x32", "56x32"])
    c.add_argument("--bits", type=int, default=8, choices=[8, 16])
    c.add_argument("--output", "-o", type=Path, required=True)
    c.set_defaults(xdnn_func=_cmd_compile)
    d = sub.add_parser("decode", help="print every command of script.bin, .cmd or .json")
    d.add_argument("file", type=Path)
    d.set_defaults(xdnn_func=_cmd_decode)
    r = sub.add_parser("run", help="run a compiled program on the functional model")
    r.add_argument("program", type=Path)
    r.add_argument("--input", "-i", type=Path, required=True)
    r.add_argument("--output", "-o", type=Path, required=True)
    r.set_defaults(xdnn_func=_cmd_run)
    q = sub.add_parser("check-quant", help="recompute every channel's (pre, scale, post)")
    q.add_argument("file", type=Path)
    q.set_defaults(xdnn_func=_cmd_check_quant)
    p.set_defaults(func=dispatch)
    return p


def dispatch(args: argparse.Namespace) -> int:
    try:
        return int(args.xdnn_func(args) or 0)
    except EdgesynthError as err:
        print(f"edgesynth: error: {err.render()}", file=sys.stderr)
        return 1


def _cmd_compile(args: argparse.Namespace) -> int:
    graph = read_onnx_graph(args.model)
    calib = _load_npy(args.calibration, "calibration data")
    result = compile_graph(graph, calib, args.output, engine=args.engine, bits=args.bits)
    prog = result["program"]
    print(
        f"{args.model.name}: {len(prog.layers)} xDNN commands on the {args.engine} engine, "
        f"{args.bits}-bit; IMEM peak {prog.plan.peak} bytes ({prog.plan.mode} regions)"
    )
    for w in prog.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"wrote {', '.join(result['manifest']['files'])} in {args.output}")
    return 0


def _cmd_decode(args: argparse.Namespace) -> int:
    print(decode_file(args.file))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    x = _load_npy(args.input, "input")
    y = run_program(args.program, x)
    written = save_npy_atomic(args.output, y.astype(np.float32))
    print(f"ran {len(x)} inputs; wrote {written} {tuple(y.shape)}")
    return 0


def _cmd_check_quant(args: argparse.Namespace) -> int:
    text, status = check_quant_file(args.file)
    print(text)
    return status


def main(argv: list[str] | None = None) -> int:
    """`python -m edgesynth.targets.xdnn.cli ...` until the main CLI wires `register` in."""
    parser = argparse.ArgumentParser(prog="edgesynth")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
