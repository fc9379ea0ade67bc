"""The page: a `Report` rendered through templates/report.html.j2 into one self-contained HTML
file (inline CSS, inline SVG, a few lines of inline JavaScript to sort the tables; nothing
fetched)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgesynth.report import charts
from edgesynth.report.model import Report, Validation
from edgesynth.targets.report_model import TargetReport

TEMPLATES = Path(__file__).resolve().parent / "templates"


@dataclass
class TargetView:
    data: TargetReport
    maps: list[tuple[str, charts.Chart, str]] = field(default_factory=list)
    time: charts.Chart | None = None
    total: str = ""


def _count(n: float) -> str:
    return f"{n:,.0f}"


def total_text(t: TargetReport) -> str:
    if t.total_cycles is None:
        return ""
    text = f"total {t.total_cycles:,} estimated cycles"
    if t.seconds is not None and t.clock_hz:
        text += f" = {1000 * t.seconds:.3f} ms at {t.clock_hz / 1e6:g} MHz"
    return text


def target_view(t: TargetReport) -> TargetView:
    view = TargetView(t, total=total_text(t))
    view.maps = [(m.title, charts.address_map(m), m.note) for m in t.maps]
    view.maps += [(u.title, charts.usage(u), "") for u in t.usage]
    timed = [lay for lay in t.layers if lay.cycles is not None]
    if timed:
        labels = [f"{lay.index}: {lay.name}" for lay in timed]
        view.time = charts.bars(
            labels,
            {"cycles": [float(lay.cycles or 0) for lay in timed]},
            "estimated cycles per layer",
            fmt=_count,
        )
    return view


def validation_view(v: Validation | None) -> dict[str, Any]:
    if v is None:
        return {}
    view: dict[str, Any] = {}
    if v.confusion:
        rows = "the label" if v.confusion_rows == "labels" else "the float model's top-1 class"
        labels = [str(i) for i in range(len(v.confusion))]
        view["heat"] = charts.heat(v.confusion, labels, rows)
    if v.per_layer:
        names = [name for name, _ in v.per_layer]
        view["line"] = charts.line(names, [value for _, value in v.per_layer], v.per_layer_metric)
    return view


def render(report: Report) -> str:
    """The HTML page of `report`."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    from edgesynth.report.compare import comparison_view

    return env.get_template("report.html.j2").render(
        report=report,
        targets=[target_view(t) for t in report.targets],
        validation=validation_view(report.validation),
        comparison=comparison_view(report),
    )
