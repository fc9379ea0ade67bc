"""`compile -t all` on the page: the targets side by side (memory, latency, agreement), from
the targets' reports and the rows the table gave (`Report.comparison`)."""

from __future__ import annotations

from typing import Any

from edgesynth.report import charts
from edgesynth.report.model import Report


def _cell(text: str, value: float | None = None) -> dict[str, Any]:
    return {"text": text, "v": value}


def _number(value: Any, fmt: str = "{:,}") -> dict[str, Any]:
    return _cell("-", None) if value is None else _cell(fmt.format(value), float(value))


def _memory(m: dict[str, Any]) -> dict[str, Any]:
    used, cap, name = m.get("bytes"), m.get("capacity"), m.get("memory") or ""
    if used is None:
        return _cell("-")
    text = f"{charts.size_text(used)} {name}".strip()
    if cap:
        text = (
            f"{charts.size_text(used)} of {charts.size_text(cap)} {name} ({100 * used / cap:.1f}%)"
        )
    return _cell(text, float(used))


def _percent(value: float | None) -> dict[str, Any]:
    return _cell("-") if value is None else _cell(f"{100 * value:.1f}%", 100 * value)


HEAD = ["target", "MACs", "weights", "activations", "cycles", "time (ms)", "top-1 agreement"]


def comparison_view(report: Report) -> dict[str, Any]:
    rows = [r for r in report.comparison if r.get("compiled")]
    if not rows:
        return {}
    table = []
    for r in rows:
        seconds = r.get("seconds")
        table.append(
            [
                _cell(r["target"]),
                _number(r.get("macs")),
                _memory(r.get("weights", {})),
                _memory(r.get("activations", {})),
                _number(r.get("cycles")),
                _number(None if seconds is None else 1000 * seconds, "{:.3f}"),
                _percent(r.get("top1_agreement")),
            ]
        )
    names = [r["target"] for r in rows]
    memory = charts.bars(
        names,
        {
            "weights": [float(r.get("weights", {}).get("bytes") or 0) for r in rows],
            "activations": [float(r.get("activations", {}).get("bytes") or 0) for r in rows],
        },
        "bytes (weights: where they live; activations: the memory the tensors take)",
    )
    view: dict[str, Any] = {"head": HEAD, "rows": table, "memory": memory}
    timed = [r for r in rows if r.get("seconds") is not None]
    if timed:
        view["latency"] = charts.bars(
            [r["target"] for r in timed],
            {"ms": [1000 * float(r["seconds"]) for r in timed]},
            "estimated latency (ms at each chip's nominal clock)",
            fmt=lambda v: f"{v:.3f} ms",
        )
        missing = [r["target"] for r in rows if r.get("seconds") is None]
        view["latency_note"] = f"no estimate at a clock for {', '.join(missing)}" if missing else ""
    measured = [r for r in rows if r.get("top1_agreement") is not None]
    if measured:
        view["agreement"] = charts.bars(
            [r["target"] for r in measured],
            {"agreement": [100 * float(r["top1_agreement"]) for r in measured]},
            "top-1 agreement with the float model (%)",
            fmt=lambda v: f"{v:.1f}%",
        )
    return view
