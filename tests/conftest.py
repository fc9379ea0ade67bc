"""Shared fixtures: where the reference corpus and data live (../shared beside the repo)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # cli_helpers

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "cases"
MNIST = SHARED / "data" / "mnist"


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the reference corpus is missing: expected it at {CORPUS}")
    return CORPUS
