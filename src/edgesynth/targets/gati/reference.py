"""edgesynth's integer reference of a quantized Gati network: `sim.graph.run` of the integer
graph the program computes (`program_graph.integer_graph`).

It is built from the quantized model and the documented tail semantics only; it never looks at
instructions, DRAM layouts or tiles (that is what the functional model does), so equality
between the two is evidence that the compiler and the functional model agree with the
documentation.
"""

from __future__ import annotations

import numpy as np

from edgesynth.sim.graph import run
from edgesynth.targets.gati.layers import GatiModel
from edgesynth.targets.gati.program_graph import integer_graph


def reference_layers(model: GatiModel, xq: np.ndarray) -> list[np.ndarray]:
    """Every layer's integer output (NCHW or (B, F)) for an int8 input batch."""
    graph = integer_graph(model)
    values = run(graph, np.asarray(xq).astype(np.int64))
    return [values[name] for name in graph.meta["layer_outputs"]]  # type: ignore[attr-defined]


def reference_forward(model: GatiModel, xq: np.ndarray) -> np.ndarray:
    """The last layer's integer output for an int8 input batch."""
    return reference_layers(model, xq)[-1]
