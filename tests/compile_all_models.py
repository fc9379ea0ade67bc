"""Small float CNNs written for `compile -t all` (onnx.helper, seeded weights), calibrated on
real MNIST (`mnist_lenet.load_mnist`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import needs

onnx = needs.module("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _he(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(0.0, np.sqrt(2.0 / np.prod(shape[1:])), shape)


def _init(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def cnn(path: Path, *, residual: bool = False, unsupported: bool = False) -> Path:
    """conv 1->8, relu, maxpool, conv 8->16, relu, maxpool, flatten, gemm 784->10 on 1x28x28.
    `residual`: the second block's output plus a 1x1 convolution of its input (a skip
    addition); `unsupported`: an Erf after the first convolution (no target runs it)."""
    rng = np.random.default_rng(0)
    params = [
        _init("c1.w", _he(rng, 8, 1, 3, 3)), _init("c1.b", rng.normal(0, 0.1, 8)),
        _init("c2.w", _he(rng, 16, 8, 3, 3)), _init("c2.b", rng.normal(0, 0.1, 16)),
        _init("fc.w", _he(rng, 10, 16 * 7 * 7)), _init("fc.b", rng.normal(0, 0.1, 10)),
        numpy_helper.from_array(np.array([1, 16 * 7 * 7], dtype=np.int64), "shape"),
    ]  # fmt: skip
    node = helper.make_node
    first = "a"
    nodes = [node("Conv", ["input", "c1.w", "c1.b"], ["a"], kernel_shape=[3, 3], pads=[1] * 4)]
    if unsupported:
        nodes.append(node("Erf", ["a"], ["a_erf"]))
        first = "a_erf"
    nodes += [
        node("Relu", [first], ["b"]),
        node("MaxPool", ["b"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["c", "c2.w", "c2.b"], ["d"], kernel_shape=[3, 3], pads=[1] * 4),
        node("Relu", ["d"], ["e"]),
    ]
    block = "e"
    if residual:
        params += [_init("s.w", _he(rng, 16, 8, 1, 1)), _init("s.b", np.zeros(16))]
        nodes += [
            node("Conv", ["c", "s.w", "s.b"], ["skip"], kernel_shape=[1, 1]),
            node("Add", ["e", "skip"], ["sum"]),
        ]
        block = "sum"
    nodes += [
        node("MaxPool", [block], ["f"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Reshape", ["f", "shape"], ["g"]),
        node("Gemm", ["g", "fc.w", "fc.b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "compile_all_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        params,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
