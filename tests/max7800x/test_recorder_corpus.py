"""edgesynth's recorder (recorder/) against the reference recorder (../shared/tools/devtrace).

For every `expect: ok` case of the vendor corpus, `edgesynth izer <case args>` writes the
project and edgesynth's recorder records its writes:
- where the case has a trace.bin (what the reference recorder gives on this project:
  test_codegen_corpus.py checks that), the two are byte-identical;
- elsewhere the reference recorder's run.sh records the same project and the two traces are
  byte-identical.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from edgesynth.targets.max7800x.izer import run_izer
from edgesynth.targets.max7800x.plan.trace import phase_matches, read_trace
from edgesynth.targets.max7800x.recorder.record import record_project

SHARED = Path(__file__).resolve().parents[3] / "shared"
CORPUS = SHARED / "corpus" / "cases"
REFERENCE = SHARED / "tools" / "devtrace" / "run.sh"
CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs the host C compiler (gcc)"),
]


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _reference_trace(case: Path, project: Path, work: Path) -> bytes:
    if (case / "trace.bin").is_file():
        return (case / "trace.bin").read_bytes()
    out = work / "reference.trace"
    subprocess.run(["bash", str(REFERENCE), str(project), str(out)], check=True, timeout=600)
    return out.read_bytes()


def test_some_cases_are_traced() -> None:
    """The comparison below is not vacuous: most cases carry the reference's trace."""
    assert sum((c / "trace.bin").is_file() for c in CASES) > 400


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_recorder_matches_the_reference(case: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    run_izer([*info["args"], "--test-dir", str(tmp_path), "--prefix", "p"])
    capsys.readouterr()
    project = tmp_path / "p"
    ours = tmp_path / "ours.trace"
    record_project(project, ours)
    reference = _reference_trace(case, project, tmp_path)
    if ours.read_bytes() != reference:
        (tmp_path / "reference.trace").write_bytes(reference)
        phases = phase_matches(read_trace(ours), read_trace(tmp_path / "reference.trace"))
        pytest.fail(f"the traces differ; phases identical: {phases}")
