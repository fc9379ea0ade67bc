"""Element-wise functions on the Cortex-M4 as 256-entry tables (issue 25): HardSigmoid,
HardSwish, Swish (SiLU), Mish and Softplus beside Sigmoid and Tanh. The ONNX front end reads
them (and torch's x x sigmoid(x), x x hardsigmoid(x) and x x tanh(softplus(x)) become one
activation in the max7800x float path);
each table is the float function quantized; the generated C equals the simulator (host build)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import needs
from cpu_graphs import head_graph
from edgesynth.flow import compile_to
from edgesynth.ir import graph as g
from edgesynth.ir.passes import fuse_gated_activations
from edgesynth.sim.unary import BOUNDED, UNARY, unary
from edgesynth.targets.max7800x.cpu.simulate import TABLE_SCALE, activation_table

CODES = np.arange(-128, 128)
scales = st.floats(1e-3, 0.5, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(function=st.sampled_from(UNARY), in_scale=scales, out_scale=scales,
       alpha=st.floats(0.05, 1.0), beta=st.floats(-0.5, 1.0))  # fmt: skip
def test_a_table_is_the_float_function_quantized(
    function: str, in_scale: float, out_scale: float, alpha: float, beta: float
) -> None:
    """Each entry is the nearest output code to f(code x in_scale) (within half a step),
    saturated where the value is beyond -128..127 codes."""
    table = activation_table(function, in_scale, out_scale, alpha, beta)
    assert table.shape == (256,) and table.min() >= -128 and table.max() <= 127
    want = unary(function, CODES * in_scale, alpha, beta) / out_scale
    inside = (want >= -128.5) & (want < 127.5)
    assert np.all(np.abs(table[inside] - want[inside]) <= 0.5 + 1e-9)
    assert np.all(table[want >= 127.5] == 127) and np.all(table[want < -128.5] == -128)


@settings(max_examples=40, deadline=None)
@given(function=st.sampled_from(["sigmoid", "tanh"]), in_scale=scales)
def test_sigmoid_and_tanh_tables_are_as_before(function: str, in_scale: float) -> None:
    """The bounded tables keep their step 1/127 and their formula, entry for entry."""
    x = CODES.astype(np.float64) * in_scale
    y = 1.0 / (1.0 + np.exp(-x)) if function == "sigmoid" else np.tanh(x)
    before = np.clip(np.floor(y / (1.0 / 127) + 0.5), -128, 127).astype(np.int64)
    assert np.array_equal(activation_table(function, in_scale), before)
    assert TABLE_SCALE == 1.0 / 127 and function in BOUNDED


def test_the_functions_are_onnx_runtimes(tmp_path: Path) -> None:
    """HardSigmoid (its alpha and beta), HardSwish (opset 14), Mish (opset 18) and Softplus
    read from ONNX evaluate as ONNX Runtime does."""
    onnx = needs.module("onnx")
    ort = needs.module("onnxruntime")
    from onnx import TensorProto, helper

    from edgesynth.frontends.onnx import load_onnx
    from edgesynth.sim.graph import run

    x = np.linspace(-6, 6, 97, dtype=np.float32).reshape(1, 97)
    for op, attrs, opset in [("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 13),
                             ("HardSwish", {}, 14), ("Mish", {}, 18),
                             ("Softplus", {}, 13)]:  # fmt: skip
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 97])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        path = tmp_path / f"{op}.onnx"
        onnx.save(model, str(path))
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": x}
        )[0]
        loaded = load_onnx(path)
        (act,) = loaded.nodes
        assert isinstance(act, g.Activation) and act.kind == op.lower()
        if op == "HardSigmoid":
            assert (act.alpha, act.beta) == pytest.approx((0.3, 0.4))
        got = run(loaded, x.astype(np.float64), keep=False)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _gated(gate: str, extra_reader: bool = False, **attrs: float) -> g.Graph:
    graph = g.Graph("gated")
    graph.add_input("x", (4,))
    graph.add(g.Activation(name="gate", inputs=["x"], outputs=["s"], kind=gate, **attrs), (4,))
    graph.add(g.Eltwise(name="mul", inputs=["s", "x"], outputs=["y"], kind="mul"), (4,))
    graph.outputs = ["y"]
    if extra_reader:
        graph.add(g.Activation(name="other", inputs=["s"], outputs=["z"], kind="relu"), (4,))
        graph.outputs = ["y", "z"]
    return graph


@pytest.mark.parametrize(
    ("gate", "attrs", "kind"),
    [("sigmoid", {}, "swish"), ("hardsigmoid", {"alpha": 1 / 6, "beta": 0.5}, "hardswish")],
)
def test_x_times_its_gate_is_one_activation(gate: str, attrs: dict, kind: str) -> None:
    fused = fuse_gated_activations(_gated(gate, **attrs))
    (node,) = fused.nodes
    assert isinstance(node, g.Activation) and node.kind == kind
    assert (node.name, node.inputs, node.outputs, node.folded) == ("mul", ["x"], ["y"], ["gate"])


def test_x_times_tanh_of_its_softplus_is_mish() -> None:
    graph = g.Graph("mish")
    graph.add_input("x", (4,))
    graph.add(g.Activation(name="sp", inputs=["x"], outputs=["s"], kind="softplus"), (4,))
    graph.add(g.Activation(name="th", inputs=["s"], outputs=["t"], kind="tanh"), (4,))
    graph.add(g.Eltwise(name="mul", inputs=["x", "t"], outputs=["y"], kind="mul"), (4,))
    graph.outputs = ["y"]
    (node,) = fuse_gated_activations(graph).nodes
    assert isinstance(node, g.Activation) and node.kind == "mish"
    assert (node.inputs, node.outputs, node.folded) == (["x"], ["y"], ["sp", "th"])
    x = np.linspace(-5, 5, 4)
    np.testing.assert_allclose(unary("mish", x), x * np.tanh(np.log1p(np.exp(x))))


@pytest.mark.parametrize(
    "graph",
    [_gated("sigmoid", extra_reader=True), _gated("hardsigmoid", alpha=0.2, beta=0.5),
     _gated("tanh")],
    ids=["gate-read-elsewhere", "other-hardsigmoid", "tanh"],
)  # fmt: skip
def test_other_products_stay_as_they_are(graph: g.Graph) -> None:
    assert [n.name for n in fuse_gated_activations(graph).nodes] == [n.name for n in graph.nodes]


def _head(kind: str, **attrs: float) -> g.Graph:
    """The accelerator's Conv/ReLU/MaxPool/Flatten/Linear(64 -> 300), then `kind`, Linear(300 ->
    10), Softmax (`cpu_graphs.head_graph`)."""
    return head_graph([("linear", 300), (kind, 0), ("linear", 10)], **attrs)


def _calibration() -> np.ndarray:
    return np.random.default_rng(6).normal(0, 1, (32, 1, 8, 8))


@pytest.mark.parametrize(
    ("kind", "attrs"),
    [
        ("hardswish", {}),
        ("swish", {}),
        ("mish", {}),
        ("softplus", {}),
        ("hardsigmoid", {"alpha": 0.3, "beta": 0.4}),
    ],
)
def test_the_host_build_of_a_table_equals_the_simulator(
    kind: str, attrs: dict, tmp_path: Path
) -> None:
    """compile's proof runs cpu_part.c (gcc -Wall -Wextra -Werror) on the accelerator's output
    and pseudo-random inputs: every layer, the table's included, equals the simulator."""
    needs.tool("gcc")
    from edgesynth.targets.max7800x.cpu.host import EXECUTOR, RANDOM_INPUTS

    out = tmp_path / "out"
    program, _ = compile_to(_head(kind, **attrs), "max78000", calibration=_calibration(),
                            out=out, verify=True)  # fmt: skip
    assert program.cpu is not None and program.proof is not None
    luts = [layer for layer in program.cpu.layers if layer.kind == "lut"]
    assert [layer.function for layer in luts] == [kind]
    total = (RANDOM_INPUTS + 1) * sum(layer.size for layer in program.cpu.layers)
    assert program.proof.line.splitlines()[1] == (
        f"known answer reproduced on {EXECUTOR}: {total} of {total} values"
    )
    text = (out / "project" / "cpu_part.c").read_text()
    assert f"{kind}, one output code per input code + 128" in text


@pytest.mark.parametrize("kind", ["hardswish", "swish", "mish", "softplus"])
def test_an_unbounded_table_takes_its_calibrated_output_scale(kind: str) -> None:
    """The table's output step is its output's largest calibrated |value| / 127 (not 1/127):
    the largest code is used, and the quantized network follows the float one."""
    from edgesynth.flow import run_program
    from edgesynth.sim.graph import run

    graph = _head(kind)
    program, _ = compile_to(graph, "max78000", calibration=_calibration())
    assert program.cpu is not None
    (lut,) = [layer for layer in program.cpu.layers if layer.kind == "lut"]
    assert lut.table is not None and int(np.max(lut.table)) >= 100
    x = np.random.default_rng(3).normal(0, 1, (64, 1, 8, 8))
    codes = run_program(program, x).codes
    want = run(graph, x, keep=True)["linear2"]
    assert (codes.argmax(1) == want.argmax(1)).mean() >= 0.9
