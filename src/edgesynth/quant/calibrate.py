"""Activation ranges of a float graph over calibration data, one (lo, hi) per tensor.

`minmax`: the smallest and largest value the tensor takes over the whole batch; `percentile`:
the p-th and (100 - p)-th percentiles instead (outliers are clipped rather than stretching the
scale). Every post-training quantizer observes through `observe` (the first step of the one
quantization pass: then `quant.ties`, then the steps of `quant.numformat`); the calibration data
is checked against the graph's input first (`check_calibration`), so a wrong array is refused
naming the input.
"""

from __future__ import annotations

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run

METHODS = ("minmax", "percentile")
BATCH = 256  # samples evaluated at once (bounded memory for every tensor of a big batch)


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


def observe(graph: g.Graph, x: np.ndarray, chunk: int = BATCH) -> dict[str, tuple[float, float]]:
    """(smallest, largest) value of every tensor of the float `graph` (its input included) over
    the batch `x`, evaluated by the graph's reference (`sim.graph`) `chunk` samples at a time
    (the whole batch at once for 0). An empty tensor's range is (0, 0)."""
    ranges: dict[str, tuple[float, float]] = {}
    chunk = chunk if chunk > 0 else max(len(x), 1)
    for start in range(0, len(x), chunk):
        for name, value in run(graph, x[start : start + chunk], keep=True).items():
            v = np.asarray(value, dtype=np.float64)
            lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
            if name in ranges:
                lo, hi = min(ranges[name][0], lo), max(ranges[name][1], hi)
            ranges[name] = (lo, hi)
    return ranges


def maxabs(ranges: dict[str, tuple[float, float]]) -> dict[str, float]:
    """The largest magnitude of each range."""
    return {name: max(-lo, hi, 0.0) for name, (lo, hi) in ranges.items()}


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
