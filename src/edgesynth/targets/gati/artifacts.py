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


def write_files(
    prog: CompiledProgram, folder: Path, sample: np.ndarray | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Write blob, stream and report into the existing `folder` (with a `sample`, also its
    inference stream and the known answer); returns the report and the file names."""
    report = build_report(prog)
    files = {BLOB: prog.blob, STREAM: prog.stream}
    if sample is not None:
        files[SAMPLE], files[EXPECTED] = known_answer(prog, sample)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / REPORT).write_text(json.dumps(report, indent=1) + "\n")
    return report, sorted([*files, REPORT])


def write_outputs(
    prog: CompiledProgram, out_dir: str | Path, sample: np.ndarray | None = None
) -> dict[str, Any]:
    """`write_files` into `out_dir`, staged: a failure leaves nothing half-done."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise EdgesynthError(f"{out} exists and is not a directory")
    with staged_directory(out) as tmp:
        report, _ = write_files(prog, tmp, sample)
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
