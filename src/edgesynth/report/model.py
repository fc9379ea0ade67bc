"""What a report shows, independent of how it is drawn: per target its layers, its memory
pictures (address maps and per-layer use) and its latency; optionally validation metrics and,
for `compile -t all`, the targets side by side. Targets fill `TargetReport` from the files
their compile wrote (`Target.report_data`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LayerRow:
    """One layer of the network as the target runs it."""

    index: int
    name: str
    operator: str
    in_shape: str  # "1x28x28" (several inputs joined by " + ")
    out_shape: str
    macs: int | None = None
    weight_bytes: int | None = None
    where: str = ""  # the engine or memory it runs in
    cycles: int | None = None


@dataclass
class Region:
    """One rectangle of an address map: `lane` (a memory instance or region), bytes
    [start, end), what it holds and which layer writes (or owns) it."""

    lane: str
    start: int
    end: int
    name: str
    layer: str
    detail: str = ""  # lifetime, tile shape, ...


@dataclass
class AddressMap:
    """A memory drawn as lanes of addresses (x: bytes from the lane's start)."""

    title: str
    lanes: list[str]
    size: int  # bytes each lane spans (the axis' extent)
    regions: list[Region]
    note: str = ""
    # True: every lane on one axis [0, size); False: each lane zoomed to the bytes its regions
    # span (memories whose regions lie far apart, such as xDNN's download and upload regions)
    shared_axis: bool = True
    unit: str = "B"  # what the addresses count: bytes, kernel "words" or "steps" (lifetimes)


@dataclass
class UsageChart:
    """Bytes of each memory in use per layer against its budget (PULP L1/L2/L3)."""

    title: str
    layers: list[str]
    series: dict[str, list[int]]  # memory -> bytes per layer
    budgets: dict[str, int | None]  # memory -> capacity
    details: list[str] = field(default_factory=list)  # per layer (tile shapes)


@dataclass
class TargetReport:
    """Everything the page shows of one compiled target."""

    target: str
    network: str
    folder: str
    layers: list[LayerRow]
    maps: list[AddressMap] = field(default_factory=list)
    usage: list[UsageChart] = field(default_factory=list)
    clock_hz: int | None = None
    total_cycles: int | None = None
    facts: dict[str, str] = field(default_factory=dict)  # memory used etc., as text
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float | None:
        if self.total_cycles is None or not self.clock_hz:
            return None
        return self.total_cycles / self.clock_hz


@dataclass
class Validation:
    """What `edgesynth validate --json` wrote (its `outputs[0]` and `per_layer`)."""

    source: str
    samples: int
    metrics: dict[str, float | None]
    confusion: list[list[int]] | None = None
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
