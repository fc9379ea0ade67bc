"""What `edgesynth validate` prints and writes: the report as text lines, as JSON, and the
progress bar (on a terminal only)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TextIO

from edgesynth.validate.core import LayerResult, OutputResult, Validation
from edgesynth.validate.metrics import JUMP_FLOOR, JUMP_RATIO, ErrorMetrics, format_confusion

JSON_FORMAT = "edgesynth-validate/1"


def _num(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def metrics_line(m: ErrorMetrics) -> str:
    return (
        f"RMSE {_num(m.rmse)}  MAE {_num(m.mae)}  L2 relative {_num(m.l2r)}  "
        f"cosine {_num(m.cosine, 6)}  error mean {_num(m.mean)} std {_num(m.std)}"
    )


def _output_lines(out: OutputResult, samples: int) -> list[str]:
    lines = [f"output `{out.name}` ({out.values} values per sample)"]
    if out.agreement is not None:
        same = round(out.agreement * samples)
        agree = _pct(out.agreement)
        lines.append(f"  top-1 agreement with the float model: {agree} ({same} of {samples})")
    if out.labels is not None:
        lines.append(
            f"  accuracy against the labels: target {_pct(out.accuracy('target'))}, "
            f"float model {_pct(out.accuracy('float'))}"
        )
    if out.metrics is not None:
        lines.append(f"  {metrics_line(out.metrics)}")
    matrix = out.confusion()
    if matrix is not None:
        lines.append(f"  confusion (rows: {out.confusion_rows}, columns: the target's top-1):")
        lines += [f"    {row}" for row in format_confusion(matrix)]
    return lines


def _layer_lines(layers: list[LayerResult], jump: LayerResult | None) -> list[str]:
    width = max(len(lay.tensor) for lay in layers)
    columns = ("RMSE", "MAE", "L2 rel", "cosine", "err mean", "err std")
    head = f"  {'tensor':<{width}}  {'op':<10}" + "".join(f" {c:>10}" for c in columns)
    lines = ["per layer (the float model's tensors against the target's, dequantized):", head]
    for lay in layers:
        m = lay.metrics
        lines.append(
            f"  {lay.tensor:<{width}}  {lay.op:<10} {_num(m.rmse):>10} {_num(m.mae):>10} "
            f"{_num(m.l2r):>10} {_num(m.cosine, 5):>10} {_num(m.mean):>10} {_num(m.std):>10}"
        )
    if jump is None:
        worst = max(layers, key=lambda lay: lay.metrics.l2r or 0.0)
        lines.append(
            f"no layer's error jumps (L2 relative error under {JUMP_FLOOR:g}, or under "
            f"{JUMP_RATIO:g}x the largest before it); the largest: {_num(worst.metrics.l2r)} "
            f"at `{worst.tensor}`"
        )
    else:
        index = layers.index(jump)
        before = max((lay.metrics.l2r or 0.0 for lay in layers[:index]), default=0.0)
        lines.append(
            f"first layer whose error jumps: `{jump.tensor}` ({jump.op}): L2 relative error "
            f"{_num(jump.metrics.l2r)}, {_num(before)} at most before it"
        )
    return lines


def report_lines(result: Validation, sources: dict[str, Any]) -> list[str]:
    against = f"the float model {sources['reference']}" if sources["reference"] else "the labels"
    lines = [
        f"validated {sources['model']} on {result.target}'s bit-exact model against {against}: "
        f"{result.samples} samples from {sources['data']}"
    ]
    lines += [f"note: {note}" for note in result.notes]
    for out in result.outputs:
        lines += _output_lines(out, result.samples)
    if result.layers is not None:
        lines += _layer_lines(result.layers, result.jump)
    return lines


def report_json(result: Validation, sources: dict[str, Any]) -> str:
    jump = result.jump
    document = {
        "format": JSON_FORMAT,
        "target": result.target,
        **sources,
        "samples": result.samples,
        "notes": result.notes,
        "outputs": [out.to_json() for out in result.outputs],
        "layers": None if result.layers is None else [lay.to_json() for lay in result.layers],
        "first_jump": None if jump is None else jump.tensor,
    }
    return _flat_lists(json.dumps(document, indent=1)) + "\n"


def _flat_lists(text: str) -> str:
    """JSON with every innermost list of numbers on one line (the top-1 lists and the
    confusion matrix's rows), not one number a line."""
    return re.sub(
        r"\[[-+.\deEnul,\s]*\]",
        lambda m: re.sub(r"\s+", " ", m.group(0)).replace("[ ", "[").replace(" ]", "]"),
        text,
    )


def progress_bar(stream: TextIO, width: int = 30) -> Callable[[int, int], None] | None:
    """A bar that redraws itself on `stream` while samples run; None when it is no terminal."""
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        filled = width * done // max(total, 1)
        end = "\r" + " " * (width + 40) + "\r" if done >= total else ""
        bar = "#" * filled + "." * (width - filled)
        stream.write(f"\rvalidate [{bar}] {done}/{total}{end}")
        stream.flush()

    return show
