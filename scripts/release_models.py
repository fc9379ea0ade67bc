"""The release check's models (scripts/release_check.sh), written into the working directory.

- small.onnx: a float CNN (1x28x28 -> 10: conv, ReLU, max pool twice, linear), with
  calibration.npy (32 float inputs) and inputs.npy (4 float inputs);
- small_int.onnx: the same shape as an integer network in NEMO's dialect (the PULP/GAP8 target
  takes integer graphs), with inputs_int.npy (one uint8-valued input).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 1, 28, 28]


class Graph:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value: object, dtype: type = np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def save(self, path: str, output: str, opset: int) -> None:
        graph = helper.make_graph(
            self.nodes,
            path.removesuffix(".onnx"),
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, SHAPE)],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, 10])],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 7
        onnx.checker.check_model(model)
        onnx.save(model, path)


def float_model() -> None:
    g = Graph(0)
    x = "input"
    for i, (cout, cin) in enumerate([(8, 1), (16, 8)], start=1):
        w = g.const(f"w{i}", g.rng.standard_normal((cout, cin, 3, 3)) * (0.6 / cin**0.5))
        b = g.const(f"b{i}", g.rng.standard_normal(cout) * 0.05)
        x = g.node("Conv", [x, w, b], f"conv{i}", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        x = g.node("Relu", [x], f"relu{i}")
        x = g.node("MaxPool", [x], f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Flatten", [x], "flat", axis=1)
    w = g.const("w3", g.rng.standard_normal((10, 16 * 7 * 7)) * 0.03)
    x = g.node("Gemm", [x, w, g.const("b3", np.zeros(10))], "fc", transB=1)
    g.save("small.onnx", x, 13)
    np.save("calibration.npy", g.rng.uniform(0, 1, (32, *SHAPE[1:])).astype(np.float32))
    np.save("inputs.npy", g.rng.uniform(0, 1, (4, *SHAPE[1:])).astype(np.float32))


def integer_model() -> None:
    g = Graph(1)

    def requant(x: str, channels: int, tag: str) -> str:
        """NEMO's batch-norm + ReLU: Mul(kappa) Add(lambda) Cast Mul(m) Div(D) Cast Clip."""
        shape = (1, channels, 1, 1)
        y = g.node("Mul", [g.const(f"k{tag}", g.rng.integers(1, 30, shape)), x], f"mul{tag}")
        lam = g.const(f"l{tag}", g.rng.integers(-500, 500, shape))
        y = g.node("Add", [y, lam], f"add{tag}")
        y = g.node("Cast", [y], f"cast{tag}", to=TensorProto.INT64)
        y = g.node("Mul", [y, g.const(f"m{tag}", [3], np.int64)], f"scale{tag}")
        y = g.node("Div", [y, g.const(f"d{tag}", [256], np.int64)], f"div{tag}")
        y = g.node("Cast", [y], f"back{tag}", to=TensorProto.FLOAT)
        return g.node("Clip", [y, g.const(f"lo{tag}", 0.0), g.const(f"hi{tag}", 255.0)], tag)

    x = "input"
    for i, (cout, cin) in enumerate([(8, 1), (16, 8)], start=1):
        w = g.const(f"w{i}", g.rng.integers(-8, 8, (cout, cin, 3, 3)))
        x = g.node("Conv", [x, w], f"conv{i}", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        x = requant(x, cout, f"act{i}")
        x = g.node("MaxPool", [x], f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Flatten", [x], "flat", axis=1)
    x = g.node("Gemm", [x, g.const("w3", g.rng.integers(-8, 8, (10, 16 * 7 * 7)))], "fc", transB=1)
    g.save("small_int.onnx", x, 11)
    np.save("inputs_int.npy", g.rng.integers(0, 256, SHAPE).astype(np.uint8))


if __name__ == "__main__":
    float_model()
    integer_model()
