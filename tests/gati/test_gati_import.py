"""ONNX front end + `lower.fuse`: fusion into Gati layers, host-side shape arithmetic, float
semantics of the fused layers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from edgesynth.targets.gati.floatref import float_forward
from edgesynth.targets.gati.plan import import_onnx

RNG = np.random.default_rng(7)


def _init(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _model(tmp: Path, nodes, inits, in_shape, opset: int = 13) -> Path:  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp / "m.onnx"
    onnx.save(model, str(path))
    return path


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[
        0
    ]


def test_fusion_and_shape_arithmetic(tmp_path: Path) -> None:
    """Conv + Add(bias) + BN + MaxPool + Relu fuse into one layer; the flatten shape comes from
    Shape of an earlier activation; MatMul + Add is one biased FC."""
    n = helper.make_node
    ch = 6
    bn = [
        numpy_helper.from_array(RNG.uniform(0.5, 1.5, ch).astype(np.float32), "g"),
        numpy_helper.from_array(RNG.uniform(-0.2, 0.2, ch).astype(np.float32), "b"),
        numpy_helper.from_array(RNG.uniform(-0.2, 0.2, ch).astype(np.float32), "m"),
        numpy_helper.from_array(RNG.uniform(0.5, 2.0, ch).astype(np.float32), "v"),
    ]
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("Add", ["c", "cb"], ["cb_out"], name="conv_bias"),
        n("BatchNormalization", ["cb_out", "g", "b", "m", "v"], ["bn"], name="bn"),
        n("MaxPool", ["bn"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Relu", ["p"], ["r"], name="relu"),
        n("Shape", ["bn"], ["s"], name="shape"),
        n("Constant", [], ["zero"], name="k0", value=numpy_helper.from_array(np.array(0))),
        n("Gather", ["s", "zero"], ["batch"], name="gather", axis=0),
        n("Unsqueeze", ["batch", "axes0"], ["batch1"], name="unsq"),
        n("Concat", ["batch1", "minus1"], ["target"], name="concat", axis=0),
        n("Reshape", ["r", "target"], ["flat"], name="flatten"),
        n("MatMul", ["flat", "fw"], ["mm"], name="fc"),
        n("Add", ["mm", "fb"], ["y"], name="fc_bias"),
    ]
    inits = [
        _init("w", ch, 2, 3, 3),
        _init("cb", 1, ch, 1, 1),
        *bn,
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1"),
        _init("fw", ch * 4 * 4, 5),
        _init("fb", 5),
    ]
    path = _model(tmp_path, nodes, inits, ["N", 2, 8, 8])
    g = import_onnx(path)
    assert [layer.kind for layer in g.layers] == ["conv", "linear"]
    conv, fc = g.layers
    assert conv.nodes == ["conv", "conv_bias", "bn", "pool", "relu"]
    assert conv.activation == "relu" and conv.pool is not None and conv.pool.type == "max"
    assert conv.out_shape == (ch, 4, 4)
    assert fc.nodes == ["fc", "fc_bias"] and fc.flatten and fc.in_map == (ch, 4, 4)
    assert g.output_shape == (5,)
    x = RNG.standard_normal((16, 2, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(g, x), _ort(path, x), rtol=1e-4, atol=1e-5)


def test_layers_that_do_not_fuse(tmp_path: Path) -> None:
    """A pool straight after the input, two pools in a row, Relu after an average pool and a
    Sigmoid after a Relu each open an identity layer (operation `none`)."""
    n = helper.make_node
    nodes = [
        n("MaxPool", ["x"], ["p0"], name="pool_in", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p0", "w"], ["c"], name="conv"),
        n("Relu", ["c"], ["r"], name="relu"),
        n("AveragePool", ["r"], ["a"], name="avg", kernel_shape=[2, 2], strides=[2, 2]),
        n("Relu", ["a"], ["r2"], name="relu_after_avg"),
        n("MaxPool", ["r2"], ["y"], name="second_pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    path = _model(tmp_path, nodes, [_init("w", 3, 1, 3, 3)], ["N", 1, 18, 18])
    g = import_onnx(path)
    assert [(layer.kind, layer.nodes) for layer in g.layers] == [
        ("none", ["pool_in"]),
        ("conv", ["conv", "relu", "avg"]),
        ("none", ["relu_after_avg", "second_pool"]),
    ]
    assert g.layers[-1].out_shape == (3, 1, 1)
    x = RNG.standard_normal((4, 1, 18, 18)).astype(np.float32)
    np.testing.assert_allclose(float_forward(g, x), _ort(path, x), rtol=1e-4, atol=1e-5)


def test_same_padding_and_gemm_attributes(tmp_path: Path) -> None:
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv", auto_pad="SAME_UPPER", strides=[2, 2]),
        n("Flatten", ["c"], ["f"], name="flat"),
        n("Gemm", ["f", "fw", "fb"], ["y"], name="gemm", alpha=0.5, beta=2.0),
    ]
    inits = [_init("w", 4, 1, 2, 2), _init("fw", 4 * 4 * 4, 3), _init("fb", 3)]
    path = _model(tmp_path, nodes, inits, [1, 1, 7, 7], opset=11)
    g = import_onnx(path)
    assert g.layers[0].pads == (0, 0, 1, 1)  # SAME_UPPER puts the extra row/column at the end
    assert g.layers[0].conv_shape == (4, 4, 4)
    x = RNG.standard_normal((1, 1, 7, 7)).astype(np.float32)
    np.testing.assert_allclose(float_forward(g, x), _ort(path, x), rtol=1e-4, atol=1e-5)
