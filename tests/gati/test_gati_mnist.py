"""Trained MNIST CNNs: the functional model equals the integer reference and agrees with ORT."""

from __future__ import annotations

from pathlib import Path

import gati_mnist_models as mm
import numpy as np
import onnx
import pytest

from edgesynth.targets.gati import isa
from edgesynth.targets.gati.compiler import compile_onnx
from edgesynth.targets.gati.floatref import float_forward
from edgesynth.targets.gati.host import host_contract, run_program
from edgesynth.targets.gati.quantize import quantize_input
from edgesynth.targets.gati.reference import reference_layers


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
    np.testing.assert_allclose(float_forward(prog.model.graph, x), y_ort, rtol=1e-4, atol=1e-4)
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


def test_lenet_lives_in_the_network_ir(lenet_onnx: Path, calibration: np.ndarray) -> None:
    """The quantized network is edgesynth's target-independent IR, not a Gati structure."""
    from edgesynth.ir.network import NETWORK_INPUT, Network

    model = compile_onnx(lenet_onnx, calibration).model
    net = model.network
    assert isinstance(net, Network)
    assert net.device == "GATI" and net.input_shape == (1, 28, 28)
    ops = [layer.operation for layer in net.layers]
    assert ops == ["conv2d", "conv2d", "linear", "linear"]
    c1, c2, f1, f2 = net.layers
    assert (c1.in_channels, c1.out_channels, c1.kernel_size, c1.pad) == (1, 6, (3, 3), (1, 1))
    assert (c1.pool_type, c1.pool, c1.pool_stride, c1.pool_first) == ("max", (2, 2), (2, 2), False)
    assert c1.out_dim == (28, 28) and c1.pooled_dim == (14, 14)
    assert [layer.activation for layer in net.layers] == ["relu", "relu", "relu", None]
    assert f1.flatten and not f2.flatten
    assert [layer.in_sequences for layer in net.layers] == [[NETWORK_INPUT], [0], [1], [2]]
    assert [layer.output for layer in net.layers] == [False, False, False, True]
    assert [layer.output_width for layer in net.layers] == [8, 8, 8, 32]
    for layer in net.layers:
        assert layer.weights is not None and layer.weights.dtype == np.int64
        assert np.abs(layer.weights).max() == 127  # per-layer scale: the largest weight is 127
        assert layer.spec.name in model.layers[layer.index].onnx_nodes
    assert f1.weights.shape == (64, 16 * 7 * 7) and c2.weights.shape == (16, 6, 3, 3)
