"""`edgesynth validate` on a vendor YAML + QAT checkpoint (the MAX78000 MNIST case of the
corpus) with real MNIST images as the chip's input codes: the training model in float mode is
the reference, and on a QAT checkpoint it already rounds as the chip does, so the deployed
network must match it exactly and classify the digits as the labels say."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli
from mnist_lenet import MNIST, idx_file

pytestmark = [pytest.mark.corpus, pytest.mark.slow]
CASE = needs.CORPUS / "cases" / "MAX78000" / "mnist"
SAMPLES = 60


def test_vendor_checkpoint_on_max78000_matches_its_training_model(tmp_path: Path) -> None:
    needs.in_corpus(CASE)
    pixels = idx_file(MNIST / "t10k-images-idx3-ubyte.gz")[:SAMPLES] / 255.0
    codes = np.clip(np.round((pixels - 0.5) * 256), -128, 127).astype(np.int64)[:, None]
    labels = idx_file(MNIST / "t10k-labels-idx1-ubyte.gz")[:SAMPLES].astype(np.int64)
    np.save(tmp_path / "codes.npy", codes)
    np.save(tmp_path / "labels.npy", labels)
    result = run_cli(
        "validate", CASE / "networks" / "mnist-chw-ai85.yaml",
        "--checkpoint", CASE / "trained" / "ai85-mnist-qat8-q.pth.tar",
        "--sample-input", CASE / "tests" / "sample_mnist.npy", "-t", "max78000",
        "-d", tmp_path / "codes.npy", "--labels", tmp_path / "labels.npy",
        "--json", tmp_path / "v.json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads((tmp_path / "v.json").read_text())["outputs"][0]
    assert out["top1_agreement"] == 1.0
    assert out["metrics"]["rmse"] == 0.0 and out["metrics"]["cosine"] == pytest.approx(1.0)
    assert out["accuracy"]["target"] >= 0.95
    assert "the training model, float mode" in result.stdout


def test_a_yaml_without_checkpoint_is_refused(tmp_path: Path) -> None:
    needs.in_corpus(CASE)
    np.save(tmp_path / "codes.npy", np.zeros((2, 1, 28, 28), np.int64))
    result = run_cli(
        "validate", CASE / "networks" / "mnist-chw-ai85.yaml", "-t", "max78000",
        "--sample-input", CASE / "tests" / "sample_mnist.npy", "-d", tmp_path / "codes.npy",
    )  # fmt: skip
    assert result.exit_code == 1 and result.stdout == ""
    assert "pass the checkpoint with --checkpoint" in result.stderr
