"""`--snoop-loop` (MAX78002): cnn_start() links the last layer back to layer 0 and sets snoop
unit 1 to decide whether the link is taken; edgesynth writes what the vendor's tool writes, and
the virtual device runs one pass of the loop and says so."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from edgesynth.targets.max7800x.commands.izer import plan_izer
from edgesynth.targets.max7800x.placement.verify import device_check, run_plan
from edgesynth.targets.max7800x.plan.writes import Write

pytestmark = pytest.mark.corpus

VENDOR = Path(__file__).parent / "data" / "snoop_loop_start_writes.txt"


def _vendor_writes() -> list[tuple[int, int]]:
    lines = [ln.split() for ln in VENDOR.read_text().splitlines() if not ln.startswith("#")]
    return [(int(a, 16), int(v, 16)) for a, v in lines]


def test_snoop_loop_writes_and_run(corpus: Path, monkeypatch, tmp_path: Path) -> None:
    case = corpus / "MAX78002" / "test-depthwise6x5x7"
    args = json.loads((case / "case.json").read_text())["args"]
    monkeypatch.chdir(case)
    argv = [*args, "--snoop-loop", "--test-dir", str(tmp_path), "--prefix", "p"]
    with contextlib.redirect_stdout(io.StringIO()):
        _, plan = plan_izer(argv)
    ours = [
        (w.address, w.value) for w in [*plan.start.writes, *plan.go.writes] if isinstance(w, Write)
    ]
    assert ours == _vendor_writes()
    result = run_plan(plan, "MAX78002")
    assert any("loops back to layer 0" in note for note in result.warnings), result.warnings
    check = device_check(plan, "MAX78002")
    assert check.ok, (check.details, check.hazards)
    assert np.array_equal(check.output, np.load(case / "expected_output.npy"))
