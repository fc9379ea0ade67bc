"""Models Gati cannot run are refused with the ONNX node's name and the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cli_helpers import run_cli
from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati.plan import compile_onnx

RNG = np.random.default_rng(0)


def _w(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32) * 0.1, name)


def _save(
    tmp: Path,
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    in_shape: list[int | str],
    out_name: str = "y",
    inputs: list[str] = ["x"],  # noqa: B006
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(i, TensorProto.FLOAT, in_shape) for i in inputs],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp / "model.onnx"
    onnx.save(model, str(path))
    return path


def _conv(name: str, x: str, y: str, w: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node("Conv", [x, w], [y], name=name, **attrs)


def _refused(path: Path, shape: tuple[int, ...], match: str) -> EdgesynthError:
    calib = np.zeros((4, *shape), dtype=np.float32) + 0.5
    with pytest.raises(EdgesynthError, match=match) as info:
        compile_onnx(path, calib)
    assert str(path) in str(info.value)
    return info.value


def test_unsupported_operator(tmp_path: Path) -> None:
    nodes = [
        _conv("conv_a", "x", "c", "w"),
        helper.make_node("Elu", ["c"], ["y"], name="elu_1", alpha=0.1),
    ]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"ONNX node `elu_1` \(Elu\): operator not supported")


def test_an_operator_the_graph_has_but_gati_lacks(tmp_path: Path) -> None:
    nodes = [
        _conv("conv_a", "x", "c", "w"),
        helper.make_node("LeakyRelu", ["c"], ["y"], name="leaky_1", alpha=0.1),
    ]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"ONNX node `leaky_1` \(LeakyRelu\): `leaky_relu` has no Gati")


def test_kernel_larger_than_the_engine(tmp_path: Path) -> None:
    nodes = [_conv("conv5x5", "x", "c", "w"), helper.make_node("Relu", ["c"], ["y"], name="r")]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 5, 5)], ["N", 1, 12, 12])
    _refused(
        path, (1, 12, 12), r"ONNX node `conv5x5`: kernel 5x5 has 25 taps, larger than the engine"
    )


def test_dimension_overflows_its_field(tmp_path: Path) -> None:
    nodes = [_conv("wide_conv", "x", "c", "w"), helper.make_node("Relu", ["c"], ["y"], name="r")]
    path = _save(tmp_path, nodes, [_w("w", 2, 1, 3, 3)], [1, 1, 4, 1100])
    _refused(path, (1, 4, 1100), r"`wide_conv`: input width = 1100 overflows CONV\.IW \(10 bits")


def test_fc_rows_overflow(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "w"], ["y"], name="big_fc", transB=1),
    ]
    w = numpy_helper.from_array(np.zeros((2, 70000), dtype=np.float32), "w")
    path = _save(tmp_path, nodes, [w], ["N", 70000])
    _refused(path, (70000,), r"`big_fc`: input features = 70000 overflows FC\.WeightRows \(16 bits")


def test_too_many_channels(tmp_path: Path) -> None:
    nodes = [_conv("fat", "x", "c", "w"), helper.make_node("Relu", ["c"], ["y"], name="r")]
    path = _save(tmp_path, nodes, [_w("w", 1100, 1, 1, 1)], ["N", 1, 2, 2])
    _refused(path, (1, 2, 2), r"`fat`: output channels = 1100 overflows CONV\.KN")


def test_add_of_two_activations_is_named(tmp_path: Path) -> None:
    nodes = [
        _conv("c1", "x", "a", "w"),
        helper.make_node("Relu", ["a"], ["b"], name="relu1"),
        _conv("c2", "x2", "b2", "w"),
        helper.make_node("Add", ["b", "b2"], ["y"], name="sum"),
    ]
    path = _save(tmp_path, nodes, [_w("w", 1, 1, 3, 3)], ["N", 1, 8, 8], inputs=["x"])
    _refused(path, (1, 8, 8), r"`c2` \(Conv\): reads `x2`")


def test_batchnorm_that_cannot_be_folded(tmp_path: Path) -> None:
    ch = 4
    bn = [numpy_helper.from_array(np.ones(ch, np.float32), n) for n in ("g", "b", "m", "v")]
    nodes = [
        _conv("c1", "x", "a", "w"),
        helper.make_node("Relu", ["a"], ["r"], name="relu1"),
        helper.make_node("BatchNormalization", ["r", "g", "b", "m", "v"], ["y"], name="bn_after"),
    ]
    path = _save(tmp_path, nodes, [_w("w", ch, 1, 3, 3), *bn], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"`bn_after` \(BatchNormalization\): BatchNormalization is folded")


def test_maxpool_over_negative_values(tmp_path: Path) -> None:
    nodes = [
        _conv("c1", "x", "a", "w"),
        helper.make_node(
            "MaxPool", ["a"], ["y"], name="pool_raw", kernel_shape=[2, 2], strides=[2, 2]
        ),
    ]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"`pool_raw`: MaxPool over values that can be negative")


def test_grouped_and_strided_convolutions(tmp_path: Path) -> None:
    nodes = [_conv("dw", "x", "y", "w", group=4)]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 4, 8, 8])
    _refused(path, (4, 8, 8), r"`dw`: grouped convolution \(group=4\)")
    nodes = [_conv("rect", "x", "y", "w", strides=[1, 2])]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"`rect`: strides \(1, 2\) differ")
    nodes = [_conv("dil", "x", "y", "w", dilations=[2, 2])]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"`dil`: dilation \(2, 2\)")
    nodes = [_conv("uneven", "x", "y", "w", pads=[1, 1, 2, 2])]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"`uneven`: convolution pads \(top, left, bottom, right\)")


def test_average_pool_that_the_tree_cannot_do(tmp_path: Path) -> None:
    nodes = [
        _conv("c1", "x", "a", "w"),
        helper.make_node("Relu", ["a"], ["r"], name="relu1"),
        helper.make_node(
            "AveragePool", ["r"], ["y"], name="avg_pad", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
    ]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3)], ["N", 1, 8, 8])
    _refused(path, (1, 8, 8), r"`avg_pad`: AveragePool with padding and count_include_pad=0")


def test_reshape_that_is_not_a_flatten(tmp_path: Path) -> None:
    shape = numpy_helper.from_array(np.array([0, 2, 18], dtype=np.int64), "s")
    nodes = [
        _conv("c1", "x", "a", "w"),
        helper.make_node("Reshape", ["a", "s"], ["y"], name="odd_reshape"),
    ]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 3, 3), shape], ["N", 1, 5, 5])
    _refused(path, (1, 5, 5), r"`odd_reshape` \(Reshape\): Reshape of \(4, 3, 3\)")


def test_two_inputs(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "x2"], ["y"], name="a")]
    path = _save(tmp_path, nodes, [], ["N", 1, 4, 4], inputs=["x", "x2"])
    _refused(path, (1, 4, 4), r"one input, this one has 2 \(x, x2\)")


def test_cli_refusal_has_no_traceback_and_writes_nothing(tmp_path: Path) -> None:
    nodes = [_conv("conv5x5", "x", "c", "w"), helper.make_node("Relu", ["c"], ["y"], name="r")]
    path = _save(tmp_path, nodes, [_w("w", 4, 1, 5, 5)], ["N", 1, 12, 12])
    calib = tmp_path / "calib.npy"
    np.save(calib, np.zeros((4, 1, 12, 12), dtype=np.float32))
    out = tmp_path / "out"
    result = run_cli("gati", *["compile", str(path), "-c", str(calib), "-o", str(out)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.startswith("edgesynth: error: ")
    assert "conv5x5" in result.stderr and "larger than the engine" in result.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calib.npy", "model.onnx"]
