"""`ir.fusion`: patterns as text, `follow` from a head, `find` over a graph."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Edge, Matcher, pattern, tree

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


# -- tree patterns: backward, several operands ---------------------------------------------------


def dag(*lines: str, outputs: tuple[str, ...] = ()) -> g.Graph:
    """Operators written `out = op a b ...` (op: pool, clip, relu, add, concat, reshape), in
    order; `x` and `y` are the inputs; the last line's output and `outputs` are returned."""
    gr = g.Graph("dag")
    for name in ("x", "y"):
        gr.add_input(name, (2, 4, 4))
    out = ""
    for line in lines:
        out, _, op, *ins = line.split()
        kw = {"name": out.upper(), "inputs": ins, "outputs": [out]}
        if op == "pool":
            node: g.Node = g.Pool(**kw, kind="max", kernel=(1, 1), stride=(1, 1))
        elif op == "clip":
            node = g.Clip(**kw, lo=-128, hi=127)
        elif op == "relu":
            node = g.Activation(**kw, kind="relu")
        elif op == "add":
            node = g.Eltwise(**kw, kind="add")
        elif op == "concat":
            node = g.Concat(**kw)
        else:
            node = g.Reshape(**kw, shape=(2, 4, 4))
        gr.add(node, (2, 4, 4))
    gr.outputs = [out, *outputs]
    return gr


def at(gr: g.Graph, tensor: str) -> list[Edge]:
    return [Edge(tensor, None)]


def leaves(match) -> list[tuple[str, str | None]]:
    return [(t, None if r is None else r.name) for t, r in match.leaves]


POOLED = tree("pooled", "clip(eltwise([pool]*))")


def test_tree_text_round_trips() -> None:
    for text in (
        "clip?int8(eltwise!device([pool!alike]*))",
        "pool!padless([clip?int8(eltwise)])",
        "[concat&?inside]*",
        "eltwise(pool, _)",
        "flatten|reshape?flat",
    ):
        assert str(tree("p", text)) == f"p: {text}"
    for bad, why in (
        ("", "member expected"),
        ("_", "root must be a member"),
        ("pool(", "member expected"),
        ("pool(clip", r"`\)` expected"),
        ("pool clip", "nothing may follow"),
        ("eltwise(_*)", "no parentheses"),
        ("[pool", r"`\]` expected"),
    ):
        with pytest.raises(ValueError, match=why):
            tree("p", bad)


def test_each_operand_may_be_pooled() -> None:
    gr = dag("a = pool x", "s = add a y", "c = clip s")
    match = Matcher(gr).match(POOLED, at(gr, "c"))
    assert match is not None
    assert names(match.nodes) == ["C", "S", "A"]  # pre-order
    assert leaves(match) == [("x", "A"), ("y", "S")]
    assert [names(n for n, _ in step) for step in match.steps] == [["C", "S"], ["A"]]


def test_a_value_read_elsewhere_is_taken_as_it_is() -> None:
    gr = dag("a = pool x", "r = relu a", "s = add a y", "c = clip s", outputs=("r",))
    match = Matcher(gr).match(POOLED, at(gr, "c"))
    assert match is not None and names(match.nodes) == ["C", "S"]
    assert leaves(match) == [("a", "S"), ("y", "S")]
    gr = dag("a = pool x", "s = add a y", "c = clip s", outputs=("a",))  # a graph output
    match = Matcher(gr).match(POOLED, at(gr, "c"))
    assert match is not None and names(match.nodes) == ["C", "S"]
    # the tensor the match starts from is checked against the reader given with it
    assert Matcher(gr).match(POOLED, [Edge("c", gr.nodes[0])]) is None


def test_a_shared_member_lets_other_operators_read_it() -> None:
    gr = dag("k = concat x y", "a = pool k", "s = add k a")
    strict, shared = tree("p", "[concat]*"), tree("p", "[concat&]*")
    edges = [Edge("k", gr.nodes[2]), Edge("a", gr.nodes[2])]
    found = Matcher(gr).match(strict, edges)
    assert found is not None and found.nodes == ()
    found = Matcher(gr).match(shared, edges)
    assert found is not None and names(found.nodes) == ["K"]
    assert leaves(found) == [("x", "K"), ("y", "K"), ("a", "S")]


def test_a_guard_decides_and_sees_what_was_matched_before() -> None:
    gr = dag("a = pool x", "b = pool y", "s = add a b", "c = clip s")
    seen: list[tuple[str, set[str]]] = []

    def second_only(node: g.Node, matched) -> bool:
        seen.append((node.name, set(matched)))
        return node.name == "B"

    pat = tree("p", "clip(eltwise([pool?second]*))")
    match = Matcher(gr).match(pat, at(gr, "c"), guards={"second": second_only})
    assert match is not None and names(match.nodes) == ["C", "S", "B"]
    assert seen == [("A", {"C", "S"}), ("B", {"C", "S"})]
    with pytest.raises(ValueError, match="no guard `second`"):
        Matcher(gr).match(pat, at(gr, "c"))


