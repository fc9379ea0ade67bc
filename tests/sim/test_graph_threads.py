"""`sim.graph.run` with threads: the operators whose inputs are made run at once, and the run is
the sequential one's value for value, visit for visit, error for error."""

from __future__ import annotations

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.sim.observe import observe


def _conv(gr: g.Graph, name: str, x: str, out: int, k: int, rng: np.random.Generator) -> str:
    c, h, w = gr.tensors[x].shape
    weight = rng.normal(size=(out, c, k, k))
    pad = k // 2
    node = g.Conv(name=name, inputs=[x], outputs=[name], weight=weight, bias=rng.normal(size=out))
    node.pads = (pad, pad, pad, pad)
    gr.add(node, (out, h, w))
    gr.add(
        g.Activation(name=f"{name}_r", inputs=[name], outputs=[f"{name}_r"], kind="relu"),
        (out, h, w),
    )
    return f"{name}_r"


def _branches() -> g.Graph:
    """x -> stem -> four branches (1x1; 1x1 -> 3x3; 1x1 -> 5x5; max pool -> 1x1) -> concat ->
    a residual add -> 1x1: an inception module, float."""
    rng = np.random.default_rng(3)
    gr = g.Graph("branches")
    gr.add_input("x", (3, 12, 12))
    stem = _conv(gr, "stem", "x", 8, 3, rng)
    b1 = _conv(gr, "b1", stem, 4, 1, rng)
    b2 = _conv(gr, "b2", _conv(gr, "b2r", stem, 4, 1, rng), 6, 3, rng)
    b3 = _conv(gr, "b3", _conv(gr, "b3r", stem, 2, 1, rng), 4, 5, rng)
    pool = g.Pool(name="p", inputs=[stem], outputs=["p"], kind="max", kernel=(3, 3), stride=(1, 1))
    pool.pads = (1, 1, 1, 1)
    gr.add(pool, (8, 12, 12))
    b4 = _conv(gr, "b4", "p", 2, 1, rng)
    gr.add(g.Concat(name="cat", inputs=[b1, b2, b3, b4], outputs=["cat"]), (16, 12, 12))
    wide = _conv(gr, "wide", stem, 16, 1, rng)
    gr.add(g.Eltwise(name="sum", inputs=["cat", wide], outputs=["sum"], kind="add"), (16, 12, 12))
    y = _conv(gr, "head", "sum", 5, 1, rng)
    gr.outputs = [y]
    gr.validate()
    return gr


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_threads_give_the_sequential_values_and_visits(threads: int) -> None:
    gr = _branches()
    x = np.random.default_rng(4).normal(size=(5, 3, 12, 12))
    seen: list[str] = []
    values = run(gr, x, visit=lambda name, _v: seen.append(name))
    seen_threads: list[str] = []
    got = run(gr, x, visit=lambda name, _v: seen_threads.append(name), threads=threads)
    assert seen_threads == seen == ["x", *(n.output for n in gr.nodes)]
    assert list(got) == list(values)
    for name, value in values.items():
        assert got[name].dtype == value.dtype
        np.testing.assert_array_equal(got[name], value)
    outputs = run(gr, x, keep=False, threads=threads)
    assert list(outputs) == gr.outputs
    np.testing.assert_array_equal(outputs[gr.outputs[0]], values[gr.outputs[0]])
    assert observe(gr, x, 0, threads=threads) == observe(gr, x, 0)


def test_threads_raise_the_first_error_in_graph_order() -> None:
    """The first operator's declared shape is wrong and a later, independent one cannot run:
    both runs name the first."""
    gr = g.Graph("bad")
    gr.add_input("x", (2, 4, 4))
    gr.add(g.Activation(name="a", inputs=["x"], outputs=["a"], kind="relu"), (2, 4, 5))
    gr.add(g.Eltwise(name="b", inputs=["x", "x"], outputs=["b"], kind="xor"), (2, 4, 4))
    gr.outputs = ["a", "b"]
    x = np.zeros((1, 2, 4, 4))
    messages = []
    for threads in (1, 2):
        with pytest.raises(EdgesynthError) as err:
            run(gr, x, threads=threads)
        messages.append(str(err.value))
    assert "operator a (activation) produced (2, 4, 4), the graph says (2, 4, 5)" in messages[0]
    assert messages[1] == messages[0]
