"""`edgesynth izer` proves the project before writing it, on the vendor's own corpus cases.

The vendor projects of the cases in known_answer_misses.py miss their own known answer on the
virtual device (the fast-FIFO loader feeds only the first quadrant; calcx4 kernels are
allocated over other layers' kernels). `izer` refuses them: exit 1, one message naming the first
failing layer and the hazard, no folder. `izer --no-verify` writes the vendor's project (write
for write: test_codegen_corpus.py) with a warning. Every other case prints the proof's line
(test_corpus.py checks all of them; one is here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesynth.cli import main
from known_answer_misses import MISSES_KNOWN_ANSWER

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"

pytestmark = pytest.mark.corpus


def _izer(name: str, out: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    case = CORPUS / name
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    args = [a for a in info["args"] if a != "--verbose"]
    return main(["izer", *args, "--test-dir", str(out), "--prefix", "p", *extra])


@pytest.mark.parametrize("name", sorted(MISSES_KNOWN_ANSWER))
def test_izer_refuses_a_project_that_misses_its_known_answer(
    name: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "out"
    assert _izer(name, out, monkeypatch) == 1
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err
    device = name.split("/")[0]
    assert f"the project misses its known answer on the virtual {device} (" in err
    assert MISSES_KNOWN_ANSWER[name] in err
    assert "On the board, the known-answer check fails (main() prints *** FAIL ***)" in err
    assert "`edgesynth plan`" in err and "--no-verify" in err
    assert "known answer reproduced" not in captured.out
    assert not out.exists()


@pytest.mark.parametrize("name", sorted(MISSES_KNOWN_ANSWER))
def test_izer_no_verify_writes_the_vendors_project_with_a_warning(
    name: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "out"
    assert _izer(name, out, monkeypatch, "--no-verify") == 0
    captured = capsys.readouterr()
    device = name.split("/")[0]
    assert (
        f"edgesynth: warning: --no-verify: the project was written without running it on the "
        f"virtual {device}; nothing shows that it computes the known answer." in captured.err
    )
    assert "known answer reproduced" not in captured.out
    assert (out / "p" / "cnn.c").is_file() and (out / "p" / "sampleoutput.h").is_file()


def test_a_case_that_reproduces_its_known_answer_prints_the_proof_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    assert _izer("MAX78000/mnist", tmp_path / "out", monkeypatch) == 0
    out = capsys.readouterr().out
    assert "known answer reproduced on the virtual MAX78000: 10 of 10 words\n" in out
    assert (tmp_path / "out" / "p" / "cnn.c").is_file()
