"""A float ONNX model compiled for gap8 (`compile -t gap8 --calibration`): quantized to the
RequantShift dialect, the same integer graph the integer front end makes of the exported file
(`--export-integer-onnx`, byte for byte), close to the float model; bad calibration data, an
operator the quantizer does not take and bad options are refused with one message each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli, snapshot
from edgesynth.flow import compile_to, load_model, run_program
from edgesynth.sim.graph import run

onnx = pytest.importorskip("onnx")
SHAPE = (1, 12, 12)


def float_model(path: Path, *, extra: str | None = None, seed: int = 0) -> Path:
    """Conv+BatchNorm+ReLU, MaxPool, a residual block (Conv ReLU Conv, Add, ReLU), AveragePool,
    Flatten, Gemm; `extra` adds a Sigmoid (the quantizer does not take it) or a Concat."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def init(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        value = rng.normal(0, scale, shape).astype(np.float32)
        return numpy_helper.from_array(value, name)

    params = [
        init("c1.w", 4, 1, 3, 3), init("c1.b", 4, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "bn.g"),
        init("bn.b", 4, scale=0.1), init("bn.m", 4, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "bn.v"),
        init("c2.w", 4, 4, 3, 3), init("c2.b", 4, scale=0.1),
        init("c3.w", 4, 4, 3, 3), init("c3.b", 4, scale=0.1),
        init("fc.w", 10, 36), init("fc.b", 10, scale=0.1),
    ]  # fmt: skip
    node = helper.make_node
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [
        node("Conv", ["image", "c1.w", "c1.b"], ["a1"], name="conv1", **conv),
        node("BatchNormalization", ["a1", "bn.g", "bn.b", "bn.m", "bn.v"], ["a2"], name="bn1"),
        node("Relu", ["a2"], ["a3"], name="relu1"),
        node("MaxPool", ["a3"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "c2.w", "c2.b"], ["b1"], name="conv2", **conv),
        node("Relu", ["b1"], ["b2"], name="relu2"),
        node("Conv", ["b2", "c3.w", "c3.b"], ["b3"], name="conv3", **conv),
        node("Add", ["b3", "p1"], ["s1"], name="skip"),
        node("Relu", ["s1"], ["s2"], name="relu3"),
        node("AveragePool", ["s2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        node("Flatten", ["p2"], ["f"], name="flat"),
        node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    if extra == "Sigmoid":
        nodes.insert(6, node("Sigmoid", ["b2"], ["b2s"], name="odd_one"))
        nodes[7].input[0] = "b2s"
    elif extra == "Concat":
        nodes.insert(6, node("Concat", ["b2", "b2"], ["b2c"], name="odd_one", axis=1))
        nodes.insert(7, node("MaxPool", ["b2c"], ["b2m"], name="pool_c", kernel_shape=[1, 1]))
        nodes[8].input[0] = "b2"
        nodes.append(node("Flatten", ["b2m"], ["extra_out"], name="flat2"))
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, *SHAPE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])]
        + (
            [helper.make_tensor_value_info("extra_out", TensorProto.FLOAT, [1, 288])]
            if extra == "Concat"
            else []
        ),
        params,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    model = float_model(tmp_path / "tiny.onnx")
    cal = tmp_path / "cal.npy"
    np.save(cal, np.random.default_rng(1).normal(0, 1, (64, *SHAPE)).astype(np.float32))
    return model, cal


def test_the_exported_integer_onnx_compiles_to_the_same_bytes(tiny, tmp_path: Path) -> None:
    model, cal = tiny
    direct, exported = tmp_path / "direct", tmp_path / "int" / "tiny_int.onnx"
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", direct,
                "--export-integer-onnx", exported)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "known answer reproduced on the host build" in r.stdout
    assert f"wrote {exported}" in r.stdout
    again = tmp_path / "again"
    r = run_cli("pulp", "compile", exported, "-o", again)
    assert r.exit_code == 0, r.output
    assert snapshot(direct) == snapshot(again)
    assert (direct / "network.onnx").read_bytes() == exported.read_bytes()
    manifest = json.loads((direct / "compiled.json").read_text())
    assert manifest["network"] == "tiny_int"
    assert manifest["inputs"][0]["scale"] > 0 and manifest["outputs"][0]["scale"] > 0
    ops = [n.op_type for n in onnx.load(str(exported)).graph.node]
    assert ops.count("RequantShift") == 8 and "BatchNormalization" not in ops


