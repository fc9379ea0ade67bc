"""The integer ONNX front end against independent references: ONNX Runtime on the same graph
(NEMO) or on a twin that spells the dialect's custom nodes out in plain ONNX (Quantlab's
addition, Deeploy's RequantShift); Fractions for the exact pending arithmetic."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnxgen import Net, nemo_network, quantlab_network, random_weights, requantshift_network

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx_int import load_integer_onnx, parse_type
from edgesynth.frontends.onnx_int import symbolic as sy
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run

ort = needs.module("onnxruntime")


def _onnxruntime(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, {k: v.astype(np.float32) for k, v in feeds.items()})
    return dict(zip(names, values, strict=True))


def _ours(path: Path, feeds: dict[str, np.ndarray], types: list[str]) -> dict[str, np.ndarray]:
    net = load_integer_onnx(path, [parse_type(t) for t in types])
    values = run(net.graph, {k: v.astype(np.int64) for k, v in feeds.items()})
    model = onnx.load(str(path))
    return {o.name: values[net.onnx_to_graph[o.name]] for o in model.graph.output}


@pytest.mark.parametrize("signed", [False, True])
def test_nemo_equals_onnxruntime(tmp_path: Path, signed: bool) -> None:
    rng = np.random.default_rng(1 + signed)
    path = nemo_network(tmp_path, rng, signed=signed)
    x = rng.integers(-128 if signed else 0, 128 if signed else 256, (2, 3, 12, 12))
    want = _onnxruntime(path, {"input": x})
    got = _ours(path, {"input": x}, ["int8" if signed else "uint8"])
    for name, value in want.items():
        assert np.array_equal(got[name].reshape(value.shape), value), name


def test_quantlab_equals_its_plain_onnx_twin(tmp_path: Path) -> None:
    path = quantlab_network(tmp_path, np.random.default_rng(5))
    twin = quantlab_network(tmp_path, np.random.default_rng(5), twin=True)
    x = np.random.default_rng(6).integers(-8, 8, (3, 4, 32))
    want = _onnxruntime(twin, {"input": x})
    got = _ours(path, {"input": x}, ["int4"])
    for name in ("act_a", "act_b", "qadd", "logits"):
        assert np.array_equal(got[name].reshape(want[name].shape), want[name]), name


def test_requantshift_equals_its_plain_onnx_twin(tmp_path: Path) -> None:
    path = requantshift_network(tmp_path, np.random.default_rng(7))
    twin = requantshift_network(tmp_path, np.random.default_rng(7), twin=True)
    rng = np.random.default_rng(8)
    feeds = {k: rng.integers(-128, 128, (2, 2, 10, 10)) for k in ("x1", "x2")}
    want = _onnxruntime(twin, feeds)
    got = _ours(path, feeds, ["int8", "int8"])
    for name in ("rq_a", "rq_b", "rq_sum", "rq_out"):
        assert np.array_equal(got[name].reshape(want[name].shape), want[name]), name


def test_dialects_are_recognised(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    assert load_integer_onnx(nemo_network(tmp_path, rng)).dialect == "NEMO"
    assert load_integer_onnx(quantlab_network(tmp_path, rng), ["int4"]).dialect == "Quantlab"
    net = load_integer_onnx(requantshift_network(tmp_path, rng), ["int8", "int8"])
    assert net.dialect == "RequantShift"
    assert net.graph.inputs == ["x1", "x2"]


def _tiny(tmp_path: Path, tail: list[tuple[str, dict]], weight=None) -> Path:
    n = Net("tiny")
    x = n.input((1, 2, 4, 4))
    y = n.conv(x, np.ones((2, 2, 1, 1), np.float32) if weight is None else weight)
    y = n.clip(y, 0.0, 255.0)
    for op, attrs in tail:
        y = n.node(op, [y], **attrs)
    n.outputs.append(y)
    return n.save(tmp_path / "tiny.onnx")


def test_host_side_tail_is_dropped_with_a_warning(tmp_path: Path) -> None:
    path = _tiny(tmp_path, [("Flatten", {"axis": 1}), ("Softmax", {"axis": 1})])
    net = load_integer_onnx(path)
    assert net.dropped and "Softmax" in net.dropped[0]
    assert any("left out of the integer network" in w for w in net.graph.warnings)
    assert len(net.graph.outputs) == 1


def test_unknown_operator_is_refused_with_its_node_name(tmp_path: Path) -> None:
    path = _tiny(tmp_path, [("Softplus", {})])
    with pytest.raises(EdgesynthError, match=r"ONNX node Softplus_\d+ \(Softplus\): operator"):
        load_integer_onnx(path)


def test_non_integer_weights_are_refused(tmp_path: Path) -> None:
    path = _tiny(tmp_path, [], weight=np.full((2, 2, 1, 1), 0.5, np.float32))
    with pytest.raises(EdgesynthError, match="non-integer"):
        load_integer_onnx(path)


def test_missing_file_and_bad_input_type() -> None:
    with pytest.raises(EdgesynthError, match="no such file"):
        load_integer_onnx("/nonexistent/net.onnx")
    with pytest.raises(EdgesynthError, match="not an integer type"):
        parse_type("float8")


@given(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=4),
    st.integers(-(10**6), 10**6),
    st.integers(1, 10**5),
    st.integers(1, 50),
)
@settings(max_examples=60, deadline=None)
def test_reduce_keeps_the_exact_value(muls: list[int], add: int, div: int, factor: int) -> None:
    terms = [sy.Term(f"t{k}", np.asarray(m * factor, dtype=object)) for k, m in enumerate(muls)]
    s = sy.Sym(terms, np.asarray(add * factor, dtype=object), div * factor, (1,), True, "v")
    r = sy.reduce(s)
    xs = list(range(1, len(muls) + 1))

    def value(sym: sy.Sym) -> Fraction:
        num = sum(int(t.mul) * x for t, x in zip(sym.terms, xs, strict=True)) + int(sym.add)
        return Fraction(num, sym.div)

    assert value(r) == value(s)
    assert r.div <= s.div


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(0, 1))
@settings(max_examples=25, deadline=None)
def test_pool_sum_equals_a_depthwise_convolution_of_ones(kh: int, kw: int, stride: int, pad: int):
    rng = np.random.default_rng(kh * 10 + kw)
    x = rng.integers(-100, 100, (2, 3, 7, 6))
    graph = g.Graph("pool")
    graph.add_input("x", (3, 7, 6), g.QType(8))
    pool = g.Pool(
        name="p",
        inputs=["x"],
        outputs=["y"],
        kind="sum",
        kernel=(kh, kw),
        stride=(stride, stride),
        pads=(pad, pad, pad, pad),
    )
    ho = (7 + 2 * pad - kh) // stride + 1
    wo = (6 + 2 * pad - kw) // stride + 1
    graph.add(pool, (3, ho, wo), g.QType(16))
    ones = np.ones((3, 1, kh, kw), np.int64)
    conv = g.Conv(
        name="c",
        inputs=["x"],
        outputs=["z"],
        weight=ones,
        stride=(stride, stride),
        pads=(pad, pad, pad, pad),
        groups=3,
    )
    graph.add(conv, (3, ho, wo), g.QType(16))
    values = run(graph, x)
    assert np.array_equal(values["y"], values["z"])


def test_weights_beyond_four_bits_are_generated(tmp_path: Path) -> None:
    """The generator's own sanity: random weights fit the requested width."""
    w = random_weights(np.random.default_rng(0), (100,), bits=3)
    assert w.min() >= -4 and w.max() <= 3
