"""`ir.fusion`: patterns as text, `follow` from a head, `find` over a graph."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Matcher, pattern

CONV = pattern("conv", "conv [batchnorm] [activation:relu|clip] [pool:max]")


def chain_graph(ops: list[str], outputs: tuple[int, ...] = ()) -> g.Graph:
    """x -> op0 -> op1 -> ... (a straight line of 1-channel operators); `outputs` are extra
    graph outputs (indices of the operators whose outputs the graph also returns)."""
    gr = g.Graph("chain")
    gr.add_input("x", (1, 4, 4))
    prev = "x"
    for i, op in enumerate(ops):
        name, out = f"n{i}", f"t{i}"
        if op == "conv":
            node: g.Node = g.Conv(
                name=name, inputs=[prev], outputs=[out], weight=np.ones((1, 1, 1, 1))
            )
        elif op == "batchnorm":
            one = np.ones(1)
            node = g.BatchNorm(
                name=name,
                inputs=[prev],
                outputs=[out],
                gamma=one,
                beta=0 * one,
                mean=0 * one,
                var=one,
            )
        elif op in ("relu", "sigmoid"):
            node = g.Activation(name=name, inputs=[prev], outputs=[out], kind=op)
        elif op == "clip":
            node = g.Clip(name=name, inputs=[prev], outputs=[out], lo=0.0, hi=6.0)
        else:
            node = g.Pool(
                name=name, inputs=[prev], outputs=[out], kind=op, kernel=(1, 1), stride=(1, 1)
            )
        gr.add(node, (1, 4, 4))
        prev = out
    gr.outputs = [prev, *(f"t{i}" for i in outputs)]
    return gr


def names(nodes) -> list[str]:
    return [n.name for n in nodes]


def test_members_are_taken_in_order_and_optional_ones_skipped() -> None:
    gr = chain_graph(["conv", "relu", "max"])
    assert names(Matcher(gr).follow(gr.nodes[0], CONV)) == ["n0", "n1", "n2"]
    gr = chain_graph(["conv", "batchnorm", "max"])
    assert names(Matcher(gr).follow(gr.nodes[0], CONV)) == ["n0", "n1", "n2"]


def test_a_kind_restricts_a_member() -> None:
    gr = chain_graph(["conv", "sigmoid", "max"])
    assert names(Matcher(gr).follow(gr.nodes[0], CONV)) == ["n0"]
    gr = chain_graph(["conv", "avg"])
    assert names(Matcher(gr).follow(gr.nodes[0], CONV)) == ["n0"]


def test_a_value_read_elsewhere_ends_the_chain() -> None:
    gr = chain_graph(["conv", "relu", "max"], outputs=(1,))  # relu's output is returned too
    assert names(Matcher(gr).follow(gr.nodes[0], CONV)) == ["n0", "n1"]
    assert names(Matcher(gr).follow(gr.nodes[0], CONV, taken={"n1"})) == ["n0"]


def test_a_head_that_does_not_match_gives_nothing() -> None:
    gr = chain_graph(["relu", "max"])
    assert Matcher(gr).follow(gr.nodes[0], CONV) == []


def test_a_required_member_must_be_there() -> None:
    pat = pattern("p", "conv [batchnorm] activation:relu")
    assert Matcher(gr := chain_graph(["conv", "max"])).follow(gr.nodes[0], pat) == []
    gr = chain_graph(["conv", "relu"])
    assert names(Matcher(gr).follow(gr.nodes[0], pat)) == ["n0", "n1"]


def test_backtracking_finds_the_longest_chain() -> None:
    """Greedy taking of the optional `relu` would leave the required one without a node."""
    pat = pattern("p", "conv [activation] activation:relu")
    gr = chain_graph(["conv", "relu"])
    assert names(Matcher(gr).follow(gr.nodes[0], pat)) == ["n0", "n1"]


def test_a_repeated_member_takes_a_run() -> None:
    pat = pattern("p", "conv [clip|activation:relu]* pool:max")
    gr = chain_graph(["conv", "relu", "clip", "relu", "max", "relu"])
    assert names(Matcher(gr).follow(gr.nodes[0], pat)) == ["n0", "n1", "n2", "n3", "n4"]


def test_pattern_text_round_trips() -> None:
    assert str(CONV) == "conv: conv [batchnorm] [activation:relu|clip] [pool:max]"
    assert str(pattern("p", "eltwise [requantize|clip]*")) == "p: eltwise [requantize|clip]*"
    with pytest.raises(ValueError, match="first member"):
        pattern("p", "[conv] activation")


OPS = st.sampled_from(["conv", "batchnorm", "relu", "clip", "sigmoid", "max", "avg"])


@given(st.lists(OPS, min_size=1, max_size=9))
def test_find_covers_a_line_with_disjoint_maximal_chains(ops: list[str]) -> None:
    """Each chain is the longest its pattern allows at its head; chains do not overlap; every
    conv heads one; a node no chain takes matches no pattern's head."""
    gr = chain_graph(ops)
    m = Matcher(gr)
    relu = pattern("relu", "activation:relu [pool:max]")
    matches = m.find([CONV, relu])
    taken = [n.name for match in matches for n in match.nodes]
    assert len(taken) == len(set(taken))
    for match in matches:
        others = set(taken) - {n.name for n in match.nodes}
        assert list(match.nodes) == m.follow(match.head, match.pattern, others)
    heads = {match.head.name for match in matches}
    for node, op in zip(gr.nodes, ops, strict=True):
        if op == "conv":
            assert node.name in heads
        if node.name not in taken:
            assert op not in ("conv", "relu")
