"""A `Report` from an output folder: one `compile` wrote (compiled.json: its target reads its
files back, `Target.report_data`) or `compile -t all` wrote (a folder per target); validation
results from `edgesynth validate --json` or the `-t all` table's `--json`. A folder no command
wrote is one message, before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError
from edgesynth.report.model import Report, Validation
from edgesynth.targets.base import MANIFEST
from edgesynth.targets.report_model import TargetReport, read_json


def target_report(folder: Path) -> TargetReport:
    """One compiled folder's report, through its target."""
    from edgesynth.targets.base import get_target, read_manifest

    manifest = read_manifest(folder)
    return get_target(str(manifest["target"])).report_data(Path(folder), manifest)


def compiled_folders(folder: Path) -> list[Path]:
    """The folders of `folder` a compile wrote: itself, or its sub-folders (`-t all`)."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "a file" if folder.exists() else "not there"
        raise EdgesynthError(
            f"{folder} is {what}; give the output folder of `edgesynth compile` "
            "(or of `compile -t all`)"
        )
    if (folder / MANIFEST).is_file():
        return [folder]
    found = sorted(p.parent for p in folder.glob(f"*/{MANIFEST}"))
    if not found:
        raise EdgesynthError(
            f"{folder} is not an output folder of edgesynth compile: it has no {MANIFEST}, nor "
            f"has any folder in it; make one with `edgesynth compile MODEL -t NAME -o {folder}` "
            "(`synth` and `plan` write their page with --report)"
        )
    return found


def folder_report(folder: Path, results: Path | None = None) -> Report:
    """The report of an output folder, with `results` (a validate or `-t all` JSON) if given."""
    folders = compiled_folders(folder)
    targets = [target_report(f) for f in folders]
    network = targets[0].network
    several = not (Path(folder) / MANIFEST).is_file()
    title = f"edgesynth report: {network} on {', '.join(t.target for t in targets)}"
    report = Report(title=title, targets=targets)
    if several:
        report.comparison = [_row_from_files(t) for t in targets]
    if results is not None:
        _add_results(report, results)
    return report


def _row_from_files(t: TargetReport) -> dict[str, Any]:
    """A comparison row from the target's files alone (the layers' MACs and weight bytes, the
    cycles); `--results` with the `-t all` table gives the memory and agreement as printed."""
    weights = sum(lay.weight_bytes or 0 for lay in t.layers)
    macs = sum(lay.macs or 0 for lay in t.layers)
    return {
        "target": t.target,
        "compiled": True,
        "macs": macs,
        "weights": {"bytes": weights, "capacity": None, "memory": ""},
        "activations": {"bytes": None},
        "cycles": t.total_cycles,
        "seconds": t.seconds,
        "top1_agreement": None,
    }


def _add_results(report: Report, path: Path) -> None:
    """`--results`: a `validate --json` document (its `outputs`) or a `compile -t all
    --json` table (its `targets`)."""
    if not Path(path).is_file():
        raise EdgesynthError("no such file", file=str(path), key="--results")
    document = read_json(Path(path).parent, Path(path).name)
    if isinstance(document, dict) and isinstance(document.get("outputs"), list):
        report.validation = validation(document)
    elif isinstance(document, dict) and isinstance(document.get("targets"), list):
        report.comparison = list(document["targets"])
        report.refused = {
            r["target"]: r["error"] for r in document["targets"] if not r.get("compiled")
        }
    else:
        raise EdgesynthError(
            "not a result edgesynth wrote: give the --json of `edgesynth validate` (with "
            "`outputs`) or of `compile -t all` (with `targets`)",
            file=str(path),
            key="--results",
        )


def validation(document: dict[str, Any]) -> Validation:
    """What the page shows of a validate --json document (its first output)."""
    out = document["outputs"][0]
    metrics: dict[str, Any] = {
        "top-1 agreement": out.get("top1_agreement"),
        "accuracy (target)": (out.get("accuracy") or {}).get("target"),
        "accuracy (float)": (out.get("accuracy") or {}).get("float"),
        **(out.get("metrics") or {}),
    }
    layers = [lay for lay in document.get("layers") or [] if lay.get("l2r") is not None]
    confusion = out.get("confusion") or {}
    return Validation(
        source=str(document.get("data")),
        samples=int(document.get("samples", 0)),
        metrics=metrics,
        confusion=confusion.get("matrix"),
        confusion_rows=str(confusion.get("rows") or "labels"),
        per_layer=[(str(lay["tensor"]), float(lay["l2r"])) for lay in layers],
        per_layer_metric="L2 relative error",
        first_bad=document.get("first_jump"),
    )
