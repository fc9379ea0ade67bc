"""A third-party float ONNX CNN on the MAX78000, placed automatically, on real MNIST.

The LeNet-style network of tests/mnist_lenet.py, trained on the first 8,000 t10k images and
written as a non-PyTorch exporter writes it (opset 11: Conv, Relu, MaxPool, Reshape with a
shape initializer, Gemm with transB), is compiled with `edgesynth compile -t max78000` (post-
training quantization on 300 other images, power-of-two output shifts, no placement key given).
On 1,000 images used for neither, the bit-exact model's top-1 agrees with ONNX Runtime's float
top-1 on at least 98%, and the generated C project, compiled and recorded by edgesynth's recorder,
runs on the virtual device with every known-answer word right and no memory hazard.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.cli import main
from mnist_lenet import EVAL, lenet, load_mnist, third_party_onnx, trained


@pytest.mark.slow
@pytest.mark.train
def test_third_party_onnx_lenet_on_max78000(tmp_path: Path, capsys) -> None:
    ort = needs.module("onnxruntime")
    x, y = load_mnist()
    model_path = tmp_path / "lenet_opset11.onnx"
    third_party_onnx(trained("lenet", lenet, (x, y)), model_path, opset=11)
    xe = x[EVAL]
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    float_top1 = np.array(
        [session.run(None, {"input": xe[i : i + 1]})[0].argmax() for i in range(len(xe))]
    )
    assert (float_top1 == y[EVAL]).mean() >= 0.95

    np.save(tmp_path / "calibration.npy", x[:300])
    out = tmp_path / "compiled"
    status = main(
        [
            "compile", str(model_path), "-t", "max78000",
            "--calibration", str(tmp_path / "calibration.npy"), "-o", str(out),
        ]
    )  # fmt: skip
    assert status == 0
    # the planner chose the placement and wrote it into the description
    assert "out_offset" in (out / "network.yaml").read_text()
    np.save(tmp_path / "x.npy", xe)
    assert (
        main(["run", str(out), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")]) == 0
    )
    top1 = np.load(tmp_path / "y.npy").reshape(len(xe), -1).argmax(1)
    agree = float((top1 == float_top1).mean())
    assert agree >= 0.98, agree

    needs.tool("gcc")  # device run records the project with the host compiler
    assert main(["device", "run", str(out / "project")]) == 0
    report = capsys.readouterr().out
    assert "known answer: all" in report and "hazard:" not in report
    print(f"third-party ONNX LeNet on MAX78000: top-1 agreement with ONNX Runtime {agree:.3f}")
