"""A small version of benchmarks/mnist_qat.py on the real MNIST files: two epochs on 1,000
images, then the 8-bit model and the simulator on all 2,000 held-out images."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MNIST = REPO.parent / "shared" / "data" / "mnist"

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_mnist_qat_benchmark_smoke(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "mnist_qat.py"),
            "--data",
            str(MNIST),
            "--epochs",
            "2",
            "--qat-start",
            "1",
            "--train-limit",
            "1000",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    last = run.stdout.strip().splitlines()[-1]
    found = re.fullmatch(r"float_top1=([\d.]+) quant_top1=([\d.]+) sim_agree=([\d.]+)", last)
    assert found, last
    float_top1, quant_top1, agree = map(float, found.groups())
    assert agree == 100.0  # the simulator and the 8-bit model agree on every image
    assert quant_top1 > 70.0 and float_top1 > 30.0
    assert "identical output vectors 100.00%" in run.stdout
