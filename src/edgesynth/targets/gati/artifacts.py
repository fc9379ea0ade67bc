"""Files a compilation produces, written all at once (temp dir, then moved into place)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati.compiler import CompiledProgram
from edgesynth.targets.gati.report import build_report

BLOB = "program.bin"
STREAM = "program.dwp"
REPORT = "report.json"


def write_outputs(prog: CompiledProgram, out_dir: str | Path) -> dict[str, Any]:
    """Write blob, stream and report into `out_dir`; a failure leaves nothing half-done."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise EdgesynthError(f"{out} exists and is not a directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    report = build_report(prog)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / BLOB).write_bytes(prog.blob)
        (tmp / STREAM).write_bytes(prog.stream)
        (tmp / REPORT).write_text(json.dumps(report, indent=1) + "\n")
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / out.name)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
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


def save_npy_atomic(path: str | Path, array: np.ndarray) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".npy", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
