"""Small float graphs whose tail the MAX7800x accelerator leaves to the Cortex-M4 (the CPU part's
tests)."""

from __future__ import annotations

import numpy as np

from edgesynth.ir import graph as g


def head_graph(tail: list[tuple[str, int]], softmax: bool = True, **attrs: float) -> g.Graph:
    """Conv(1->4, 3x3) -> ReLU -> MaxPool 2 -> Flatten (64), then `tail`: ("linear", outputs)
    or (activation, 0) (`attrs`: the activations' alpha/beta), then a Softmax; random float
    weights."""
    rng = np.random.default_rng(5)
    graph = g.Graph("head")
    graph.add_input("x", (1, 8, 8))
    w = rng.normal(0, 0.5, (4, 1, 3, 3))
    graph.add(g.Conv(name="conv", inputs=["x"], outputs=["c"], weight=w,
                     bias=rng.normal(0, 0.1, 4), pads=(1, 1, 1, 1)), (4, 8, 8))  # fmt: skip
    graph.add(g.Activation(name="relu", inputs=["c"], outputs=["r"], kind="relu"), (4, 8, 8))
    graph.add(g.Pool(name="pool", inputs=["r"], outputs=["p"], kind="max", kernel=(2, 2),
                     stride=(2, 2), method="float"), (4, 4, 4))  # fmt: skip
    graph.add(g.Flatten(name="flat", inputs=["p"], outputs=["f"]), (64,))
    t, size = "f", 64
    for i, (kind, outputs) in enumerate(tail):
        name = f"{kind}{i}"
        if kind == "linear":
            weight = rng.normal(0, 1 / np.sqrt(size), (outputs, size))
            node: g.Node = g.Linear(name=name, inputs=[t], outputs=[name], weight=weight,
                                    bias=rng.normal(0, 0.1, outputs))  # fmt: skip
            size = outputs
        elif kind == "leaky_relu":
            node = g.LeakyRelu(name=name, inputs=[t], outputs=[name], alpha=0.1)
        else:
            node = g.Activation(name=name, inputs=[t], outputs=[name], kind=kind, **attrs)
        graph.add(node, (size,))
        t = name
    if softmax:
        graph.add(g.Softmax(name="softmax", inputs=[t], outputs=["y"]), (size,))
        t = "y"
    graph.outputs = [t]
    return graph
