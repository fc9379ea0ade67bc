"""Real data: a small CNN and a residual one written with `edgesynth.quant.qat_gap8` layers,
trained by `edgesynth train --target gap8` on MNIST (2 float epochs, 1 QAT epoch on 4,000
images); each integer network (`edgesynth export --target gap8`) is within 0.5 points of the
float network's top-1, equals the training side's 8-bit mode value for value on 1,000 test
images, and `compile -t gap8` of the exported file runs them (the simulator) with the same
output codes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli
from mnist_lenet import MNIST

torch = needs.module("torch")

MODEL = """
from torch import nn

from edgesynth.quant import qat_gap8 as q


class SmallCNN(nn.Module):
    def __init__(self, num_classes=10, num_channels=1):
        super().__init__()
        self.conv1 = q.Conv2d(num_channels, 8, 3, padding=1, activation="relu")
        self.conv2 = q.Conv2d(8, 16, 3, padding=1, activation="relu")
        self.pool = nn.MaxPool2d(2)
        self.fc1 = q.Linear(16 * 7 * 7, 32, activation="relu")
        self.fc2 = q.Linear(32, num_classes)

    def forward(self, x):
        x = self.pool(self.conv1(x))
        x = self.pool(self.conv2(x))
        return self.fc2(self.fc1(x.flatten(1)))


class ResCNN(nn.Module):
    # two skip additions (qat_gap8.Add), each followed by a ReLU

    def __init__(self, num_classes=10, num_channels=1):
        super().__init__()
        self.stem = q.Conv2d(num_channels, 16, 3, padding=1, activation="relu")
        self.pool = nn.MaxPool2d(2)
        self.a1 = q.Conv2d(16, 16, 3, padding=1, activation="relu")
        self.a2 = q.Conv2d(16, 16, 3, padding=1)
        self.add1 = q.Add(activation="relu")
        self.b1 = q.Conv2d(16, 16, 3, padding=1, activation="relu")
        self.b2 = q.Conv2d(16, 16, 3, padding=1)
        self.add2 = q.Add(activation="relu")
        self.fc = q.Linear(16 * 3 * 3, num_classes)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = self.pool(self.add1(x, self.a2(self.a1(x))))
        x = self.pool(self.add2(x, self.b2(self.b1(x))))
        return self.fc(x.flatten(1))
"""


@pytest.fixture(scope="module", params=["SmallCNN", "ResCNN"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of `edgesynth train --target gap8` on MNIST."""
    folder = tmp_path_factory.mktemp("qat")
    (folder / "cnn.py").write_text(MODEL)
    r = run_cli(
        "train", "--target", "gap8", "--model-file", f"{folder / 'cnn.py'}:{request.param}",
        "--dataset", "mnist-test-split", "--data", MNIST, "--train-limit", "4000",
        "--epochs", "3", "--seed", "1", "--threads", "1", "--out-dir", folder, "--name", "run",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "QAT from epoch 2" in r.stdout and "integer network (8-bit mode)" in r.stdout
    return folder / "run"


@pytest.mark.slow
@pytest.mark.train
def test_the_integer_network_is_as_accurate_as_the_float_network(run: Path) -> None:
    extras = torch.load(run / "qat_gap8.pth.tar", weights_only=True)["extras"]
    print(extras)
    assert extras["float_top1"] >= 0.9
    assert extras["integer_top1"] >= extras["float_top1"] - 0.005


@pytest.mark.slow
@pytest.mark.train
def test_the_exported_network_equals_the_8bit_mode_on_1000_images(
    run: Path, tmp_path: Path
) -> None:
    from edgesynth.frontends.onnx_int import load_integer_onnx
    from edgesynth.sim.graph import run as simulate
    from edgesynth.train.datasets import load_dataset
    from edgesynth.train.gap8 import export_gap8

    r = run_cli("export", "--target", "gap8", run / "qat_gap8.pth.tar", "-o", tmp_path / "i.onnx")
    assert r.exit_code == 0 and "16 random inputs: identical" in r.stdout, r.output
    assert (tmp_path / "i.onnx").read_bytes() == (run / "network.onnx").read_bytes()
    _, net, _ = export_gap8(run / "qat_gap8.pth.tar", tmp_path / "j.onnx", None, None, False)
    x = load_dataset("mnist-test-split", MNIST).test.x[:1000]
    with torch.no_grad():
        codes = net.input(x)
        eight_bit = net.body(codes).numpy().astype(np.int64)
        net.set_mode("qat")
        fake = net(x).argmax(1).numpy()
    graph = load_integer_onnx(tmp_path / "i.onnx").graph
    codes = codes.numpy().astype(np.int64)
    assert np.array_equal(simulate(graph, codes)[graph.outputs[0]].reshape(1000, -1), eight_bit)
    assert (fake == eight_bit.argmax(1)).mean() >= 0.99  # float32 QAT forward: top-1 alike

    out = tmp_path / "gap8"
    r = run_cli("compile", tmp_path / "i.onnx", "-t", "gap8", "-o", out)
    assert r.exit_code == 0, r.output
    np.save(tmp_path / "codes.npy", codes)
    r = run_cli("run", out, "-i", tmp_path / "codes.npy", "--integer", "-o", tmp_path / "o.npy")
    assert r.exit_code == 0, r.output
    assert np.array_equal(np.load(tmp_path / "o.npy").reshape(1000, -1), eight_bit)
