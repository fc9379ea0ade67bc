"""PULP/GAP8 tests share `pulpcase` (the corpus in ../shared/pulp and how to compare with it)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "corpus: runs over the reference corpora in ../shared")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
