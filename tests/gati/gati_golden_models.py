"""Seeded ONNX models (written with onnx.helper, no torch) covering what the Gati target compiles.

Each case is (ONNX model, calibration batch, compile options). The files `edgesynth gati compile`
writes for them are pinned by hash in `golden_hashes.json`: a change to the front end, the
lowering or the compiler that alters one byte of program.bin, program.dwp, report.json,
sample.dwp or sample_expected.dwp fails `test_gati_golden.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass
class Case:
    nodes: list[onnx.NodeProto]
    inits: list[onnx.TensorProto]
    in_shape: tuple[int, ...]  # without the batch
    opset: int = 13
    options: list[str] = field(default_factory=list)  # extra `gati compile` options
    batch: str | int = "N"


class _Weights:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.inits: list[onnx.TensorProto] = []

    def normal(self, name: str, *shape: int, scale: float = 0.3) -> str:
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def uniform(self, name: str, lo: float, hi: float, n: int) -> str:
        value = self.rng.uniform(lo, hi, n).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def ints(self, name: str, values: list[int]) -> str:
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def bn(self, prefix: str, ch: int) -> list[str]:
        return [
            self.uniform(f"{prefix}_g", 0.5, 1.5, ch),
            self.uniform(f"{prefix}_b", -0.2, 0.2, ch),
            self.uniform(f"{prefix}_m", -0.2, 0.2, ch),
            self.uniform(f"{prefix}_v", 0.5, 2.0, ch),
        ]


n = helper.make_node


def lenet() -> Case:
    w = _Weights(1)
    nodes = [
        n("Conv", ["x", w.normal("w1", 6, 1, 3, 3), w.normal("b1", 6, scale=0.1)], ["c1"],
          name="conv1", pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", w.normal("w2", 12, 6, 3, 3, scale=0.2), w.normal("b2", 12, scale=0.1)],
          ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        n("Flatten", ["p2"], ["f"], name="flatten"),
        n("Gemm", ["f", w.normal("fw1", 24, 12 * 3 * 3, scale=0.1), w.normal("fb1", 24)], ["g1"],
          name="fc1", transB=1),
        n("Relu", ["g1"], ["r3"], name="relu3"),
        n("Gemm", ["r3", w.normal("fw2", 10, 24), w.normal("fb2", 10)], ["y"], name="fc2",
          transB=1),
    ]  # fmt: skip
    return Case(nodes, w.inits, (1, 12, 12))


def fusion() -> Case:
    """Conv + Add(bias) + BN + MaxPool + Relu; view-style shape arithmetic; MatMul + Add;
    LogSoftmax on the host."""
    w = _Weights(2)
    ch = 6
    nodes = [
        n("Conv", ["x", w.normal("w", ch, 2, 3, 3)], ["c"], name="conv", pads=[1, 1, 1, 1]),
        n("Add", ["c", w.normal("cb", 1, ch, 1, 1)], ["cb_out"], name="conv_bias"),
        n("BatchNormalization", ["cb_out", *w.bn("bn", ch)], ["bn"], name="bn"),
        n("MaxPool", ["bn"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Relu", ["p"], ["r"], name="relu"),
        n("Shape", ["r"], ["s"], name="shape"),
        n("Constant", [], ["zero"], name="k0", value=numpy_helper.from_array(np.array(0))),
        n("Gather", ["s", "zero"], ["batch"], name="gather", axis=0),
        n("Unsqueeze", ["batch", w.ints("axes0", [0])], ["batch1"], name="unsq"),
        n("Concat", ["batch1", w.ints("minus1", [-1])], ["target"], name="concat", axis=0),
        n("Reshape", ["r", "target"], ["flat"], name="flatten"),
        n("MatMul", ["flat", w.normal("fw", ch * 4 * 4, 5, scale=0.1)], ["mm"], name="fc"),
        n("Add", ["mm", w.normal("fb", 5)], ["logits"], name="fc_bias"),
        n("LogSoftmax", ["logits"], ["y"], name="head", axis=1),
    ]
    return Case(nodes, w.inits, (2, 8, 8), options=["--dispatch", "conv"])


def sigmoid_tanh() -> Case:
    w = _Weights(3)
    nodes = [
        n("Conv", ["x", w.normal("w1", 8, 3, 3, 3), w.normal("b1", 8)], ["c1"], name="conv1",
          pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", *w.bn("bn1", 8)], ["n1"], name="bn1"),
        n("Sigmoid", ["n1"], ["s1"], name="sig1"),
        n("MaxPool", ["s1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", w.normal("w2", 10, 8, 3, 3), w.normal("b2", 10)], ["c2"], name="conv2",
          pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Tanh", ["c2"], ["t2"], name="tanh2"),
        n("Conv", ["t2", w.normal("w3", 8, 10, 1, 1), w.normal("b3", 8)], ["c3"], name="conv3"),
        n("Relu", ["c3"], ["r3"], name="relu3"),
        n("Flatten", ["r3"], ["f"], name="flat"),
        n("Gemm", ["f", w.normal("fw1", 32, 8 * 2 * 2, scale=0.2), w.normal("fb1", 32)], ["g1"],
          name="fc1", transB=1),
        n("Relu", ["g1"], ["r4"], name="relu4"),
        n("Gemm", ["r4", w.normal("fw2", 6, 32, scale=0.2), w.normal("fb2", 6)], ["g2"],
          name="fc2", transB=1),
        n("Sigmoid", ["g2"], ["y"], name="sig_out"),
    ]  # fmt: skip
    return Case(nodes, w.inits, (3, 8, 8))


def average_pools() -> Case:
    w = _Weights(4)
    nodes = [
        n("Conv", ["x", w.normal("w1", 12, 3, 3, 3), w.normal("b1", 12)], ["c1"], name="conv1",
          pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("AveragePool", ["r1"], ["a1"], name="avg1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["a1", w.normal("w2", 20, 12, 3, 3, scale=0.1), w.normal("b2", 20)], ["c2"],
          name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("AveragePool", ["r2"], ["a2"], name="avg3", kernel_shape=[3, 3], strides=[1, 1],
          pads=[1, 1, 1, 1], count_include_pad=1),
        n("Conv", ["a2", w.normal("w3", 16, 20, 1, 1, scale=0.2), w.normal("b3", 16)], ["c3"],
          name="conv3"),
        n("Relu", ["c3"], ["r3"], name="relu3"),
        n("Flatten", ["r3"], ["f"], name="flat"),
        n("Gemm", ["f", w.normal("fw", 6, 16 * 4 * 4, scale=0.05), w.normal("fb", 6)], ["y"],
          name="fc", transB=1),
    ]  # fmt: skip
    return Case(nodes, w.inits, (3, 16, 16))


def global_pools() -> Case:
    """ReduceMean (keepdims 0) over the spatial axes feeding a Gemm."""
    w = _Weights(5)
    nodes = [
        n("Conv", ["x", w.normal("w1", 8, 3, 3, 3), w.normal("b1", 8)], ["c1"], name="conv1",
          pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("Conv", ["r1", w.normal("w2", 16, 8, 3, 3, scale=0.2), w.normal("b2", 16)], ["c2"],
          name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("ReduceMean", ["r2"], ["m"], name="mean", axes=[2, 3], keepdims=0),
        n("Gemm", ["m", w.normal("fw", 16, 6), w.normal("fb", 6)], ["g"], name="head"),
        n("Relu", ["g"], ["y"], name="relu3"),
    ]  # fmt: skip
    return Case(nodes, w.inits, (3, 8, 8))


def gap_only() -> Case:
    w = _Weights(6)
    nodes = [
        n("Conv", ["x", w.normal("w1", 8, 3, 3, 3), w.normal("b1", 8)], ["c1"], name="conv1",
          pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("GlobalAveragePool", ["r1"], ["g"], name="gap"),
        n("Flatten", ["g"], ["y"], name="flat"),
    ]  # fmt: skip
    return Case(nodes, w.inits, (3, 8, 8))


def standalone() -> Case:
    """Layers that do not fuse: a pool on the input, a second pool, Relu after an average."""
    w = _Weights(7)
    nodes = [
        n("AveragePool", ["x"], ["p0"], name="pool_in", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p0", w.normal("w", 4, 1, 3, 3), w.normal("b", 4)], ["c"], name="conv"),
        n("Relu", ["c"], ["r"], name="relu"),
        n("AveragePool", ["r"], ["a"], name="avg", kernel_shape=[2, 2], strides=[2, 2]),
        n("Relu", ["a"], ["r2"], name="relu_after_avg"),
        n("MaxPool", ["r2"], ["y"], name="second_pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    return Case(nodes, w.inits, (1, 20, 20))


def vectors() -> Case:
    """A vector input; the last layer ends in Tanh (quantized for the lookup)."""
    w = _Weights(8)
    nodes = [
        n("Gemm", ["x", w.normal("w1", 20, 40, scale=0.2), w.normal("b1", 40, scale=0.001)], ["g1"],
          name="fc1", alpha=0.5, beta=2.0),
        n("Relu", ["g1"], ["r1"], name="relu1"),
        n("Dropout", ["r1"], ["d1"], name="drop"),
        n("Identity", ["d1"], ["i1"], name="ident"),
        n("MatMul", ["i1", w.normal("w2", 40, 7, scale=0.2)], ["m2"], name="fc2"),
        n("Tanh", ["m2"], ["y"], name="tanh"),
    ]  # fmt: skip
    return Case(nodes, w.inits, (20,))


def accumulants() -> Case:
    """20 input channels (three channel iterations) through DRAM accumulants; SAME_UPPER
    padding; ceil-mode max pooling with padding; a Softmax head (opset 11)."""
    w = _Weights(9)
    nodes = [
        n("Conv", ["x", w.normal("w1", 20, 20, 3, 3, scale=0.1), w.normal("b1", 20)], ["c1"],
          name="conv1", auto_pad="SAME_UPPER"),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1], ceil_mode=1),
        n("Conv", ["p1", w.normal("w2", 9, 20, 2, 2, scale=0.1), w.normal("b2", 9)], ["c2"],
          name="conv2", strides=[2, 2], auto_pad="SAME_UPPER"),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("Flatten", ["r2"], ["f"], name="flat"),
        n("Gemm", ["f", w.normal("fw", 9 * 3 * 3, 4, scale=0.1), w.normal("fb", 4)], ["g"],
          name="fc"),
        n("Softmax", ["g"], ["y"], name="softmax"),
    ]  # fmt: skip
    return Case(
        nodes, w.inits, (20, 11, 11), opset=11, batch=1,
        options=["--on-chip-acc-bytes", "0", "--dispatch", "relu1", "--dispatch", "fc"],
    )  # fmt: skip


CASES: dict[str, Callable[[], Case]] = {
    "lenet": lenet,
    "fusion": fusion,
    "sigmoid_tanh": sigmoid_tanh,
    "average_pools": average_pools,
    "global_pools": global_pools,
    "gap_only": gap_only,
    "standalone": standalone,
    "vectors": vectors,
    "accumulants": accumulants,
}


def write_case(name: str, folder: Path) -> tuple[Path, Path, list[str]]:
    """Write case `name`'s model.onnx and calib.npy into `folder`; return (model, calibration,
    extra options)."""
    case = CASES[name]()
    graph = helper.make_graph(
        case.nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [case.batch, *case.in_shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        case.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    model_path, calib_path = folder / "model.onnx", folder / "calib.npy"
    onnx.save(model, str(model_path))
    calib = np.random.default_rng(100).standard_normal((64, *case.in_shape)).astype(np.float32)
    np.save(calib_path, calib)
    return model_path, calib_path, case.options