def test_an_optional_subtree_matches_whole_or_not_at_all() -> None:
    pat = tree("p", "pool([clip(eltwise)])")
    gr = dag("r = relu x", "c = clip r", "p = pool c")  # a clip, but of no eltwise
    match = Matcher(gr).match(pat, at(gr, "p"))
    assert match is not None and names(match.nodes) == ["P"]
    assert leaves(match) == [("c", "P")]
    gr = dag("s = add x y", "c = clip s", "p = pool c")
    match = Matcher(gr).match(pat, at(gr, "p"))
    assert match is not None and names(match.nodes) == ["P", "C", "S"]


def test_a_required_member_and_the_number_of_inputs_must_be_there() -> None:
    pat = tree("p", "eltwise(pool, _)")
    gr = dag("a = pool x", "s = add y a")
    assert Matcher(gr).match(pat, at(gr, "s")) is None
    gr = dag("a = pool x", "s = add a y")
    match = Matcher(gr).match(pat, at(gr, "s"))
    assert match is not None and leaves(match) == [("x", "A"), ("y", "S")]
    assert Matcher(gr).match(tree("p", "eltwise(pool)"), at(gr, "s")) is None
    assert Matcher(gr).match(POOLED, at(gr, "s")) is None  # the root is no clip


def test_an_operator_joins_one_match_once_and_never_a_taken_one() -> None:
    gr = dag("a = pool x", "s = add a a", "c = clip s")
    match = Matcher(gr).match(POOLED, at(gr, "c"))
    assert match is not None and names(match.nodes) == ["C", "S", "A"]
    assert leaves(match) == [("x", "A"), ("a", "S")]  # the second operand: `a` as it is
    match = Matcher(gr).match(POOLED, at(gr, "c"), taken={"A"})
    assert match is not None and names(match.nodes) == ["C", "S"]
    assert Matcher(gr).match(POOLED, at(gr, "c"), taken={"S"}) is None


def test_taking_a_match_refuses_a_step_before_taking_any_of_it() -> None:
    gr = dag("a = pool x", "b = pool y", "s = add a b", "c = clip s")
    pat = tree("p", "clip!first(eltwise!op([pool!pool]*))")
    match = Matcher(gr).match(pat, at(gr, "c"))
    assert match is not None
    log: list[str] = []

    def refuse(name: str, node: g.Node) -> None:
        log.append(f"{name}?{node.name}")
        if node.name == "B":
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        match.take(refuse, lambda node: log.append(node.name))
    assert log == ["first?C", "op?S", "C", "S", "pool?A", "A", "pool?B"]


def test_first_gives_the_first_pattern_that_matches() -> None:
    gr = dag("a = pool x", "s = add a y", "c = clip s", "p = pool c")
    pats = [POOLED, tree("pool", "pool([clip(eltwise)])"), tree("any", "pool")]
    match = Matcher(gr).first(pats, at(gr, "p"))
    assert match is not None and match.pattern.name == "pool"
    assert Matcher(gr).first(pats[:1], at(gr, "p")) is None
    with pytest.raises(ValueError, match="matches one tensor"):
        Matcher(gr).match(POOLED, [Edge("c", None), Edge("a", None)])


# Each operand of the element-wise operation: x as it is, a pooling of x read only by the
# operation, a pooling also read by a ReLU, or one a layer took already.
OPERAND = st.sampled_from(["plain", "pooled", "shared", "taken"])


@given(st.lists(OPERAND, min_size=1, max_size=5))
def test_each_operand_takes_its_pooling_when_only_the_operation_reads_it(kinds) -> None:
    """Every matched operator's inputs are leaves it reads or matched operators; each leaf is
    read by the operator the match gives with it; a pooling is left out exactly when another
    operator reads it or it was taken."""
    lines, operands = [], []
    for i, kind in enumerate(kinds):
        if kind == "plain":
            operands.append("x")
            continue
        lines.append(f"p{i} = pool x")
        if kind == "shared":
            lines.append(f"r{i} = relu p{i}")
        operands.append(f"p{i}")
    gr = dag(*lines, "s = add " + " ".join(operands), "c = clip s")
    taken = {f"P{i}" for i, kind in enumerate(kinds) if kind == "taken"}
    match = Matcher(gr).match(POOLED, at(gr, "c"), taken)
    assert match is not None
    matched = {n.name: n for n in match.nodes}
    expected = ["C", "S"] + [f"P{i}" for i, kind in enumerate(kinds) if kind == "pooled"]
    assert list(matched) == expected
    produced = {n.output for n in match.nodes}
    slots = [(t, n.name) for n in match.nodes for t in n.inputs]
    assert sorted(leaves(match) + [(n.output, "?") for n in match.nodes[1:]]) == sorted(
        [(t, r) if t not in produced else (t, "?") for t, r in slots]
    )
    for t, reader in leaves(match):
        assert reader in matched and t in matched[reader].inputs
