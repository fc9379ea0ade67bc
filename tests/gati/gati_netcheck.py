"""Helpers: export a torch module, compile it for Gati, run the functional model, compare."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gati_mnist_models as mm
import numpy as np

from edgesynth.targets.gati.host import host_contract, run_program
from edgesynth.targets.gati.plan import CompiledProgram, compile_onnx
from edgesynth.targets.gati.quantize import quantize_input
from edgesynth.targets.gati.reference import reference_layers


@dataclass
class Outcome:
    prog: CompiledProgram
    y: np.ndarray  # functional model, dequantized
    y_ort: np.ndarray
    ints: dict[int, np.ndarray]
    ref: list[np.ndarray]

    @property
    def rel_error(self) -> float:
        return float(np.abs(self.y - self.y_ort).max() / np.abs(self.y_ort).max())


def export_module(module, path: Path, shape: tuple[int, ...], opset: int = 13) -> Path:  # type: ignore[no-untyped-def]
    import torch

    module.eval()
    torch.onnx.export(
        module,
        (torch.zeros(1, *shape),),
        str(path),
        dynamo=False,
        opset_version=opset,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
    )
    return path


def run_and_compare(path: Path, calibration: np.ndarray, x: np.ndarray, **kw) -> Outcome:  # type: ignore[no-untyped-def]
    """Compile with every layer dispatched; assert functional model == reference, per layer."""
    first = compile_onnx(path, calibration, **kw)
    names = [c.name for c in first.layers]
    prog = compile_onnx(path, calibration, dispatch=names, **kw)
    host = host_contract(prog)
    y, ints = run_program(prog.stream, host, x)
    ref = reference_layers(prog.model, quantize_input(x, host["input"]["scale"]))
    for i, r in enumerate(ref):
        assert np.array_equal(ints[i], r), f"layer {i} ({names[i]}) differs from the reference"
    return Outcome(prog, y, mm.ort_run(path, x), ints, ref)
