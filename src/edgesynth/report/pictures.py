"""The page's pictures as standalone files for documents (`edgesynth report --picture`): each
chart the page draws, as an SVG of its own (the page's marks and styles, its title above them,
a white background), and as PNG through headless Chromium (`png.py`)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from edgesynth.report import charts
from edgesynth.report.compare import comparison_view
from edgesynth.report.model import Report
from edgesynth.report.render import TEMPLATES, target_view, validation_view

FORMATS = (".svg", ".png")
LINE = 20  # px per line of the title


@dataclass
class Picture:
    name: str  # the file's name without its suffix: "max78000-memory-1"
    title: str
    chart: charts.Chart


def pictures(report: Report) -> list[Picture]:
    """Every chart of `report`'s page, in the page's order, named and titled."""
    found: list[Picture] = []
    comparison = comparison_view(report)
    for key, title in (
        ("memory", "targets side by side: memory"),
        ("latency", "targets side by side: latency"),
        ("agreement", "targets side by side: top-1 agreement with the float model"),
    ):
        if key in comparison:
            found.append(Picture(f"comparison-{key}", title, comparison[key]))
    for t in report.targets:
        view = target_view(t)
        name = view.data.target
        for k, (title, chart, _) in enumerate(view.maps, start=1):
            found.append(Picture(f"{name}-memory-{k}", f"{name}: {title}", chart))
        if view.time is not None:
            title = f"{name}: estimated cycles per layer ({view.total})"
            found.append(Picture(f"{name}-time", title, view.time))
    validation = validation_view(report.validation)
    if "heat" in validation:
        found.append(Picture("validation-confusion", "confusion matrix", validation["heat"]))
    if "line" in validation:
        title = f"error per layer ({validation['line'].ylabel})"
        found.append(Picture("validation-per-layer", title, validation["line"]))
    return found


def _heading(picture: Picture) -> list[str]:
    """The title's lines above the chart (about 8.6 px a character at 15 px, bold)."""
    return textwrap.wrap(picture.title, max(int((picture.chart.width - 24) / 8.6), 20))


def size(picture: Picture) -> tuple[float, float]:
    """The standalone picture's width and height in px: the chart and its title."""
    return picture.chart.width, picture.chart.height + LINE * len(_heading(picture)) + 12


def svg_text(picture: Picture) -> str:
    """The standalone SVG file of `picture`."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    heading = _heading(picture)
    return env.get_template("picture.svg.j2").render(
        c=picture.chart, name=picture.name, title=picture.title, heading=heading,
        top=LINE * len(heading) + 12,
    )  # fmt: skip


def files(destination: Path, names: list[str]) -> list[Path]:
    """Where each picture goes: `DIR/` (a folder) gives DIR/NAME.svg; `FILE.svg` or
    `FILE.png` gives FILE-NAME.svg (or .png) beside it. The caller has checked the suffix."""
    if is_folder(destination):
        return [destination / f"{n}.svg" for n in names]
    stem, suffix = destination.stem, destination.suffix.lower()
    return [destination.with_name(f"{stem}-{n}{suffix}") for n in names]


def is_folder(destination: Path) -> bool:
    text = str(destination)
    return text.endswith(("/", "\\")) or destination.is_dir() or not destination.suffix
