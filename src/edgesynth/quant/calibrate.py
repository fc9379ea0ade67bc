"""Activation ranges of a float graph over calibration data, one (lo, hi) per tensor.

`minmax`: the smallest and largest value the tensor takes over the whole batch; `percentile`:
the p-th and (100 - p)-th percentiles instead (outliers are clipped rather than stretching the
scale). Every post-training quantizer observes through `sim.observe` (the first step of the one
quantization pass: then `ir.ties`, then the steps of `ir.numformat`); the calibration data
is checked against the graph's input first (`check_calibration`), so a wrong array is refused
naming the input.
"""

from __future__ import annotations

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.sim.observe import BATCH, observe

METHODS = ("minmax", "percentile")


def check_calibration(graph: g.Graph, data: np.ndarray) -> np.ndarray:
    """`data` as float64 (N, *input shape), or one message naming the input and its shape."""
    if len(graph.inputs) != 1:
        raise EdgesynthError(
            f"the model has {len(graph.inputs)} inputs ({', '.join(graph.inputs)}); "
            "calibration takes one-input models",
            key="--calibration",
        )
    name = graph.inputs[0]
    shape = graph.tensors[name].shape
    want = f"(N, {', '.join(map(str, shape))})"
    x = np.asarray(data)
    if x.dtype.kind != "f":
        raise EdgesynthError(
            f"calibration data holds {x.dtype} values; input `{name}` of the float model takes "
            f"float values {want}, as the model reads them (normalized, not pixel codes)",
            key="--calibration",
        )
    if x.ndim != len(shape) + 1 or tuple(x.shape[1:]) != tuple(shape):
        raise EdgesynthError(
            f"calibration data has shape {x.shape}; input `{name}` of the model takes {want}",
            key="--calibration",
        )
    if len(x) == 0:
        raise EdgesynthError("calibration data holds no samples", key="--calibration")
    if not np.isfinite(x).all():
        raise EdgesynthError("calibration data holds NaN or infinite values", key="--calibration")
    return x.astype(np.float64)


def tensor_ranges(
    graph: g.Graph, x: np.ndarray, method: str = "minmax", percentile: float = 99.99
) -> dict[str, tuple[float, float]]:
    """(lo, hi) of every tensor of the float `graph` evaluated on `x` (N, *input shape)."""
    if method not in METHODS:
        raise EdgesynthError(
            f"unknown calibration method `{method}`; choose {', '.join(METHODS)}",
            key="--option activations",
        )
    if not 50.0 < percentile <= 100.0:
        raise EdgesynthError(
            f"percentile {percentile} must be above 50 and at most 100", key="--option percentile"
        )
    if method == "minmax" or percentile == 100.0:
        return observe(graph, x)
    chunks: dict[str, list[np.ndarray]] = {}
    for start in range(0, len(x), BATCH):
        values = run(graph, x[start : start + BATCH], keep=True)
        for name, value in values.items():
            chunks.setdefault(name, []).append(np.asarray(value, dtype=np.float64).reshape(-1))
    ranges: dict[str, tuple[float, float]] = {}
    for name, parts in chunks.items():
        lo, hi = np.percentile(np.concatenate(parts), [100.0 - percentile, percentile])
        ranges[name] = (float(lo), float(hi))
    return ranges
