"""Trained MNIST CNNs: the functional model equals the integer reference and agrees with ORT."""

from __future__ import annotations

from pathlib import Path

import gati_mnist_models as mm
import numpy as np
import onnx
import pytest

from edgesynth.targets.gati import isa
from edgesynth.targets.gati.floatref import float_forward
from edgesynth.targets.gati.host import host_contract, run_program
from edgesynth.targets.gati.plan import compile_onnx
from edgesynth.targets.gati.quantize import quantize_input
from edgesynth.targets.gati.reference import reference_layers

pytestmark = pytest.mark.train  # trains the MNIST CNNs (cached after the first run)


def _all_layer_names(prog_layers) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.name for c in prog_layers]


def check_network(
    path: Path, calibration: np.ndarray, x: np.ndarray, labels: np.ndarray, **kw: int
) -> dict[str, float]:
    """Compile, run on the functional model, compare with the reference and with ORT."""
    first = compile_onnx(path, calibration, **kw)
    # dispatch every layer so every intermediate output is checked, not only the last one
    prog = compile_onnx(path, calibration, dispatch=_all_layer_names(first.layers), **kw)
    assert first.blob != prog.blob  # DispatchEn/DispatchID differ, nothing else
    host = host_contract(prog)
    y, ints = run_program(prog.stream, host, x)
    ref = reference_layers(prog.model, quantize_input(x, host["input"]["scale"]))
    assert len(ints) == len(ref) == len(prog.layers)
    for i, r in enumerate(ref):
        assert ints[i].shape == r.shape
        assert np.array_equal(ints[i], r), f"layer {i} differs from the integer reference"
    y_ort = mm.ort_run(path, x)
    assert y.shape == y_ort.shape
    # the float NumPy evaluation of the imported graph is what ORT computes
    np.testing.assert_allclose(float_forward(prog.model.chain, x), y_ort, rtol=1e-4, atol=1e-4)
    return {
        "agreement": float((y.argmax(1) == y_ort.argmax(1)).mean()),
        "gati_accuracy": float((y.argmax(1) == labels).mean()),
        "ort_accuracy": float((y_ort.argmax(1) == labels).mean()),
    }


def test_lenet_mnist(lenet_onnx: Path, calibration: np.ndarray, eval_set) -> None:  # type: ignore[no-untyped-def]
    x, labels = eval_set
    assert x.shape == (1000, 1, 28, 28)
    r = check_network(lenet_onnx, calibration, x, labels)
    print(f"\nLeNet MNIST: {r}")
    assert r["ort_accuracy"] > 0.9  # a trained network, not noise
    assert r["agreement"] >= 0.99
    assert abs(r["gati_accuracy"] - r["ort_accuracy"]) <= 0.01


def test_vgg_mnist(vgg_onnx: Path, calibration: np.ndarray, eval_set) -> None:  # type: ignore[no-untyped-def]
    ops = {n.op_type for n in onnx.load(str(vgg_onnx)).graph.node}
    assert {"Conv", "BatchNormalization", "MaxPool", "Gemm"} <= ops
    x, labels = eval_set
    r = check_network(vgg_onnx, calibration, x, labels)
    print(f"\nVGG MNIST: {r}")
    assert r["ort_accuracy"] > 0.9
    assert r["agreement"] >= 0.99


def test_vgg_through_dram_accumulants(vgg_onnx: Path, calibration: np.ndarray, eval_set) -> None:  # type: ignore[no-untyped-def]
    """With no on-chip buffer, partial sums of channel iterations go through DRAM: same result."""
    x = eval_set[0][:64]
    on_chip = compile_onnx(vgg_onnx, calibration)
    via_dram = compile_onnx(vgg_onnx, calibration, on_chip_acc_bytes=0)
    outs = [
        isa.decode_blob(p.blob)[3::4] for p in (on_chip, via_dram)
    ]  # OutputBlock of every layer
    acc_layers = [o for o in outs[1] if o["AccEn"]]
    assert acc_layers and all(not o["OnChipAcc"] and o["AccumulantAddr"] for o in acc_layers)
    assert any(o["OnChipAcc"] for o in outs[0])
    y1, _ = run_program(on_chip.stream, host_contract(on_chip), x)
    y2, _ = run_program(via_dram.stream, host_contract(via_dram), x)
    assert np.array_equal(y1, y2)


@pytest.mark.parametrize("network", ["lenet", "vgg"])
def test_report_cycles(network: str, lenet_onnx: Path, vgg_onnx: Path, calibration) -> None:  # type: ignore[no-untyped-def]
    from edgesynth.targets.gati.report import build_report

    prog = compile_onnx(lenet_onnx if network == "lenet" else vgg_onnx, calibration)
    rep = build_report(prog)
    fcs = [layer for layer in rep["layers"] if layer["engine"] == "fc"]
    assert len(fcs) == 2
    for layer in fcs:
        n, m = layer["in_shape"], layer["out_shape"][0]
        rows = int(np.prod(n))
        # about N x (M / P) cycles, P = 32
        assert layer["cycles"] == -(-m // 32) * (rows + 32)
    assert rep["total_cycles"] == sum(layer["cycles"] for layer in rep["layers"])


def test_lenet_program_graph(lenet_onnx: Path, calibration: np.ndarray) -> None:
    """What the program computes is an integer network graph: Conv/Linear with accumulator
    bias, Requantize (QuantScale / 2**QuantShift, half up), ReLU, max pooling from 0; the last
    layer saturates to 32 bits instead of requantizing."""
    from edgesynth.ir import graph as g
    from edgesynth.targets.gati.program_graph import integer_graph

    model = compile_onnx(lenet_onnx, calibration).model
    assert [fl.kind for fl in model.chain.layers] == ["conv", "conv", "linear", "linear"]
    graph = integer_graph(model)
    assert graph.is_integer and graph.inputs == ["input"]
    assert graph.tensors["input"].qtype == g.QType(8, scale=model.input_scale)
    ops = [node.op for node in graph.nodes]
    conv_layer = ["conv", "requantize", "activation", "pool"]
    assert ops == conv_layer * 2 + ["flatten", "linear", "requantize", "activation"] + [
        "linear",
        "clip",
    ]
    c1, r1, a1, p1 = graph.nodes[:4]
    assert isinstance(c1, g.Conv) and c1.pads == (1, 1, 1, 1) and c1.weight.shape == (6, 1, 3, 3)
    assert (
        isinstance(r1, g.Requantize)
        and r1.rounding == "half_up"
        and (r1.lo, r1.hi)
        == (
            -128,
            127,
        )
    )
    gl = model.layers[0]
    assert (r1.mul, r1.div) == (gl.quant_scale, 1 << gl.quant_shift)
    assert isinstance(a1, g.Activation) and a1.kind == "relu"
    assert isinstance(p1, g.Pool) and (p1.kind, p1.kernel, p1.max_floor) == ("max", (2, 2), 0)
    assert graph.tensors[p1.output].shape == (6, 14, 14)
    last = graph.nodes[-1]
    assert isinstance(last, g.Clip) and (last.lo, last.hi) == (-(1 << 31), (1 << 31) - 1)
    assert graph.tensors[graph.outputs[0]].qtype.bits == 32
    for gl, node in zip(model.layers, [n for n in graph.nodes if n.op in ("conv", "linear")],
                        strict=True):  # fmt: skip
        assert node.weight is gl.weights and node.weight.dtype == np.int64
        assert np.abs(node.weight).max() == 127  # per-layer scale: the largest weight is 127
    assert graph.meta["layer_outputs"][-1] == graph.outputs[0]
