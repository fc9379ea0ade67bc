"""What `edgesynth report` shows of one compiled target, filled by the target itself
(`Target.report_data`, from the files its compile wrote): its layers, its memory pictures
(address maps and per-layer use) and its latency; and the helpers that read those files. The
page (`edgesynth.report`) draws it; this module depends on nothing of edgesynth but its errors,
so every target may fill it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError


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


# -- reading the files a compile wrote ----------------------------------------------------


def read_json(folder: Path, name: str) -> Any:
    """`folder/name` parsed; a missing or broken file is one message naming it."""
    path = Path(folder) / name
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise EdgesynthError(
            f"{folder} has no {name}, which the compiler writes there; compile again to make "
            "a report of it",
            file=str(path),
        ) from None
    except (OSError, ValueError) as err:
        raise EdgesynthError(f"cannot read it: {err}", file=str(path)) from None


def shape_text(shape: Iterable[int]) -> str:
    """(1, 28, 28) -> "1x28x28"."""
    return "x".join(str(int(d)) for d in shape)


def shapes_text(shapes: Iterable[Iterable[int]]) -> str:
    """Several inputs: "8x14x14 + 8x14x14"."""
    return " + ".join(shape_text(s) for s in shapes)
