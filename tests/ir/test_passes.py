"""Graph passes (`ir.passes`) and the graph additions they rely on (Constant, broadcasting
Eltwise, `pool_output_size`, a stable log-softmax), against NumPy and PyTorch."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgesynth.ir import graph as g
from edgesynth.ir.passes import (
    drop_identities,
    drop_unused,
    fold_batchnorm,
    fold_constant_add,
    simplify,
)
from edgesynth.sim.graph import evaluate, run

RNG = np.random.default_rng(3)


def _graph(shape: tuple[int, ...], qtype: g.QType | None = None) -> g.Graph:
    graph = g.Graph("t")
    graph.add_input("x", shape, qtype)
    return graph


def _conv(graph: g.Graph, src: str, out: str, integer: bool = False) -> g.Conv:
    c = graph.tensors[src].shape[0]
    weight = RNG.integers(-5, 5, (3, c, 1, 1)) if integer else RNG.standard_normal((3, c, 1, 1))
    node = g.Conv(name=out, inputs=[src], outputs=[out], weight=weight)
    graph.add(node, (3, *graph.tensors[src].shape[1:]), g.INT32 if integer else None)
    return node


def _const(graph: g.Graph, name: str, value: np.ndarray) -> str:
    graph.add(g.Constant(name=name, inputs=[], outputs=[name], value=value), value.shape)
    return name


def _same_values(a: g.Graph, b: g.Graph, x: np.ndarray) -> None:
    ya, yb = run(a, x, keep=False), run(b, x, keep=False)
    assert a.outputs == b.outputs
    for name in a.outputs:
        np.testing.assert_allclose(ya[name], yb[name], rtol=1e-12, atol=1e-12)


def test_constant_broadcasts_in_eltwise() -> None:
    x = RNG.standard_normal((4, 3, 2, 5))
    c = RNG.standard_normal((3, 1, 1))
    graph = _graph((3, 2, 5))
    _const(graph, "c", c)
    for kind, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply)):
        node = g.Eltwise(name=kind, inputs=["x", "c"], outputs=[kind], kind=kind)
        got = evaluate(node, x, evaluate(graph.node("c")))
        np.testing.assert_array_equal(got, fn(x, c[None]))
    ints = RNG.integers(-100, 100, (2, 3, 4))
    node = g.Eltwise(name="e", inputs=["a", "b"], outputs=["o"], kind="add")
    per_channel = np.array([[[1], [2], [3]]])
    assert np.array_equal(evaluate(node, ints, per_channel), np.add(ints, per_channel))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12),
    kernel=st.integers(1, 4),
    stride=st.integers(1, 3),
    pad=st.integers(0, 1),
    dilation=st.integers(1, 2),
    ceil=st.booleans(),
)
def test_pool_output_size_matches_torch(size, kernel, stride, pad, dilation, ceil) -> None:  # type: ignore[no-untyped-def]
    span = dilation * (kernel - 1) + 1
    assume(size + 2 * pad >= span and pad <= kernel // 2)
    x = torch.zeros(1, 1, size)
    want = F.max_pool1d(x, kernel, stride, pad, dilation, ceil_mode=ceil).shape[-1]
    assert g.pool_output_size(size, kernel, stride, pad, pad, ceil, dilation) == want


def test_log_softmax_stays_finite() -> None:
    x = RNG.standard_normal((6, 10)) * 400  # probabilities far below the smallest double
    node = g.Softmax(name="s", inputs=["a"], outputs=["b"], log=True)
    want = torch.log_softmax(torch.from_numpy(x), 1).numpy()
    np.testing.assert_allclose(evaluate(node, x), want, rtol=1e-12)


def test_fold_batchnorm_and_constant_add() -> None:
    graph = _graph((2, 3, 3))
    _conv(graph, "x", "c")
    _const(graph, "k", RNG.standard_normal((3, 1, 1)))
    graph.add(g.Eltwise(name="sub", inputs=["c", "k"], outputs=["s"], kind="sub"), (3, 3, 3))
    bn = g.BatchNorm(
        name="bn",
        inputs=["s"],
        outputs=["y"],
        gamma=RNG.uniform(0.5, 2, 3),
        beta=RNG.standard_normal(3),
        mean=RNG.standard_normal(3),
        var=RNG.uniform(0.5, 2, 3),
    )
    graph.add(bn, (3, 3, 3))
    graph.outputs = ["y"]
    x = RNG.standard_normal((4, 2, 3, 3))
    folded = simplify(graph)
    _same_values(graph, folded, x)
    assert [(n.name, n.op, n.folded, n.output) for n in folded.nodes] == [
        ("c", "conv", ["sub", "bn"], "y")
    ]
    # one pass at a time: the subtraction first (it follows the convolution), then the batchnorm
    step = fold_batchnorm(graph)
    assert [n.op for n in step.nodes] == ["conv", "constant", "eltwise", "batchnorm"]
    step = fold_batchnorm(fold_constant_add(graph))
    assert [n.op for n in step.nodes] == ["conv"]


def test_no_fold_when_unsafe() -> None:
    """Constant minus activation, a per-position constant, an integer convolution."""
    graph = _graph((2, 3, 3))
    _conv(graph, "x", "c")
    _const(graph, "k", RNG.standard_normal((3, 1, 1)))
    graph.add(g.Eltwise(name="rsub", inputs=["k", "c"], outputs=["r"], kind="sub"), (3, 3, 3))
    _conv(graph, "r", "c2")
    _const(graph, "grid", RNG.standard_normal((3, 3, 3)))
    graph.add(g.Eltwise(name="add", inputs=["c2", "grid"], outputs=["y"], kind="add"), (3, 3, 3))
    graph.outputs = ["y"]
    assert [n.op for n in simplify(graph).nodes] == [n.op for n in graph.nodes]

    ints = _graph((2, 3, 3), g.INT8)
    _conv(ints, "x", "c", integer=True)
    _const(ints, "k", np.array([[[1]], [[2]], [[3]]]))
    ints.add(g.Eltwise(name="add", inputs=["c", "k"], outputs=["y"], kind="add"), (3, 3, 3))
    ints.outputs = ["y"]
    assert [n.op for n in simplify(ints).nodes] == ["conv", "constant", "eltwise"]


def test_drop_identities_keeps_names_users_know() -> None:
    graph = _graph((2, 4, 4))
    _conv(graph, "x", "c")
    graph.add(g.Reshape(name="drop", inputs=["c"], outputs=["d"], shape=(3, 4, 4)), (3, 4, 4))
    graph.add(g.Clip(name="clip", inputs=["d"], outputs=["e"], lo=-np.inf, hi=np.inf), (3, 4, 4))
    graph.add(g.Slice(name="all", inputs=["e"], outputs=["f"], axis=0, start=0, stop=3), (3, 4, 4))
    graph.add(g.Concat(name="one", inputs=["f"], outputs=["h"]), (3, 4, 4))
    graph.add(
        g.Pool(name="p", inputs=["h"], outputs=["y"], kind="max", kernel=(1, 1), stride=(1, 1)),
        (3, 4, 4),
    )
    graph.add(g.Reshape(name="again", inputs=["x"], outputs=["z"], shape=(2, 4, 4)), (2, 4, 4))
    graph.outputs = ["y", "z"]
    out = drop_identities(graph)
    assert [(n.name, n.output) for n in out.nodes] == [("c", "y"), ("again", "z")]
    assert out.nodes[0].folded == []  # an identity is not an operation folded into another
    _same_values(graph, out, RNG.standard_normal((2, 2, 4, 4)))
    assert [n.name for n in graph.nodes][:2] == ["c", "drop"]  # the input graph is unchanged


def test_drop_identity_before_a_branch_rewires_readers() -> None:
    graph = _graph((3, 2, 2))
    graph.add(g.Reshape(name="id", inputs=["x"], outputs=["i"], shape=(3, 2, 2)), (3, 2, 2))
    graph.add(g.Eltwise(name="sum", inputs=["i", "i"], outputs=["y"], kind="add"), (3, 2, 2))
    graph.outputs = ["y"]
    out = drop_identities(graph)
    assert [(n.name, n.inputs) for n in out.nodes] == [("sum", ["x", "x"])]


def test_drop_unused() -> None:
    graph = _graph((3,))
    _const(graph, "left_over", np.ones(3))
    graph.add(g.Activation(name="r", inputs=["x"], outputs=["y"], kind="relu"), (3,))
    graph.outputs = ["y"]
    assert [n.name for n in drop_unused(graph).nodes] == ["r"]
