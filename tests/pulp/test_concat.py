"""Channel concatenation on gap8: a float model's Concat quantized with its inputs on one scale
(value for value with the fake-quantized network), written to the RequantShift ONNX file and
read back by the integer front end, lowered to placement convolutions and additions that
compute the concatenation exactly (the generated C proved on the host); an input that cannot
take the concatenation's scale is refused naming the node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_ptq import SHAPE, float_model

from cli_helpers import run_cli, snapshot
from edgesynth.flow import load_model
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.pulp.lower import lower_graph

onnx = pytest.importorskip("onnx")


@pytest.fixture
def concat_model(tmp_path: Path) -> tuple[Path, Path]:
    model = float_model(tmp_path / "cat.onnx", extra="Concat")
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(2).normal(0, 1, (64, *SHAPE)).astype(np.float32))
    return model, cal


def test_a_float_concatenation_compiles_for_gap8(concat_model, tmp_path: Path) -> None:
    model, cal = concat_model
    direct, exported = tmp_path / "direct", tmp_path / "cat_int.onnx"
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", direct,
                "--export-integer-onnx", exported)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "known answer reproduced on the host build" in r.stdout
    ops = [n.op_type for n in onnx.load(str(exported)).graph.node]
    assert ops.count("Concat") == 1
    again = tmp_path / "again"
    assert run_cli("pulp", "compile", exported, "-o", again).exit_code == 0
    assert snapshot(direct) == snapshot(again)


def test_the_integer_front_end_refuses_a_concatenation_off_the_channels(
    concat_model, tmp_path: Path
) -> None:
    model, cal = concat_model
    exported = tmp_path / "cat_int.onnx"
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", tmp_path / "a",
                "--export-integer-onnx", exported)  # fmt: skip
    assert r.exit_code == 0, r.output
    m = onnx.load(str(exported))
    (node,) = [n for n in m.graph.node if n.op_type == "Concat"]
    node.attribute[0].i = 2
    onnx.save(m, str(exported))
    r = run_cli("pulp", "compile", exported, "-o", tmp_path / "b")
    assert r.exit_code == 1, r.output
    assert "concatenation along axis 2 (only channels, axis 1, are joined)" in r.stderr
    assert not (tmp_path / "b").exists()


def test_the_concatenation_is_the_fake_quantized_one(concat_model) -> None:
    from fakequant_check import differences, is_tie

    model, cal = concat_model
    graph = load_model(model)
    x = np.load(cal)
    diff = differences(graph, x, x)
    net = diff["_net"]
    (cat,) = [n for n in graph.nodes if isinstance(n, g.Concat)]
    assert {net.tensors[t].scale for t in cat.inputs} == {net.tensors[cat.output].scale}
    for tensor in (t for t in diff if not t.startswith("_")):
        if tensor in graph.outputs and graph.producer(tensor).op in ("conv", "linear"):
            assert is_tie(graph, diff, tensor)[diff[tensor]].all(), tensor
        else:
            assert not diff[tensor].any(), tensor


def test_an_input_that_keeps_its_own_scale_is_refused(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((2, 1, 1, 1), 1.3, np.float32), "w")
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [
        helper.make_node("AveragePool", ["image"], ["p"], name="pool", **pool),
        helper.make_node("Conv", ["p", "w"], ["c"], name="conv"),
        helper.make_node("Concat", ["p", "c"], ["y"], name="join", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "cat", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 2, 2])], [w],
    )  # fmt: skip
    model = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(0).normal(0, 1, (8, 1, 4, 4)).astype(np.float32))
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", tmp_path / "out")
    assert r.exit_code == 1, r.output
    assert "`join` (Concat)" in r.stderr and "input `p` cannot take" in r.stderr
    assert not (tmp_path / "out").exists()


def test_the_network_input_takes_the_concatenation_scale(tmp_path: Path) -> None:
    """Concat(image, 1.3 x image): the input is quantized on the concatenation's scale."""
    from fakequant_check import quantized
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((2, 1, 1, 1), 1.3, np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["image", "w"], ["c"], name="conv"),
        helper.make_node("Concat", ["image", "c"], ["y"], name="join", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "cat", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])], [w],
    )  # fmt: skip
    model = tmp_path / "cat.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    x = np.random.default_rng(0).normal(0, 1, (8, 1, 4, 4)).astype(np.float32)
    net, integer = quantized(load_model(model), x)
    assert net.tensors["image"].scale == net.tensors["c"].scale == net.tensors["y"].scale
    codes = np.clip(np.floor(x / net.tensors["image"].scale + 0.5), -128, 127).astype(np.int64)
    got = run(integer, codes, keep=False)[integer.outputs[0]]
    np.testing.assert_array_equal(got[:, :1], codes)


