"""Regression and embedding training: a dataset of target vectors, the losses, the scores that
replace top-1, the 8-bit scale of the chip's outputs, and --slice-sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.train.regression import (
    OutputUnit,
    RegressionAccumulator,
    choose_loss,
    regression_loss,
)
from edgesynth.train.userdata import load_user_dataset

VECTORS = """\
import torch


def make_datasets():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(640, 1, 8, 8, generator=g) * 2 - 1
    quadrants = x.reshape(640, 2, 4, 2, 4).mean(dim=(2, 4)).reshape(640, 4)
    return {"train": (x[:512], quadrants[:512]), "test": (x[512:], quadrants[512:]),
            "name": "quadrants"}
"""

ITEMS = """\
import numpy as np


class Items:
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return np.full((2, 4, 4), i / 8, np.float32), np.arange(3, dtype=np.float32) * i


def make_datasets():
    return Items(), Items()
"""

MODEL = """\
from torch import nn
import edgesynth.nn as enn


class VecNet(nn.Module):
    def __init__(self, num_classes=4, num_channels=1, dimensions=(8, 8)):
        super().__init__()
        self.conv = enn.FusedConv2dReLU(num_channels, 8, 3, padding=1, bias=True)
        self.fc = enn.Linear(8 * dimensions[0] * dimensions[1], num_classes, bias=True)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_the_loss_follows_the_targets_unless_chosen() -> None:
    assert choose_loss(None, False, vectors=False) == "ce"
    assert choose_loss(None, False, vectors=True) == "mse"
    assert choose_loss("cosine", False, vectors=True) == "cosine"
    with pytest.raises(EdgesynthError, match="needs a dataset whose targets are vectors"):
        choose_loss(None, True, vectors=False)
    with pytest.raises(EdgesynthError, match="choose --loss mse, l1, smoothl1, cosine, not ce"):
        choose_loss("ce", False, vectors=True)


def test_losses_and_scores() -> None:
    out = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    tgt = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    assert regression_loss("mse", out, tgt).item() == pytest.approx(0.5)
    assert regression_loss("l1", out, tgt).item() == pytest.approx(0.5)
    cos = (2**-0.5 + 1.0) / 2
    assert regression_loss("cosine", out, tgt).item() == pytest.approx(1 - cos)
    acc = RegressionAccumulator()
    acc.add(out[:1], tgt[:1], 0.25)
    acc.add(out[1:], tgt[1:], 0.75)
    m = acc.result()
    assert m.regression is not None and m.count == 2
    assert (m.regression.mse, m.regression.mae) == (pytest.approx(0.5), pytest.approx(0.5))
    assert m.regression.cosine == pytest.approx(cos) and m.loss == pytest.approx(0.5)
    assert m.score == pytest.approx(-0.5)  # the best checkpoint has the lowest loss


def test_a_dataset_file_of_target_vectors(tmp_path: Path) -> None:
    ds = load_user_dataset(f"{_write(tmp_path, 'vec.py', VECTORS)}:make_datasets", None)
    assert ds.regression and ds.num_classes == 4 and ds.classes == []
    assert ds.train.y.shape == (512, 4) and ds.train.y.dtype == torch.float32
    items = load_user_dataset(f"{_write(tmp_path, 'items.py', ITEMS)}:make_datasets", None)
    assert items.regression and items.num_classes == 3
    np.testing.assert_array_equal(items.test.y[2].numpy(), [0.0, 2.0, 4.0])


def test_mixed_targets_are_refused(tmp_path: Path) -> None:
    bad = ITEMS.replace("np.arange(3, dtype=np.float32) * i", "i if i else np.zeros(3, 'f')")
    path = _write(tmp_path, "mixed.py", bad)
    with pytest.raises(EdgesynthError, match="train targets differ in kind or length") as err:
        load_user_dataset(f"{path}:make_datasets", None)
    assert err.value.file == str(path)
    classes = VECTORS.replace('"name": "quadrants"', '"classes": ["a", "b", "c", "d"]')
    with pytest.raises(EdgesynthError, match="`classes` names classes"):
        load_user_dataset(f"{_write(tmp_path, 'cl.py', classes)}:make_datasets", None)


@pytest.mark.parametrize(("wide", "unit"), [(False, 128.0), (True, 2.0**14)])
def test_the_8_bit_output_unit_is_the_last_layer_s(wide: bool, unit: float) -> None:
    with enn.use("MAX78000"):
        net = torch.nn.Sequential(
            enn.FusedConv2dReLU(1, 2, 3, padding=1, weight_bits=8),
            enn.Conv2d(2, 3, 1, weight_bits=8, wide=wide),
        )
        watch = OutputUnit(net)
        with enn.use(simulate=True), torch.no_grad():
            net(torch.zeros(1, 1, 4, 4).double())
    assert watch.unit() == unit


