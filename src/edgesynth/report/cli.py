"""`edgesynth report OUT/`: the HTML page of an output folder, written next to its files
(OUT/report.html), or its pictures as files (`--picture`), and the `--report` flag the other
commands share (`write_report`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.cliargs import add_overwrite

if TYPE_CHECKING:
    from edgesynth.report.model import Report
    from edgesynth.targets.base import Program
    from edgesynth.targets.report_model import TargetReport

PAGE = "report.html"


def report_file(folder: Path, name: Path | None) -> Path:
    """The page's path: `name` (-o), else beside the folder's files."""
    return Path(name) if name is not None else Path(folder) / PAGE


def checked_page(folder: Path, *, overwrite: bool, inputs: list) -> Path:
    """`--report` of a command that writes `folder`: FOLDER/report.html, checked by the output
    rules before any work."""
    from edgesynth.outputs import check_output_file

    page = report_file(folder, None)
    return check_output_file(page, overwrite=overwrite, inputs=inputs, option="--report")


def write_report(report: Report, path: Path, *, overwrite: bool, inputs: list) -> Path:
    """Render `report` and write it to `path` (atomically; an existing file only with
    --overwrite)."""
    from edgesynth.outputs import write_file_atomic
    from edgesynth.report.render import render

    for target in report.targets:  # a folder beside the page is named from the page
        folder = Path(target.folder)
        if folder.is_dir() and folder.resolve().is_relative_to(Path(path).resolve().parent):
            target.folder = os.path.relpath(folder.resolve(), Path(path).resolve().parent)
    return write_file_atomic(
        path, render(report), overwrite=overwrite, inputs=inputs, option="--report"
    )


def folder_page(
    folder: Path, path: Path, *, overwrite: bool, inputs: list, results: Report | None = None
) -> Path:
    """`--report` of a command that wrote `folder`: its page at `path`. `results`: what the
    command measured besides the files (the `-t all` table's rows)."""
    from edgesynth.report.collect import folder_report

    report = folder_report(folder)
    if results is not None:
        report.comparison, report.refused = results.comparison, results.refused
        report.validation = results.validation
    return write_report(report, path, overwrite=overwrite, inputs=inputs)


def validation_page(
    program: Program, model: Path, document: str, path: Path, *, overwrite: bool, inputs: list
) -> Path:
    """`validate --report`: the target's page (the compiled folder's, or the program's files
    emitted into a temporary folder) with the validation's metrics (`document`: its JSON)."""
    import json

    from edgesynth.report.collect import validation
    from edgesynth.report.model import Report

    target = _validated_target(program, model)
    report = Report(
        title=f"edgesynth validate: {target.network} on {target.target}",
        targets=[target],
        validation=validation(json.loads(document)),
    )
    return write_report(report, path, overwrite=overwrite, inputs=inputs)


def _validated_target(program: Program, model: Path) -> TargetReport:
    from edgesynth.report.collect import target_report

    if Path(model).is_dir():
        return target_report(Path(model))
    import tempfile

    from edgesynth.targets.base import get_target

    with tempfile.TemporaryDirectory(prefix="edgesynth-report-") as tmp:
        get_target(program.target).emit(program, Path(tmp))
        target = target_report(Path(tmp))
    target.folder = f"(compiled from {model} in memory; no folder written)"
    return target


def _read_files(folder: Path, page: Path) -> list[Path]:
    """The files of the folder the page is drawn from (never an output), less an earlier page
    (which the report does not read)."""
    if not folder.is_dir():
        return []
    earlier = page.resolve() if page.name == PAGE else None
    return [p for p in folder.rglob("*") if p.is_file() and p.resolve() != earlier]


def report_cmd(args: argparse.Namespace) -> int:
    """Read the folder (refusing one no command wrote), render, write OUT/report.html; with
    --picture the pictures instead (and the page too when -o names it)."""
    from edgesynth.outputs import check_output_file
    from edgesynth.report.collect import folder_report

    page = args.picture is None or args.output is not None  # --picture alone: no page
    path = report_file(args.folder, args.output)
    inputs = [args.results, *_read_files(Path(args.folder), path)]
    if page:
        check_output_file(path, overwrite=args.overwrite, inputs=inputs, option="--output")
    report = folder_report(args.folder, args.results)
    if args.picture is not None:
        write_pictures(report, args.picture, overwrite=args.overwrite, inputs=inputs)
    if not page:
        return 0
    written = write_report(report, path, overwrite=args.overwrite, inputs=inputs)
    layers = sum(len(t.layers) for t in report.targets)
    print(
        f"wrote {written}: {len(report.targets)} target(s), {layers} layers; open it in a "
        "browser (it needs no network)"
    )
    return 0


def write_pictures(report: Report, destination: Path, *, overwrite: bool, inputs: list) -> None:
    """`--picture`: every chart of the page as a standalone SVG or PNG file (pictures.py);
    every file checked by the output rules before any is drawn, each written atomically."""
    from edgesynth.errors import EdgesynthError
    from edgesynth.outputs import check_output_file, write_file_atomic
    from edgesynth.report import pictures

    found = pictures.pictures(report)
    if not found:
        raise EdgesynthError(f"--picture: the page of {report.title!r} has no picture to write")
    paths = pictures.files(destination, [p.name for p in found])
    for path in paths:
        check_output_file(path, overwrite=overwrite, inputs=inputs, option="--picture")
    texts = [pictures.svg_text(p) for p in found]
    data: list[str] | list[bytes] = texts
    if paths[0].suffix.lower() == ".png":
        from edgesynth.report.png import to_png

        sizes = [pictures.size(p) for p in found]
        data = to_png([(p.name, t, *wh) for p, t, wh in zip(found, texts, sizes, strict=True)])
    for path, picture, content in zip(paths, found, data, strict=True):
        write_file_atomic(path, content, overwrite=overwrite, inputs=inputs, option="--picture")
        print(f"wrote {path}: {picture.title}")


def picture_path(text: str) -> Path:
    """--picture's argument: a folder (DIR/) or FILE.svg / FILE.png; anything else is a usage
    error."""
    from edgesynth.report.pictures import FORMATS, is_folder

    path = Path(text)
    if is_folder(path) or path.suffix.lower() in FORMATS:
        return path
    raise argparse.ArgumentTypeError(
        f"{text}: a picture is FILE.svg or FILE.png, or a folder DIR/ for SVG files (got the "
        f"suffix {path.suffix!r})"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `report` to the `edgesynth` command line."""
    r = subparsers.add_parser(
        "report",
        help="one self-contained HTML page of a compiled folder (layers, memory, time)",
        description="Read the folder `edgesynth compile` wrote (or `compile -t all`, a folder "
        "per target) and write one HTML page next to its files (OUT/report.html): the layers "
        "(sortable), memory pictures per target, estimated cycles per layer and, with "
        "--results, validation metrics or the targets' agreement. The page is self-contained: "
        "it reads nothing from the network.",
    )
    r.add_argument("folder", type=Path, metavar="OUT", help="a folder compile wrote")
    r.add_argument(
        "--results",
        type=Path,
        metavar="JSON",
        help="the --json of `edgesynth validate` (metrics, confusion matrix, per-layer error) "
        "or of `compile -t all` (agreement per target) to show too",
    )
    r.add_argument(
        "--output", "-o", type=Path, metavar="HTML", help=f"the page (default OUT/{PAGE})"
    )
    r.add_argument(
        "--picture",
        type=picture_path,
        metavar="DIR/|FILE.svg|FILE.png",
        help="write the page's pictures as standalone files for documents instead of the page "
        "(with -o, as well as the page): DIR/ gives DIR/NAME.svg per picture; FILE.svg or "
        "FILE.png gives FILE-NAME.svg (.png) beside FILE (PNG through headless chromium)",
    )
    add_overwrite(r, "the page and the pictures")
    r.set_defaults(handler=report_cmd)
