"""Run the float reference and a target's bit-exact model on the same samples and measure how
far apart they are: the output (what `edgesynth run` returns, sample by sample) and, on request,
every tensor both graphs name (the target's from `sim.graph` on the program's integer graph).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.flow import prepare_inputs, run_loaded, run_program
from edgesynth.ir.graph import Graph
from edgesynth.targets.base import Program
from edgesynth.validate.metrics import (
    ErrorMetrics,
    ErrorSums,
    agreement,
    confusion,
    first_jump,
    top1,
)
from edgesynth.validate.reference import Reference

CHUNK = 100  # samples per step: the progress bar's step, and what the per-layer values hold
Progress = Callable[[int, int], None]
MAX_CLASSES = 100  # an output with more values per sample is no classifier's: no confusion


@dataclass
class OutputResult:
    name: str
    values: int  # per sample
    metrics: ErrorMetrics | None  # None without a float reference
    target_top1: np.ndarray
    float_top1: np.ndarray | None
    labels: np.ndarray | None

    @property
    def classes(self) -> int:
        seen = [self.values, *(int(a.max()) + 1 for a in self._class_arrays() if len(a))]
        return max(seen)

    def _class_arrays(self) -> list[np.ndarray]:
        return [a for a in (self.target_top1, self.float_top1, self.labels) if a is not None]

    @property
    def agreement(self) -> float | None:
        if self.float_top1 is None:
            return None
        return agreement(self.target_top1, self.float_top1)

    def accuracy(self, which: str) -> float | None:
        predicted = self.target_top1 if which == "target" else self.float_top1
        if self.labels is None or predicted is None:
            return None
        return agreement(predicted, self.labels)

    @property
    def confusion_rows(self) -> str | None:
        """What the confusion matrix's rows count: the labels, else the float model's top-1;
        None when there is no matrix (nothing to compare, or not a classifier's output)."""
        if not 2 <= self.values <= MAX_CLASSES:
            return None
        if self.labels is not None:
            return "labels"
        return None if self.float_top1 is None else "float model"

    def confusion(self) -> np.ndarray | None:
        rows = self.confusion_rows
        if rows is None:
            return None
        truth = self.labels if rows == "labels" else self.float_top1
        return confusion(truth, self.target_top1, self.classes)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        matrix = self.confusion()
        return {
            "name": self.name,
            "values_per_sample": self.values,
            "top1_agreement": self.agreement,
            "accuracy": {"target": self.accuracy("target"), "float": self.accuracy("float")},
            "metrics": None if self.metrics is None else self.metrics.to_json(),
            "confusion": None
            if matrix is None
            else {"rows": self.confusion_rows, "columns": "target", "matrix": matrix.tolist()},
            "target_top1": self.target_top1.tolist(),
            "float_top1": None if self.float_top1 is None else self.float_top1.tolist(),
        }


@dataclass
class LayerResult:
    tensor: str
    node: str  # the program's node that computes it
    op: str  # the float model's operator that computes it
    metrics: ErrorMetrics

    def to_json(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "node": self.node, "op": self.op, **self.metrics.to_json()}


@dataclass
class Validation:
    target: str
    samples: int
    outputs: list[OutputResult]
    layers: list[LayerResult] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def jump(self) -> LayerResult | None:
        """The first layer whose error jumps (metrics.first_jump), with --per-layer."""
        if not self.layers:
            return None
        index = first_jump([lay.metrics.l2r for lay in self.layers])
        return None if index is None else self.layers[index]


def float_samples(program: Program, x: np.ndarray) -> np.ndarray:
    """The samples as the float model takes them: integer codes are dequantized with the
    program's input scale (the target takes them as they are)."""
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    fmt = program.inputs[0]
    if fmt.scale is None:
        raise EdgesynthError(
            f"the samples are integers and the program's input `{fmt.name}` has no known "
            "scale to give the float model their values; give float samples",
            key="--data",
        )
    return fmt.dequantize(x)


def validate(
    program: Program,
    reference: Reference | None,
    x: np.ndarray,
    labels: np.ndarray | None = None,
    *,
    per_layer: bool = False,
    progress: Progress | None = None,
    loaded: bool = False,
) -> Validation:
    """Compare the target with the float reference on samples `x` (float values, or the
    program's integer input codes). `loaded`: the program was read back from a compiled
    folder (its files run on the target's executor) instead of compiled here (simulated)."""
    prepare_inputs(program.inputs[0], x, "--data")  # refuse unfit samples before any work
    layers = LayerPass(program, reference) if per_layer else None
    sums = ErrorSums()
    target_top, float_top = [], []
    for start in range(0, len(x), CHUNK):
        chunk = x[start : start + CHUNK]
        got = target_outputs(program, chunk, loaded)
        target_top.append(top1(got))
        if reference is not None:
            xf = float_samples(program, chunk)
            ref = _reference_output(reference, xf, got.shape[1])
            sums.add(ref, got)
            float_top.append(top1(ref))
            if layers is not None:
                layers.add(chunk, xf)
        if progress is not None:
            progress(min(start + CHUNK, len(x)), len(x))
    output = OutputResult(
        name=program.outputs[0].name,
        values=int(got.shape[1]),
        metrics=sums.result() if reference is not None else None,
        target_top1=np.concatenate(target_top),
        float_top1=np.concatenate(float_top) if float_top else None,
        labels=labels,
    )
    result = Validation(program.target, len(x), [output])
    if layers is not None:
        result.layers = layers.results()
    return result


def target_outputs(program: Program, x: np.ndarray, loaded: bool = False) -> np.ndarray:
    """What `edgesynth run` returns for the batch (host layers and softmax applied, float32),
    flattened per sample."""
    values = (run_loaded(program, x) if loaded else run_program(program, x)).outputs()
    return values.reshape(len(values), -1)


def _reference_output(reference: Reference, xf: np.ndarray, size: int) -> np.ndarray:
    ref = reference.outputs(xf)[0].reshape(len(xf), -1)
    if ref.shape[1] != size:
        raise EdgesynthError(
            f"the float model's output has {ref.shape[1]} values per sample, the target's "
            f"{size}: they are not the same network ({reference.source})",
        )
    return ref


class LayerPass:
    """The per-layer comparison: every tensor the program's integer graph and the reference
    both name, with a scale to read the integers by, in the program's order."""

    def __init__(self, program: Program, reference: Reference | None) -> None:
        graph = program.graph
        if reference is None or not reference.tensors():
            raise EdgesynthError(
                "--per-layer compares with a float ONNX model's tensors: give one as the model "
                "or with --reference",
                key="--per-layer",
            )
        if not _has_float_scales(program):
            raise EdgesynthError(
                f"--per-layer needs the program's integer graph with the float model's scales, "
                f"which a compiled {program.target} folder does not keep; validate the model "
                f"itself (MODEL -t {program.target}) to compare layer by layer",
                key="--per-layer",
            )
        named = self.named = reference.tensors()
        self.program, self.reference = program, reference
        self.nodes = [n for n in graph.nodes if n.output in named and _scale(graph, n.output)]
        if not self.nodes:
            raise EdgesynthError(
                f"the program's graph and {reference.source} share no tensor name",
                key="--per-layer",
            )
        self.input = graph.inputs[0]
        self.sums = {n.output: ErrorSums() for n in self.nodes}
        self.input_sums = ErrorSums()

    def add(self, codes: np.ndarray, xf: np.ndarray) -> None:
        from edgesynth.sim.graph import run

        codes = prepare_inputs(self.program.inputs[0], codes, "--data")
        ints = run(self.program.graph, {self.input: codes})
        names = [n.output for n in self.nodes]
        floats = self.reference.layers(xf, names)
        self.input_sums.add(xf, self.program.inputs[0].dequantize(codes))
        for name in names:
            got = ints[name].reshape(len(codes), -1) * _scale(self.program.graph, name)
            ref = floats[name].reshape(len(codes), -1)
            if ref.shape == got.shape:
                self.sums[name].add(ref, got)

    def results(self) -> list[LayerResult]:
        rows = [LayerResult(self.input, "input", "Quantize", self.input_sums.result())]
        rows += [
            LayerResult(n.output, n.name, self.named[n.output], self.sums[n.output].result())
            for n in self.nodes
            if self.sums[n.output].count
        ]
        return rows


def _has_float_scales(program: Program) -> bool:
    """Whether the program's graph reads its integers at the float model's scales: its output
    tensor's scale is the program's output scale (a graph rebuilt from a compiled folder may
    carry placeholder scales, or no nodes)."""
    graph, want = program.graph, program.outputs[0].scale
    if not graph.nodes or want is None:
        return False
    have = _scale(graph, graph.outputs[0])
    return have is not None and math.isclose(have, want, rel_tol=1e-9)


def _scale(graph: Graph, name: str) -> float | None:
    qtype = graph.tensors[name].qtype
    return None if qtype is None else qtype.scale
