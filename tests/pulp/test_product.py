"""An element-wise product of two activations on gap8: quantized as the product of the codes and
one RequantShift (the output's scale defined from the multiplier), value for value with the
fake-quantized network; read by the integer front end as a graph operator, run by the addition
kernel multiplying instead (the generated C proved on the host)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from edgesynth.flow import load_model

onnx = pytest.importorskip("onnx")


def product_model(path: Path, relu: bool) -> Path:
    """conv a, conv b (each optionally ReLU'd), a x b, then a convolution."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, s).astype(np.float32), n)
        for n, s in [("w1", (4, 1, 3, 3)), ("w2", (4, 1, 3, 3)), ("w3", (3, 4, 3, 3))]
    ]
    n = helper.make_node
    same = {"pads": [1, 1, 1, 1]}
    nodes = [
        n("Conv", ["image", "w1"], ["a0"], name="c1", **same),
        n("Conv", ["image", "w2"], ["b0"], name="c2", **same),
    ]
    if relu:
        nodes += [n("Relu", ["a0"], ["a"], name="r1"), n("Relu", ["b0"], ["b"], name="r2")]
    else:
        nodes += [n("Identity", ["a0"], ["a"]), n("Identity", ["b0"], ["b"])]
    nodes += [
        n("Mul", ["a", "b"], ["m"], name="gate"),
        n("Conv", ["m", "w3"], ["y"], name="mix", **same),
    ]
    graph = helper.make_graph(
        nodes, "prod", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 6, 6])], inits,
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


@pytest.mark.parametrize("relu", [True, False])
def test_a_product_of_two_activations_compiles_for_gap8(tmp_path: Path, relu: bool) -> None:
    from fakequant_check import differences, is_tie

    model = product_model(tmp_path / "prod.onnx", relu)
    x = np.random.default_rng(6).normal(0, 1, (32, 1, 6, 6)).astype(np.float32)
    np.save(tmp_path / "cal.npy", x)
    r = run_cli("compile", model, "-t", "gap8", "-c", tmp_path / "cal.npy", "-o", tmp_path / "o")
    assert r.exit_code == 0, r.output
    assert "known answer reproduced on the host build" in r.stdout
    report = (tmp_path / "o" / "report.txt").read_text()
    assert re.search(r"\n +2 gate +mul ", report), report
    graph = load_model(model)
    diff = differences(graph, x, x)
    for tensor in (t for t in diff if not t.startswith("_")):
        if tensor in graph.outputs:
            assert is_tie(graph, diff, tensor)[diff[tensor]].all(), tensor
        else:
            assert not diff[tensor].any(), tensor
