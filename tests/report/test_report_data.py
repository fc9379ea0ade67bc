"""What each target's `report_data` reads back from its compiled folder agrees with what the
compiler itself summarizes (`compile -t all --json`, `Target.summarize` on the program): the
per-layer MACs add up to the network's, the per-layer cycles to the latency estimate; every
memory picture's regions lie inside its memory, on its lanes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from compile_all_models import cnn
from edgesynth.report.collect import target_report
from edgesynth.targets.registry import target_names


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    root = tmp_path_factory.mktemp("report_data")
    model = cnn(root / "cnn.onnx")
    rng = np.random.default_rng(0)
    np.save(root / "cal.npy", rng.normal(0, 1, (32, 1, 28, 28)).astype(np.float32))
    table = root / "table.json"
    result = run_cli(
        "compile", model, "-t", "all", "-c", root / "cal.npy", "-o", root / "all",
        "--json", table, "--no-verify",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {r["target"]: r for r in json.loads(table.read_text())["targets"]}
    return root / "all", rows


@pytest.mark.parametrize("target", target_names())
def test_report_data_agrees_with_the_summary(compiled: tuple, target: str) -> None:
    folder, rows = compiled
    row = rows[target]
    assert row["compiled"], row["error"]
    data = target_report(folder / target)
    assert data.target == target and data.layers
    assert sum(lay.macs or 0 for lay in data.layers) == row["macs"]
    assert data.total_cycles == row["cycles"]
    if row["cycles"] is not None:
        timed = sum(lay.cycles or 0 for lay in data.layers)
        assert 0 < timed <= row["cycles"]  # the total may add a start-up
    assert data.maps or data.usage
    for picture in data.maps:
        assert picture.regions, picture.title
        for region in picture.regions:
            assert region.lane in picture.lanes
            assert 0 <= region.start < region.end <= picture.size, (picture.title, region)
