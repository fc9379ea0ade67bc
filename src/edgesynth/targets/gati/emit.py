"""Files a compilation produces, written all at once (temp dir, then moved into place)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import OutputFolder, output_folder
from edgesynth.targets.base import require_finite
from edgesynth.targets.gati.host import known_answer
from edgesynth.targets.gati.plan import CompiledProgram
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
    prog: CompiledProgram,
    out_dir: str | Path | OutputFolder,
    sample: np.ndarray | None = None,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """`write_files` into `out_dir` through the output-folder rules of `edgesynth.outputs`:
    a failure leaves nothing half-done, and nothing else in the folder is touched."""
    folder = (
        out_dir
        if isinstance(out_dir, OutputFolder)
        else output_folder(out_dir, overwrite=overwrite, option="--output")
    )
    with folder as out:
        report, _ = write_files(prog, out.staging, sample)
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


def load_float_npy(path: str | Path, what: str) -> np.ndarray:
    """A float array from `path` (one .npy array); integer data is refused, because the
    compiler takes float inputs and chooses their scale itself."""
    from edgesynth.frontends.npy import load_npy_arrays

    arrays = load_npy_arrays(path, what=what)
    if len(arrays) != 1:
        found = "no array" if not arrays else f"{len(arrays)} arrays"
        raise EdgesynthError(f"{what} must be one .npy array, found {found}.", file=str(path))
    return require_float(arrays[0], what, file=str(path))


def require_float(
    array: np.ndarray, what: str, *, file: str | None = None, key: str | None = None
) -> np.ndarray:
    """Gati's float data (inputs, calibration): integer data is refused, because the compiler
    takes float inputs and chooses their scale itself; NaN and infinity are refused."""
    array = np.asarray(array)
    if array.dtype.kind != "f":
        raise EdgesynthError(
            f"{what} is {array.dtype}, but Gati takes float inputs (float32, as the ONNX "
            "model does) and chooses the input scale itself; save the float data, e.g. "
            "`np.save(path, x.astype(np.float32))`.",
            file=file,
            key=key,
        )
    require_finite(array, what, file=file, key=key)
    return array
