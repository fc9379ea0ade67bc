"""Shared paths and fixtures for the xDNN tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

MLSUITE = Path(__file__).resolve().parents[2].parent / "shared" / "xdnn" / "ml-suite"


@pytest.fixture(scope="session")
def mlsuite() -> Path:
    if not MLSUITE.is_dir():
        pytest.fail(f"the ml-suite reference files are missing: expected them at {MLSUITE}")
    return MLSUITE


@pytest.fixture(scope="session")
def googlenet_json(mlsuite: Path) -> dict:
    return json.loads((mlsuite / "googlenet_v1_28.json").read_text())
