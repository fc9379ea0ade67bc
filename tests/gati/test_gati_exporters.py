"""One trained MNIST CNN, exported the ways other projects export theirs.

The network has the shape of PyTorch's MNIST example (Conv/Relu/Conv/Relu/MaxPool/Dropout/
flatten/Gemm/Relu/Dropout/Gemm/LogSoftmax). Each variant changes only how the graph is written:
opset, Reshape vs Flatten, Gemm vs MatMul + Add, fixed vs dynamic batch, MaxPool before Relu,
Softmax, and a hand-built graph in the layout of the dynamo exporter. Calibration: 300 images.
"""

from __future__ import annotations

import copy
from pathlib import Path

import gati_mnist_models as mm
import onnx
import pytest
from gati_netcheck import run_and_compare

pytestmark = pytest.mark.train  # trains the MNIST CNNs (cached after the first run)

VARIANTS = {
    # name: (module attributes, opset, dynamic batch, ops that must appear in the graph)
    "opset11_view": ({"flat": "view"}, 11, True, {"Shape", "Gather", "Concat", "Reshape", "Gemm"}),
    "opset13_flatten_batch1": ({}, 13, False, {"Flatten", "Gemm", "LogSoftmax"}),
    "opset17_matmul_add": ({"fc": "matmul"}, 17, True, {"MatMul", "Add", "Gemm"}),
    "opset12_pool_before_relu": ({"pool_first": True}, 12, True, {"MaxPool", "Relu"}),
    "opset14_reshape_softmax": (
        {"flat": "reshape_const", "head": "softmax"}, 14, True, {"Reshape", "Softmax"}
    ),
}  # fmt: skip


@pytest.mark.parametrize("variant", [*VARIANTS, "onnx_helper_opset18"])
def test_exported_variant(  # type: ignore[no-untyped-def]
    variant: str, example_model, calibration, eval_set, tmp_path: Path
) -> None:
    x, labels = eval_set
    path = tmp_path / f"{variant}.onnx"
    if variant == "onnx_helper_opset18":
        mm.helper_graph(example_model, path)
        must = {"MatMul", "Add", "Reshape", "Dropout", "LogSoftmax"}
    else:
        attrs, opset, dynamic, must = VARIANTS[variant]
        model = copy.deepcopy(example_model)
        for key, value in attrs.items():
            setattr(model, key, value)
        mm.export(model, path, opset=opset, dynamic=dynamic)
    graph = onnx.load(str(path)).graph
    assert must <= {n.op_type for n in graph.node}
    out = run_and_compare(path, calibration, x)
    agreement = float((out.y.argmax(1) == out.y_ort.argmax(1)).mean())
    accuracy = float((out.y.argmax(1) == labels).mean())
    print(f"\n{variant}: agreement {agreement:.3f}, accuracy {accuracy:.3f}")
    assert out.y.shape == out.y_ort.shape == (1000, 10)
    assert agreement >= 0.99
    assert (out.y_ort.argmax(1) == labels).mean() > 0.9