def test_three_inputs_signed_and_unsigned_are_proved_in_c(tmp_path: Path) -> None:
    """Concat(conv, ReLU(conv), max pool of a ReLU(conv)) read by a convolution: the signed
    concatenation takes the ReLU outputs as 7-bit codes; the host C computes the graph."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, s).astype(np.float32), n)
        for n, s in [("w1", (3, 1, 3, 3)), ("w2", (2, 1, 3, 3)), ("w3", (4, 1, 3, 3)),
                     ("w4", (5, 9, 3, 3))]
    ]  # fmt: skip
    n = helper.make_node
    same = {"pads": [1, 1, 1, 1]}
    nodes = [
        n("Conv", ["image", "w1"], ["a"], name="c1", **same),
        n("Conv", ["image", "w2"], ["b0"], name="c2", **same),
        n("Relu", ["b0"], ["b"], name="r2"),
        n("Conv", ["image", "w3"], ["c0"], name="c3", **same),
        n("Relu", ["c0"], ["c1r"], name="r3"),
        n("MaxPool", ["c1r"], ["c"], name="p3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Concat", ["a", "b", "c"], ["cat"], name="join", axis=1),
        n("Conv", ["cat", "w4"], ["y"], name="mix", **same),
    ]
    graph = helper.make_graph(
        nodes, "cat3", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 6, 6])], inits,
    )  # fmt: skip
    model = tmp_path / "cat3.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    cal = tmp_path / "cal.npy"
    np.save(cal, rng.normal(0, 1, (32, 1, 6, 6)).astype(np.float32))
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert "known answer reproduced on the host build" in r.stdout
    from fakequant_check import quantized

    net, _ = quantized(load_model(model), np.load(cal))
    assert net.tensors["cat"].signed and net.tensors["b"].bits == 7
    assert len({net.tensors[t].scale for t in ("a", "b", "c", "cat")}) == 1


def test_flattened_branches_are_concatenated(tmp_path: Path) -> None:
    """Two convolution branches, each ReLU'd and flattened, joined as vectors, then a Gemm:
    the scale reaches each branch's convolution through the views; the C is proved."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(8)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, s).astype(np.float32), n)
        for n, s in [("w1", (2, 1, 3, 3)), ("w2", (3, 1, 3, 3)), ("fc", (4, 80))]
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "w1"], ["a0"], name="c1", pads=[1, 1, 1, 1]),
        n("Relu", ["a0"], ["a1"], name="r1"),
        n("Flatten", ["a1"], ["a"], name="f1"),
        n("Conv", ["image", "w2"], ["b0"], name="c2", pads=[1, 1, 1, 1]),
        n("Relu", ["b0"], ["b1"], name="r2"),
        n("Flatten", ["b1"], ["b"], name="f2"),
        n("Concat", ["a", "b"], ["cat"], name="join", axis=1),
        n("Gemm", ["cat", "fc"], ["y"], name="head", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "flat", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits,
    )  # fmt: skip
    model = tmp_path / "flat.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    cal = tmp_path / "cal.npy"
    np.save(cal, rng.normal(0, 1, (16, 1, 4, 4)).astype(np.float32))
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert "known answer reproduced on the host build" in r.stdout


@pytest.mark.parametrize("shape", [(4, 3), (3,)])
def test_the_lowering_places_every_input_exactly(shape: tuple[int, ...]) -> None:
    """Three inputs of different types (int8, a 7-bit unsigned ReLU of it, uint8), images or
    vectors: the placement layers compute np.concatenate, in convolution/addition layers."""
    graph = g.Graph("cat")
    graph.add_input("x", (2, *shape), g.QType(8, True))
    graph.add_input("u", (3, *shape), g.QType(8, False))
    graph.add(g.Activation(name="r", inputs=["x"], outputs=["r"], kind="relu"), (2, *shape),
              g.QType(7, False))  # fmt: skip
    graph.add(g.Concat(name="cat", inputs=["x", "r", "u"], outputs=["y"]), (7, *shape),
              g.QType(9, True))  # fmt: skip
    graph.outputs = ["y"]
    layers, lowered, _ = lower_graph(graph)
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (5, 2, *shape))
    u = rng.integers(0, 256, (5, 3, *shape))
    want = np.concatenate([x, np.maximum(x, 0), u], axis=1)
    got = run(lowered, {"x": x, "u": u}, keep=False)["y"]
    np.testing.assert_array_equal(got, want)
    kinds = [layer.kind for layer in layers]
    assert kinds == ["eltwise", "conv", "conv", "conv", "eltwise", "eltwise"], kinds  # ReLU 1st
    assert layers[-1].output == "y" and layers[-1].out_storage.bits == 16
