"""The page `edgesynth report` writes: one or several targets (`TargetReport`, which each
target fills: `edgesynth.targets.report_model`), and what was measured: validation metrics
(`edgesynth validate --json`) or, for `compile -t all`, the targets side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgesynth.targets.report_model import TargetReport


@dataclass
class Validation:
    """What `edgesynth validate --json` wrote (its `outputs[0]` and `per_layer`)."""

    source: str
    samples: int
    metrics: dict[str, float | None]
    confusion: list[list[int]] | None = None
    confusion_rows: str = "labels"  # what the rows count: "labels" or "float model"
    per_layer: list[tuple[str, float]] = field(default_factory=list)  # (tensor, metric)
    per_layer_metric: str = ""
    first_bad: str | None = None


@dataclass
class Report:
    """The page: one or several targets, and what was measured."""

    title: str
    targets: list[TargetReport]
    validation: Validation | None = None
    comparison: list[dict[str, Any]] = field(default_factory=list)  # `compile -t all` rows
    refused: dict[str, str] = field(default_factory=dict)  # target -> the rule it breaks
