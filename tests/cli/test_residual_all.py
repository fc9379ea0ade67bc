"""Issue 22's residual check on every accelerator at once: the residual, concatenating float CNN
of tests/residual_mnist.py (two skip additions, a concatenation of a block's input with its
output; trained briefly on real MNIST, exported by torch.onnx) compiled with `compile -t all`
on 300 calibration images; on 1,000 other real images every registered target compiles it and
agrees with ONNX Runtime's float top-1 on at least 98%."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.targets.registry import target_names
from mnist_lenet import EVAL, load_mnist
from residual_mnist import residual_onnx

CALIBRATION = slice(8000, 8300)


@pytest.mark.slow
@pytest.mark.train
def test_residual_concat_cnn_on_every_accelerator(tmp_path: Path) -> None:
    x, y = load_mnist()
    np.save(tmp_path / "cal.npy", x[CALIBRATION])
    np.save(tmp_path / "x.npy", x[EVAL])
    np.save(tmp_path / "y.npy", y[EVAL])
    table = tmp_path / "table.json"
    argv = [
        "compile",
        str(residual_onnx()),
        "-t",
        "all",
        "--calibration",
        str(tmp_path / "cal.npy"),
    ]
    argv += ["--data", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy")]
    assert main([*argv, "-o", str(tmp_path / "out"), "--json", str(table)]) == 0
    rows = {row["target"]: row for row in json.loads(table.read_text())["targets"]}
    assert sorted(rows) == sorted(target_names())
    for name, row in rows.items():
        assert row["compiled"], (name, row["error"])
        assert row["top1_agreement"] >= 0.98, (name, row["top1_agreement"])
