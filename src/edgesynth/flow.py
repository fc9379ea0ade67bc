"""One flow for every target: a model file -> the network graph -> a target's program -> files,
and a compiled folder -> outputs for a batch of inputs.

    graph = load_model("net.onnx")                                   # or .yaml [+ checkpoint]
    program = compile_to(graph, name, calibration=x, out="out/")     # emit + compiled.json
    y = run_folder("out/", x)                                         # the target's bit-exact model

Front ends are chosen by the model's file type: `.onnx` (float, or integer in the NEMO /
Quantlab / RequantShift dialects when that front end is installed), and the types target packages
register readers for (the MAX7800x target: `.yaml`, the vendor's network description, with a
checkpoint or its synthetic weights).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.graph import Graph
from edgesynth.ir.intrange import int_range
from edgesynth.outputs import output_folder
from edgesynth.targets.base import (
    CompileOptions,
    Program,
    TensorFormat,
    get_target,
    read_manifest,
)


@dataclass(frozen=True)
class ModelRequest:
    """What a model reader gets besides the file (see `load_model`)."""

    checkpoint: Path | None = None  # trained weights for a description that has none
    sample_input: Path | None = None  # a description's sample input
    base_dir: Path = Path(".")  # where a description's relative files are found
    target: str | None = None  # the target the graph is read for, when known
    options: Mapping[str, Any] = field(default_factory=dict)  # the reader's own, by name


def load_model(
    model: str | Path,
    *,
    checkpoint: str | Path | None = None,
    sample_input: str | Path | None = None,
    base_dir: str | Path = ".",
    target: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Graph:
    """The network graph of a model file (see the module docstring). `.onnx` is read here
    (`options`: `input_types`, the types of an integer model's inputs, e.g. ["uint8"]); every
    other type by the reader a target package registers for its suffix
    (`edgesynth.targets.registry.ModelReader`), given a `ModelRequest` (the MAX7800x reader of
    the vendor YAML takes `device`, `avg_pool_rounding` and `check_rules` options)."""
    from edgesynth.targets.registry import model_kinds, model_reader

    path = Path(model)
    request = ModelRequest(
        checkpoint=None if checkpoint is None else Path(checkpoint),
        sample_input=None if sample_input is None else Path(sample_input),
        base_dir=Path(base_dir),
        target=target,
        options=dict(options or {}),
    )
    if path.suffix.lower() == ".onnx":
        if checkpoint is not None:
            raise EdgesynthError(
                "an ONNX model carries its weights: drop the checkpoint", file=str(checkpoint)
            )
        return _load_onnx(path, request.options)
    reader = model_reader(path)
    if reader is not None:
        graph: Graph = reader(path, request)
        return graph
    if "".join(path.suffixes[-2:]).lower().endswith((".pth.tar", ".pth")):
        raise EdgesynthError(
            "a checkpoint needs its network description: pass the YAML as the model and the "
            "checkpoint with --checkpoint (`edgesynth compile NET.yaml --checkpoint CK.pth.tar`)",
            file=str(path),
        )
    raise EdgesynthError(f"unknown model type; edgesynth reads {model_kinds()}", file=str(path))


def _load_onnx(path: Path, options: Mapping[str, Any]) -> Graph:
    if not path.is_file():
        what = "is a folder, not an ONNX file" if path.is_dir() else "no such file"
        raise EdgesynthError(what, file=str(path))
    unknown = sorted(set(options) - {"input_types"})
    if unknown:
        raise EdgesynthError(f"the ONNX reader takes no option `{unknown[0]}`", file=str(path))
    from edgesynth.frontends import onnx_int
    from edgesynth.frontends.onnxfile import read_onnx_file

    types = options.get("input_types")
    try:
        model = read_onnx_file(path)  # read once for the test and the float reader
    except EdgesynthError:
        model = None  # the float reader below says why
    if model is not None and onnx_int.is_integer_model(model):
        parsed = [onnx_int.parse_type(t) for t in types] if types else None
        net = onnx_int.load_integer_onnx(path, parsed)
        net.graph.source = f"{path} ({net.dialect})"
        net.graph.meta["path"] = str(path)
        return net.graph
    if types:
        raise EdgesynthError(
            "is a float model: input types (--input-type) are for integer ONNX models",
            file=str(path),
        )
    from edgesynth.frontends.onnx import from_model, load_onnx
    from edgesynth.ir import passes

    graph = passes.simplify(load_onnx(path) if model is None else from_model(model, str(path)))
    graph.meta["path"] = str(path)
    return graph


def load_array(path: str | Path, what: str, option: str) -> np.ndarray:
    """A .npy array the user gave (inputs, calibration data), with one clear message."""
    from edgesynth.frontends.npy import load_npy_arrays

    arrays = load_npy_arrays(Path(path), what=what)
    if len(arrays) != 1:
        raise EdgesynthError(
            f"{what} must be one array, the file holds {len(arrays)}", file=str(path), key=option
        )
    return np.asarray(arrays[0])


def compile_to(
    graph: Graph,
    target_name: str,
    *,
    calibration: np.ndarray | None = None,
    options: dict[str, Any] | None = None,
    out: str | Path | None = None,
    overwrite: bool = False,
    inputs: Iterable[str | Path | None] = (),
    verify: bool = False,
) -> tuple[Program, list[str]]:
    """Lower, check and plan `graph` for the target; with `out`, emit its files and the
    manifest through the output-folder rules (staged; nothing else in the folder is touched).
    With `verify`, the emitted files run on the target's executor first (`Target.prove`, the
    proof in `program.proof`); a failing proof raises ProofFailed and nothing is moved."""
    target = get_target(target_name)
    plan = None
    if out is not None:  # refuse a bad output folder before the long work starts
        plan = output_folder(out, overwrite=overwrite, inputs=inputs, option="--output")
    program = target.compile(graph, CompileOptions(calibration, dict(options or {})))
    files: list[str] = []
    if plan is not None:
        with plan as folder:
            files = target.emit(program, folder.staging)
            if verify:
                sample = proof_inputs(program, calibration)
                program.proof = target.prove(program, folder.staging, sample)
    return program, files


def proof_inputs(program: Program, calibration: np.ndarray | None) -> list[np.ndarray]:
    """The inputs the proof runs (a batch of one per input): the first calibration input,
    quantized with the program's input scale, or fixed pseudo-random codes over each input's
    range."""
    if calibration is not None and len(program.inputs) == 1:
        fmt = program.inputs[0]
        first = np.asarray(calibration)[:1]
        if first.size == int(np.prod(fmt.shape)):
            first = first.reshape(1, *fmt.shape)
            return [prepare_inputs(fmt, first, "calibration data")]
    rng = np.random.default_rng(0)
    batches = []
    for fmt in program.inputs:
        lo, hi = int_range(fmt.bits, fmt.signed)
        batches.append(rng.integers(lo, hi, size=(1, *fmt.shape), endpoint=True))
    return batches


@dataclass
class RunResult:
    program: Program
    codes: np.ndarray  # the target's integer outputs, (N, *shape)
    values: np.ndarray  # dequantized with the output scale (float64)

    def outputs(self) -> np.ndarray:
        """What `edgesynth run` writes: the host's part applied to the values, float32."""
        return self.program.postprocess(self.values).astype(np.float32)


