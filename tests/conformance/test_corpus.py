"""Every vendor case of the reference corpus, run through `edgesynth izer` like the vendor tool.

Each case runs from inside its folder with its own command line (so the vendor's implicit
`tests/...` look-ups resolve there) and must reproduce `expected_output.npy` value for value,
or, for cases the vendor refuses, be refused with a clear message, exit status 1 and no output.
Every case that runs proves its project on the virtual device first and prints the proof's line;
the few whose vendor project misses its known answer (known_answer_misses.py) run with
--no-verify here and are warned (tests/conformance/test_proof_corpus.py checks the refusal).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from known_answer_misses import MISSES_KNOWN_ANSWER

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
CASES = sorted(p.parent for p in CORPUS.glob("*/*/case.json"))

pytestmark = pytest.mark.corpus


def test_corpus_is_present() -> None:
    assert len(CASES) >= 554, f"expected the full reference corpus at {CORPUS}"


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _run(case: Path, out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict]:
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    argv = [
        "izer",
        *info["args"],
        "--test-dir",
        str(out_dir),
        "--prefix",
        info["name"],
        "--sample-numpy-filename",
        "expected_output",
    ]
    if _case_id(case) in MISSES_KNOWN_ANSWER:
        argv.append("--no-verify")
    return main(argv), info


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_case(case: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    status, info = _run(case, tmp_path, monkeypatch)
    captured = capsys.readouterr()
    produced = tmp_path / info["name"] / "expected_output.npy"
    if info["expect"] == "error":
        assert status == 1, f"the vendor refuses this case ({info['vendor_error']}), we did not"
        message = captured.err.strip()
        assert message.count("edgesynth: error:") == 1, message
        before = message.split("edgesynth: error:")[0].splitlines()
        assert all(line.startswith("edgesynth: warning:") for line in before), message
        assert "Traceback" not in captured.err
        assert not produced.exists(), "a refused case must not leave output behind"
        return
    assert status == 0, captured.err
    if _case_id(case) in MISSES_KNOWN_ANSWER:
        assert "warning: --no-verify: the project was written without running it" in captured.err
    else:
        assert re.search(
            rf"^known answer reproduced on the virtual {case.parent.name}: (\d+) of \1 words$",
            captured.out,
            re.M,
        ), captured.out
    expected = np.load(case / "expected_output.npy")
    actual = np.load(produced)
    assert actual.dtype == np.int64
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("name", ["MAX78000/mnist", "MAX78002/test-eltwiseadd-conv"])
def test_command_line_entry_point(name: str, tmp_path: Path) -> None:
    """The installed `edgesynth` program, as a user runs it."""
    case = CORPUS / name
    info = json.loads((case / "case.json").read_text())
    args = [*info["args"], "--test-dir", str(tmp_path), "--prefix", "p"]
    args += ["--sample-numpy-filename", "out"]
    run = subprocess.run(
        [sys.executable, "-m", "edgesynth", "izer", *args],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if info["expect"] == "ok":
        assert run.returncode == 0, run.stderr
        np.testing.assert_array_equal(
            np.load(tmp_path / "p" / "out.npy"), np.load(case / "expected_output.npy")
        )
    else:
        assert run.returncode == 1
        assert "Traceback" not in run.stderr
        assert run.stderr.count("edgesynth: error:") == 1