def test_slice_sample_keeps_three_channels(tmp_path: Path) -> None:
    from edgesynth.train.datasets import Split
    from edgesynth.train.deploy import save_sample

    split = Split(torch.arange(5 * 8).float().reshape(1, 5, 2, 4) / 64, torch.zeros(1).long())
    path = save_sample(split, 0, tmp_path, "rgbd", channels=3)
    assert np.load(path).shape == (3, 2, 4)
    with pytest.raises(EdgesynthError, match="keeps 3 channels; the items have 2"):
        save_sample(Split(split.x[:, :2], split.y), 0, tmp_path, "two", channels=3)


@pytest.mark.train
@pytest.mark.slow
def test_a_user_network_learns_target_vectors_and_its_8_bit_scores_are_the_chip_s(
    tmp_path: Path, capsys
) -> None:
    from edgesynth.cli import main
    from edgesynth.quant.checkpoint import read_checkpoint

    user = ["--model-file", f"{_write(tmp_path, 'vecnet.py', MODEL)}:VecNet"]
    user += ["--dataset-file", f"{_write(tmp_path, 'vec.py', VECTORS)}:make_datasets"]
    args = ["train", *user, "--epochs", "6", "--no-progress", "--deterministic"]
    args += ["--out-dir", str(tmp_path / "logs"), "--name", "vec", "--simulate", "20"]
    assert main(args) == 0
    out = capsys.readouterr().out
    epochs = [line for line in out.splitlines() if line.startswith("epoch ") and "|" in line]
    mse = [float(line.split(" mse ")[1].split()[0]) for line in epochs]
    assert len(mse) == 6 and mse[-1] < mse[0] / 2  # it learns
    assert "top1" not in out and "Confusion matrix" not in out
    last = epochs[-1].split("| test ")[1].split(" lr ")[0]  # "loss L mse M mae A cosine C"
    scores = last.split(" ", 2)[2]
    assert f"8-bit (quantized) test {scores}" in out  # QAT tracks the chip exactly
    assert "Simulator on 20 test items: identical outputs to the 8-bit model 100.00%" in out
    q = tmp_path / "logs" / "vec" / "qat_best-q.pth.tar"
    extras = read_checkpoint(tmp_path / "logs" / "vec" / "qat_best.pth.tar")["extras"]
    assert extras["best_loss"] == pytest.approx(float(last.split()[1]), abs=1e-4)
    assert main(["train", *user, "--evaluate", "--checkpoint", str(q), "-8"]) == 0
    assert f"VecNet on quadrants test (128 items, 8-bit): {scores}" in capsys.readouterr().out
    assert main([*args[:5], "--pr-curves"]) == 1
    assert "precision-recall curves are of classes" in capsys.readouterr().err


@pytest.mark.train
@pytest.mark.slow
def test_faceid_trains_from_the_command_line_on_embeddings(tmp_path: Path, capsys) -> None:
    """The zoo's FaceID network learns teacher embeddings (a user's dataset of faces and
    unit vectors) with the cosine loss, and simulates to its 8-bit outputs."""
    from edgesynth.cli import main

    faces = """\
import torch


def make_datasets():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (10, 3, 96, 64), generator=g).float() / 128
    e = torch.randn(10, 512, generator=g)
    e = e / e.norm(dim=1, keepdim=True)
    return {"train": (x[:8], e[:8]), "test": (x[8:], e[8:]), "name": "faces"}
"""
    data = f"{_write(tmp_path, 'faces.py', faces)}:make_datasets"
    args = ["train", "--model", "ai85faceidnet", "--dataset-file", data, "--loss", "cosine"]
    args += ["--epochs", "2", "--batch-size", "4", "--no-progress", "--deterministic"]
    assert main([*args, "--out-dir", str(tmp_path), "--name", "f", "--simulate", "2"]) == 0
    out = capsys.readouterr().out
    assert "Training ai85faceidnet on faces (8 train / 2 test)" in out
    assert "epoch 1/1 QAT: train loss" in out and " cosine " in out
    assert "Simulator on 2 test items: identical outputs to the 8-bit model 100.00%" in out


@pytest.mark.train
@pytest.mark.slow
def test_two_processes_learn_the_same_vectors(tmp_path: Path, capsys) -> None:
    """Data parallel regression: each process imports the user's files, the accumulated
    scores reduce over the processes, and the run ends where the single process ends (the same
    global batches and seed)."""
    import os
    import subprocess
    import sys

    from edgesynth.cli import main

    user = ["--model-file", f"{_write(tmp_path, 'vecnet.py', MODEL)}:VecNet"]
    user += ["--dataset-file", f"{_write(tmp_path, 'vec.py', VECTORS)}:make_datasets"]
    args = ["train", *user, "--epochs", "3", "--no-progress", "--deterministic", "--device"]
    args += ["cpu", "--out-dir", str(tmp_path / "logs"), "--param-hist"]
    assert main(args) == 0
    single = capsys.readouterr().out
    done = subprocess.run(
        [sys.executable, "-m", "edgesynth", *args, "--nproc-per-node", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr

    def mse(out: str) -> float:
        return float(out.split("8-bit (quantized) test mse ")[1].split()[0])

    assert "Data-parallel training: 2 processes" in done.stdout
    assert mse(done.stdout) == pytest.approx(mse(single), rel=0.02)
    assert len(list((tmp_path / "logs").glob("*/tensorboard/events.*"))) == 2
