"""Float evaluation of the fused Gati layers (what ONNX Runtime computes), for calibration.

Each layer runs as the float graph operators it fused (convolution or linear with its bias,
activation, pooling), evaluated by `edgesynth.sim.graph`: the one reference semantics.
`calibration_ranges` gives the largest magnitudes the quantizer needs.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from edgesynth.ir import graph as g
from edgesynth.sim.graph import evaluate
from edgesynth.sim.observe import maxabs, widen
from edgesynth.targets.gati.chain import FusedLayer, LayerChain, PoolSpec


def _node(cls: type[g.Node], **params: object) -> g.Node:
    return cls(name="layer", inputs=["in"], outputs=["out"], **params)


def _pool(spec: PoolSpec) -> g.Node:
    if spec.type == "global_avg":
        return _node(g.GlobalPool, kind="avg", method="float")
    return _node(
        g.Pool,
        kind=spec.type,
        kernel=spec.kernel,
        stride=spec.strides,
        pads=spec.pads,
        ceil=spec.ceil,
        method="float",
        count_include_pad=spec.count_include_pad,
    )


def layer_forward(
    x: np.ndarray, layer: FusedLayer, other: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pre-activation, activation before pooling, output) of one layer for a float batch
    (`other`: an element-wise layer's second operand)."""
    if layer.kind == "conv":
        conv = _node(
            g.Conv,
            weight=layer.weight,
            bias=layer.bias,
            stride=layer.strides,
            pads=layer.pads,
            dilation=layer.dilations,
            groups=layer.group,
        )
        pre = evaluate(conv, x)
    elif layer.kind == "linear":
        pre = evaluate(_node(g.Linear, weight=layer.weight, bias=layer.bias), x)
    elif layer.kind == "eltwise":
        node = g.Eltwise(name="layer", inputs=["a", "b"], outputs=["out"], kind=layer.eltwise)
        pre = evaluate(node, x, other)
    else:
        pre = x
    act = evaluate(_node(g.Activation, kind=layer.activation), pre) if layer.activation else pre
    if layer.act_bound is not None:
        act = np.minimum(act, layer.act_bound)
    y = evaluate(_pool(layer.pool), act) if layer.pool is not None else act
    return pre, act, y


def operand(outputs: list[np.ndarray], x: np.ndarray, producers: list[int]) -> np.ndarray:
    """An operand from the layers' outputs (-1: the input `x`), concatenated along channels."""
    parts = [x if j < 0 else outputs[j] for j in producers]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def iter_layers(
    graph: LayerChain, x: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    x = np.asarray(x, dtype=np.float64)
    outputs: list[np.ndarray] = []
    for i, layer in enumerate(graph.layers):
        ops = [operand(outputs, x, src) for src in graph.sources_of(i)]
        pre, act, h = layer_forward(ops[0], layer, ops[1] if len(ops) > 1 else None)
        outputs.append(h)
        yield pre, act, h


def float_forward(graph: LayerChain, x: np.ndarray) -> np.ndarray:
    """The graph's float output for a batch (host post-processing included)."""
    outs = [y for _, _, y in iter_layers(graph, x)]
    out = outs[-1].reshape(outs[-1].shape[0], *graph.output_shape)
    if graph.host_post is None:
        return out
    return host_post(graph.host_post, out.reshape(out.shape[0], -1))


def host_post(kind: str | None, y: np.ndarray) -> np.ndarray:
    """The host's Softmax/LogSoftmax over the class axis."""
    if kind is None:
        return y
    return evaluate(_node(g.Softmax, log=kind == "logsoftmax"), y)


def calibration_ranges(
    graph: LayerChain, x: np.ndarray, chunk: int
) -> tuple[float, list[float], list[float]]:
    """(max |input|, per-layer max |pre-activation|, per-layer max |activation|), observed
    chunk by chunk as the one quantization pass observes (`sim.observe`).

    The activation is taken before pooling: that is where the tail block quantizes."""
    ranges: dict[str, tuple[float, float]] = {"input": (0.0, 0.0)}
    n = len(graph.layers)
    for start in range(0, x.shape[0], chunk):
        values = {"input": x[start : start + chunk]}
        for i, (pre, act, _) in enumerate(iter_layers(graph, x[start : start + chunk])):
            values[f"pre{i}"], values[f"act{i}"] = pre, act
        widen(ranges, values)
    m = maxabs(ranges)
    return (
        m["input"],
        [m.get(f"pre{i}", 0.0) for i in range(n)],
        [m.get(f"act{i}", 0.0) for i in range(n)],
    )