def prepare_inputs(fmt: TensorFormat, x: np.ndarray, what: str = "input") -> np.ndarray:
    """A batch of inputs as the program's integer codes: float arrays are quantized with the
    program's input scale; integer arrays are taken as codes already (range checked). One
    sample without the batch axis is a batch of one."""
    x = np.asarray(x)
    if x.ndim == len(fmt.shape):
        x = x[None]
    if tuple(x.shape[1:]) != tuple(fmt.shape):
        raise EdgesynthError(
            f"{what} has shape {x.shape}; the program takes (N, {', '.join(map(str, fmt.shape))})"
            f" or one ({', '.join(map(str, fmt.shape))}) sample"
        )
    if x.dtype.kind == "f":
        if not np.isfinite(x).all():
            raise EdgesynthError(f"{what} holds NaN or infinite values")
        return fmt.quantize(x)
    if x.dtype.kind not in "iu":
        raise EdgesynthError(f"{what} must hold numbers, not {x.dtype}")
    lo, hi = int_range(fmt.bits, fmt.signed)
    if x.size and (x.min() < lo or x.max() > hi):
        raise EdgesynthError(
            f"{what} holds integers {int(x.min())}..{int(x.max())}, outside the program's "
            f"{fmt.bits}-bit {'signed' if fmt.signed else 'unsigned'} input codes {lo}..{hi}; "
            "pass float data to have it quantized with the program's input scale"
        )
    return x.astype(np.int64)


def run_program(program: Program, x: np.ndarray) -> RunResult:
    """Run a batch through a compiled (planned) program in memory: the target's simulation."""
    target = get_target(program.target)
    codes = target.simulate(program, [prepare_inputs(program.inputs[0], x)])[0]
    return RunResult(program, codes, program.outputs[0].dequantize(codes))


def run_folder(folder: str | Path, x: np.ndarray) -> RunResult:
    """Run a batch through a compiled folder's program: the files read back (`Target.load`)
    and run on the target's bit-exact model of them (`Target.run`)."""
    manifest = read_manifest(Path(folder))
    loaded = get_target(manifest["target"]).load(Path(folder), manifest)
    return run_loaded(loaded, x)


def run_loaded(loaded: Program, x: np.ndarray) -> RunResult:
    """Run a batch through a program read back from its files (`Target.load`) on the target's
    bit-exact model of them (`Target.run`)."""
    codes = get_target(loaded.target).run(loaded, [prepare_inputs(loaded.inputs[0], x)])[0]
    return RunResult(loaded, codes, loaded.outputs[0].dequantize(codes))
