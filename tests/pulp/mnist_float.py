"""A float MNIST CNN written for the gap8 quantizer's check (not one of the repository's):
Conv/BatchNorm/ReLU/MaxPool, a third convolution, two Linear layers; trained briefly on real
MNIST through `mnist_lenet.trained` (cached per source and torch version) and exported by
torch.onnx."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import needs
from mnist_lenet import EVAL, load_mnist, trained

torch = needs.module("torch")
CALIBRATION = slice(8000, 8200)  # 200 images neither trained on nor evaluated
__all__ = ["CALIBRATION", "EVAL", "export", "load_mnist", "model", "ort_logits"]


def small_cnn():  # type: ignore[no-untyped-def]
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )


def model(mnist):  # type: ignore[no-untyped-def]
    """The CNN trained for 2 epochs of 125 steps on the first 8,000 images."""
    return trained("gap8-ptq-cnn", small_cnn, mnist, epochs=2)


def export(m, path: Path) -> Path:  # type: ignore[no-untyped-def]
    torch.onnx.export(
        m, torch.zeros(1, 1, 28, 28), str(path), input_names=["image"],
        output_names=["logits"], opset_version=13, dynamo=False,
    )  # fmt: skip
    return path


def ort_logits(path: Path, x: np.ndarray) -> np.ndarray:
    ort = needs.module("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"image": x[i : i + 1]})[0] for i in range(len(x))])
