"""Files a compilation produces, written all at once (temp dir, then moved into place)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import staged_directory
from edgesynth.targets.gati.compiler import CompiledProgram
from edgesynth.targets.gati.host import known_answer
from edgesynth.targets.gati.report import build_report

BLOB = "program.bin"
STREAM = "program.dwp"
REPORT = "report.json"
SAMPLE = "sample.dwp"
EXPECTED = "sample_expected.dwp"


def write_outputs(
    prog: CompiledProgram, out_dir: str | Path, sample: np.ndarray | None = None
) -> dict[str, Any]:
    """Write blob, stream and report into `out_dir` (with a `sample`, also its inference
    stream and the known answer); a failure leaves nothing half-done."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise EdgesynthError(f"{out} exists and is not a directory")
    report = build_report(prog)
    known = known_answer(prog, sample) if sample is not None else None
    with staged_directory(out) as tmp:
        (tmp / BLOB).write_bytes(prog.blob)
        (tmp / STREAM).write_bytes(prog.stream)
        (tmp / REPORT).write_text(json.dumps(report, indent=1) + "\n")
        if known is not None:
            (tmp / SAMPLE).write_bytes(known[0])
            (tmp / EXPECTED).write_bytes(known[1])
    return report


def load_outputs(out_dir: str | Path) -> tuple[bytes, dict[str, Any]]:
    """(DWP stream, host contract) of a compiled directory."""
    out = Path(out_dir)
    stream_path, report_path = out / STREAM, out / REPORT
    for p in (stream_path, report_path):
        if not p.is_file():
            raise EdgesynthError(
                f"{p} is missing; is {out} the output of `edgesynth gati compile`?"
            )
    try:
        report = json.loads(report_path.read_text())
        host = report["host"]
    except (ValueError, KeyError) as exc:
        raise EdgesynthError(f"{report_path}: not a Gati report ({exc})") from None
    return stream_path.read_bytes(), host


def load_npy(path: str | Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise EdgesynthError(f"cannot read {what} {path}: {exc}") from None
