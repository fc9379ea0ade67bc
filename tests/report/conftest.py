"""What the report tests share: the small CNN of tests/compile_all_models.py compiled for gap8."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from compile_all_models import cnn


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CNN compiled for gap8 (fast: no proof run). Tests must not write into it."""
    root = tmp_path_factory.mktemp("report_compiled")
    model = cnn(root / "cnn.onnx")
    rng = np.random.default_rng(0)
    np.save(root / "cal.npy", rng.normal(0, 1, (32, 1, 28, 28)).astype(np.float32))
    out = root / "gap8"
    result = run_cli(
        "compile", model, "-t", "gap8", "-c", root / "cal.npy", "-o", out, "--no-verify"
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out
