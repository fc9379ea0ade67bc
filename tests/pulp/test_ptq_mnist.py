"""Real data: float MNIST CNNs (one written for this check and exported by torch.onnx, one
written as a third-party exporter writes ONNX, opset 8) calibrated on 200 images, compiled with
`edgesynth compile -t gap8`, agree with ONNX Runtime's float top-1 on at least 98.5% of 1,000
other images, through the simulator and through the generated C built for the host (the two
giving the same codes), and on RV32 under qemu for a few images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mnist_float import CALIBRATION, EVAL, agreement, export, load_mnist, model, ort_logits

import needs
from cli_helpers import run_cli
from mnist_lenet import lenet, third_party_onnx, trained


@pytest.fixture(scope="module")
def mnist() -> tuple[np.ndarray, np.ndarray]:
    return load_mnist()


def _check(path: Path, mnist, tmp_path: Path) -> dict:  # type: ignore[no-untyped-def]
    needs.tools("gcc", "riscv64-unknown-elf-gcc", "qemu-riscv32")
    x, y = mnist
    cal = tmp_path / "cal.npy"
    np.save(cal, x[CALIBRATION])
    reference = ort_logits(path, x[EVAL]).argmax(1)
    assert (reference == y[EVAL]).mean() >= 0.9
    out = tmp_path / "gap8"
    r = run_cli("compile", path, "-t", "gap8", "-c", cal, "-o", out)
    assert r.exit_code == 0, r.output
    result = agreement(out, x[EVAL], reference, rv32=4)
    print(path.name, result)
    assert result["host_equals_simulator"] and result["rv32_equals_host"]
    assert result["simulator"] >= 0.985 and result["host_c"] >= 0.985, result
    return result


@pytest.mark.slow
@pytest.mark.train
def test_torch_exported_cnn(mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _check(export(model(mnist), tmp_path / "cnn.onnx"), mnist, tmp_path)


@pytest.mark.slow
@pytest.mark.train
def test_third_party_onnx_lenet(mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "lenet_opset8.onnx"
    third_party_onnx(trained("lenet", lenet, mnist), path)
    _check(path, mnist, tmp_path)


@pytest.mark.slow
@pytest.mark.train
def test_the_integer_network_is_the_fake_quantized_network(mnist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On 1,000 real images, every tensor the integer network stores has the fake-quantized
    float network's codes; where they differ the integer requantization is an exact tie."""
    from fakequant_check import differences, is_tie

    from edgesynth.flow import load_model

    x, _ = mnist
    graph = load_model(export(model(mnist), tmp_path / "cnn.onnx"))
    diff = differences(graph, x[CALIBRATION], x[EVAL])
    tensors = [t for t in diff if not t.startswith("_")]
    for tensor in tensors:
        if tensor in graph.outputs:
            assert diff[tensor].mean() <= 1e-3
            assert is_tie(graph, diff, tensor)[diff[tensor]].all(), tensor
        else:
            assert not diff[tensor].any(), tensor