def test_the_integer_network_tracks_the_float_model(tiny) -> None:
    """Within the calibrated ranges (the calibration data itself: nothing clipped), the
    dequantized output of the random-weight network is within 3% of the float output."""
    model, cal = tiny
    graph = load_model(model)
    x = np.load(cal)
    program, _ = compile_to(graph, "gap8", calibration=x)
    assert program.graph.is_integer
    want = run(graph, x.astype(np.float64), keep=False)[graph.outputs[0]]
    got = run_program(program, x).values.reshape(want.shape)
    assert np.abs(got - want).max() <= 0.03 * np.abs(want).max()
    # the RequantShift divisors are powers of two; the average pool's joins its window size
    divs = [int(n.div) for n in program.graph.nodes if n.op == "requantize"]
    assert all(d & (d - 1) == 0 or (d % 4 == 0 and (d // 4) & (d // 4 - 1) == 0) for d in divs)


def _weights(p) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    return [lay.weight for lay in p.layers if lay.weight is not None]


def _four_bit(p) -> bool:  # type: ignore[no-untyped-def]
    storage = {lay.w_storage.bits for lay in p.layers if lay.weight is not None}
    return max(int(np.abs(w).max()) for w in _weights(p)) <= 7 and 4 in storage


def _per_layer(p) -> bool:  # type: ignore[no-untyped-def]
    steps = [n for n in p.graph.nodes if n.op == "requantize"]
    return all(not isinstance(n.mul, np.ndarray) for n in steps)


@pytest.mark.parametrize(
    ("option", "check"),
    [
        ("weight_bits=4", _four_bit),
        ("weights=layer", _per_layer),
        ("activations=percentile", lambda p: p.graph.is_integer),
        ("output_bits=8", lambda p: p.outputs[0].bits == 8),
    ],
)
def test_quantizer_options(tiny, option: str, check) -> None:  # type: ignore[no-untyped-def]
    model, cal = tiny
    key, _, value = option.partition("=")
    options = {key: int(value) if value.isdigit() else value}
    program, _ = compile_to(load_model(model), "gap8", calibration=np.load(cal), options=options)
    assert check(program)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            np.zeros((8, 12, 12), np.float32),
            r"shape \(8, 12, 12\); input `image` of the model takes \(N, 1, 12, 12\)",
        ),
        (
            np.zeros((8, 1, 12, 12), np.uint8),
            r"holds uint8 values; input `image` of the float model takes float",
        ),
        (np.full((8, 1, 12, 12), np.nan, np.float32), "NaN or infinite"),
    ],
)
def test_bad_calibration_data_is_refused_naming_the_input(tiny, tmp_path, data, message) -> None:  # type: ignore[no-untyped-def]
    model, _ = tiny
    bad = tmp_path / "bad.npy"
    np.save(bad, data)
    r = run_cli("compile", model, "-t", "gap8", "-c", bad, "-o", tmp_path / "out")
    assert r.exit_code == 1
    assert "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert re.search(message, r.stderr), r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("op", ["Sigmoid"])
def test_an_operator_the_quantizer_does_not_take_is_named(tmp_path: Path, op: str) -> None:
    model = float_model(tmp_path / "odd.onnx", extra=op)
    cal = tmp_path / "cal.npy"
    np.save(cal, np.zeros((4, *SHAPE), np.float32))
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", tmp_path / "out")
    assert r.exit_code == 1, r.output
    assert f"ONNX node `odd_one` ({op})" in r.stderr and "not quantized for gap8" in r.stderr
    assert str(model) in r.stderr
    assert not (tmp_path / "out").exists()


def test_refusals_before_any_work(tiny, tmp_path: Path) -> None:
    model, cal = tiny
    out = tmp_path / "out"
    r = run_cli("compile", model, "-t", "gap8", "-o", out)
    assert r.exit_code == 1 and "pass --calibration" in r.stderr
    for option, words in [
        ("weights=row", "`--option weights`: weights=row: choose channel or layer"),
        ("weight_bits=3", "weight_bits=3: choose 8, 4, 2"),
        ("percentile=lots", "percentile=lots: expected a number"),
        ("activations=mean", "unknown calibration method `mean`"),
    ]:
        r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", out, "--option", option)
        assert r.exit_code == 1 and words in r.stderr, r.stderr
    r = run_cli("compile", model, "-t", "xdnn", "-c", cal, "-o", out,
                "--export-integer-onnx", tmp_path / "x.onnx")  # fmt: skip
    assert r.exit_code == 2 and "for -t gap8" in r.stderr
    taken = tmp_path / "taken.onnx"
    taken.write_text("mine")
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", out,
                "--export-integer-onnx", taken)  # fmt: skip
    assert r.exit_code == 1 and "--overwrite" in r.stderr
    assert taken.read_text() == "mine"
    assert not out.exists()


def test_quantizer_options_on_an_integer_network_are_refused(tiny, tmp_path: Path) -> None:
    model, cal = tiny
    exported = tmp_path / "int.onnx"
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", tmp_path / "a",
                "--export-integer-onnx", exported, "--no-verify")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = run_cli(
        "compile", exported, "-t", "gap8", "-o", tmp_path / "b", "--option", "weights=layer"
    )
    assert r.exit_code == 1 and "this network is already integer" in r.stderr


def test_the_integer_network_is_the_fake_quantized_network(tiny) -> None:
    """Every stored tensor (convolutions, the requantized residual addition, the average
    pool, the output) has the fake-quantized network's codes, value for value."""
    from fakequant_check import differences

    model, cal = tiny
    x = np.random.default_rng(2).normal(0, 1, (128, *SHAPE))
    diff = differences(load_model(model), np.load(cal), x)
    tensors = [t for t in diff if not t.startswith("_")]
    assert len(tensors) >= 10
    for tensor in tensors:
        assert not diff[tensor].any(), tensor
