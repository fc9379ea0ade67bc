"""`synth --report` and `plan --report` (MAX78000, the corpus' MNIST description and
checkpoint): the page of the network they placed, its layers those of the description; a page
name that is no .html is refused before any work."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cli_helpers import run_cli, snapshot

pytestmark = pytest.mark.corpus
CASE = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "cases" / "MAX78000" / "mnist"
LAYERS = 5  # networks/mnist-chw-ai85.yaml


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(CASE, tmp_path / "mnist")
    monkeypatch.chdir(tmp_path / "mnist")
    return tmp_path / "mnist"


def _rows(page: Path) -> int:
    html = page.read_text()
    table = html[html.index('data-table="layers"') :]
    return len(re.findall(r"<tr><td class=\"n\"", table[: table.index("</table>")]))


def test_synth_report(case: Path) -> None:
    result = run_cli(
        "synth", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar",
        "--sample-input", "tests/sample_mnist.npy", "-o", "out", "--report",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = case / "out" / "report.html"
    assert f"wrote {Path('out') / 'report.html'}" in result.stdout
    assert _rows(page) == LAYERS
    assert 'data-chart="time"' in page.read_text()  # MAX78000 has a latency estimate


def test_plan_report(case: Path) -> None:
    result = run_cli(
        "plan", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar",
        "--report", "plan.html",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _rows(case / "plan.html") == LAYERS


def test_plan_report_needs_html(case: Path) -> None:
    before = snapshot(case)
    result = run_cli(
        "plan", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar",
        "--report", "plan.png",
    )  # fmt: skip
    assert result.exit_code == 1
    assert ".html" in result.stderr and "--report" in result.stderr
    assert snapshot(case) == before
