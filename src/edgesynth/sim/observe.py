"""The ranges of a float graph's tensors over a batch: the first step of the one quantization
pass (then `ir.ties`, the tensors that share a step, and `ir.numformat`, the steps).

The graph is evaluated by its reference (`sim.graph`) a chunk of samples at a time; a target's
number format says how many (`NumberFormat.calibration_chunk`: a batched product's float results
can depend on the split).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgesynth.ir import graph as g
from edgesynth.sim.graph import run

BATCH = 256  # samples evaluated at once by default (bounded memory for every tensor of a batch)


def observe(
    graph: g.Graph, x: np.ndarray, chunk: int = BATCH, threads: int = 1
) -> dict[str, tuple[float, float]]:
    """(smallest, largest) value of every tensor of the float `graph` (its input included) over
    the batch `x`, evaluated by the graph's reference (`sim.graph`) `chunk` samples at a time
    (the whole batch at once for 0), independent operators in `threads` threads (the same
    values: each operator's products are the same calls on the same inputs). An empty
    tensor's range is (0, 0)."""
    ranges: dict[str, tuple[float, float]] = {}
    chunk = chunk if chunk > 0 else max(len(x), 1)
    for start in range(0, len(x), chunk):
        # each tensor's range is taken as it is made, and the tensor dropped after its last use
        part = x[start : start + chunk]
        run(graph, part, keep=False, visit=lambda n, v: widen(ranges, {n: v}), threads=threads)
    return ranges


def widen(ranges: dict[str, tuple[float, float]], values: Mapping[str, np.ndarray]) -> None:
    """Widen each name's range in `ranges` to hold its value in `values` (one chunk's)."""
    for name, value in values.items():
        v = np.asarray(value, dtype=np.float64)
        lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
        if name in ranges:
            lo, hi = min(ranges[name][0], lo), max(ranges[name][1], hi)
        ranges[name] = (lo, hi)


def maxabs(ranges: dict[str, tuple[float, float]]) -> dict[str, float]:
    """The largest magnitude of each range."""
    return {name: max(-lo, hi, 0.0) for name, (lo, hi) in ranges.items()}
