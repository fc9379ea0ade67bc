"""The image memory (IMEM): how big a volume is, where each byte of it lives, and the planner
that gives every tensor an address range for its lifetime.

Volume size (seed; checked on ml-suite's programs): a row takes the image width in bytes
rounded up to a power of two and at least the IMEM width; the depth is made even. So the
224x224x3 input on the 28x32 engine (IMEM width 64) takes 512 x 224 x 4 = 0x70000 bytes.

Layout inside a volume (edgesynth; consistent with the size rule and with ml-suite placing
inception branches back to back): channel pairs are outermost, then rows; one row of a channel
pair is 2 x pitch bytes holding, pixel after pixel, the two channels' 16-bit little-endian
values. A branch with an even channel count therefore ends exactly where the next one starts.

Planner (the rule ml-suite's GoogLeNet programs follow, reproduced address for address by
tests/xdnn/test_imem.py): walk the commands in order; before each command free every tensor
whose last reader has run; place the command's output in the smallest free hole that holds it
(the lowest such hole on a tie), at the hole's low end; a concatenation is placed whole when
its first branch is produced, at the high end of its hole, and each branch writes its part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn.device import Engine, next_pow2

Shape = tuple[int, int, int]  # (C, H, W)


def row_pitch(engine: Engine, width: int) -> int:
    """Bytes of one row of one channel."""
    return max(next_pow2(width * engine.bytes_per_pixel), engine.imem_width)


def even(c: int) -> int:
    return c + (c & 1)


def volume_bytes(engine: Engine, shape: Shape) -> int:
    c, h, w = shape
    return row_pitch(engine, w) * h * even(c)


def channel_offset(engine: Engine, shape: Shape, channel: int) -> int:
    """Byte offset of channel `channel` (even) inside a volume of `shape`."""
    if channel % 2:
        raise ValueError("a channel offset inside a volume must be even")
    _, h, w = shape
    return row_pitch(engine, w) * h * channel


@dataclass
class Step:
    """One command as the planner sees it: the tensors it reads and the one it writes."""

    name: str
    inputs: list[str]
    output: str


@dataclass
class Placement:
    tensor: str
    address: int
    size: int
    first: int  # index of the step that writes it (-1: before the first step)
    last: int  # index of the last step that reads it (len(steps): read after the program)
    region: str = "processing"
    parent: str | None = None  # the concatenation this branch is part of

    @property
    def end(self) -> int:
        return self.address + self.size


@dataclass
class ImemPlan:
    engine: Engine
    placements: dict[str, Placement]
    regions: dict[str, tuple[int, int]]
    peak: int  # highest byte address used + 1
    mode: str
    steps: list[Step] = field(default_factory=list)

    def address(self, tensor: str) -> int:
        return self.placements[tensor].address

    def to_json(self, shapes: Mapping[str, Shape]) -> dict[str, object]:
        return {
            "engine": self.engine.name,
            "imem_bytes": self.engine.imem_bytes,
            "imem_width": self.engine.imem_width,
            "mode": self.mode,
            "peak": self.peak,
            "regions": {k: {"start": hex(a), "end": hex(b)} for k, (a, b) in self.regions.items()},
            "tensors": [
                {
                    "tensor": p.tensor,
                    "shape": list(shapes[p.tensor]),
                    "region": p.region,
                    "start": hex(p.address),
                    "end": hex(p.end),
                    "bytes": p.size,
                    "written_by": self.steps[p.first].name if p.first >= 0 else "(host)",
                    "last_read_by": (
                        self.steps[p.last].name if p.last < len(self.steps) else "(host)"
                    ),
                    "first_step": p.first,
                    "last_step": p.last,
                    **({"part_of": p.parent} if p.parent else {}),
                }
                for p in sorted(self.placements.values(), key=lambda p: (p.first, p.address))
            ],
        }


class _Holes:
    """Free byte ranges of an arena."""

    def __init__(self, lo: int, hi: int) -> None:
        self.holes: list[list[int]] = [[lo, hi]] if hi > lo else []

    def take(self, size: int, high: bool) -> int | None:
        fits = [h for h in self.holes if h[1] - h[0] >= size]
        if not fits:
            return None
        hole = min(fits, key=lambda h: (h[1] - h[0], h[0]))
        start = hole[1] - size if high else hole[0]
        self._remove(start, start + size)
        return start

    def _remove(self, a: int, b: int) -> None:
        out: list[list[int]] = []
        for lo, hi in self.holes:
            if hi <= a or lo >= b:
                out.append([lo, hi])
                continue
            if lo < a:
                out.append([lo, a])
            if b < hi:
                out.append([b, hi])
        self.holes = out

    def give(self, a: int, b: int) -> None:
        self.holes.append([a, b])
        self.holes.sort()
        merged: list[list[int]] = []
        for lo, hi in self.holes:
            if merged and merged[-1][1] >= lo:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self.holes = merged

    @property
    def largest(self) -> int:
        return max((h[1] - h[0] for h in self.holes), default=0)


def plan_imem(
    engine: Engine,
    steps: Sequence[Step],
    shapes: Mapping[str, Shape],
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    concats: Mapping[str, Sequence[str]] | None = None,
    reserve: bool = True,
) -> ImemPlan:
    """Place every tensor. `reserve`: keep the download region (the inputs, at address 0) and
    the upload region (the outputs, at the top) out of the processing region for the whole
    program, as the seed's region map recommends so the next image can be downloaded and the
    previous one uploaded while this one runs; otherwise (ml-suite's GoogLeNet programs) the
    whole IMEM is one arena and the inputs' bytes are reused once read."""
    concats = dict(concats or {})
    size = {t: volume_bytes(engine, s) for t, s in shapes.items()}
    parent: dict[str, str] = {}
    for cat, members in concats.items():
        for m in members:
            if m in parent:
                raise EdgesynthError(f"tensor `{m}` is part of two concatenations")
            parent[m] = cat
    first: dict[str, int] = {t: -1 for t in inputs}
    for i, s in enumerate(steps):
        first[s.output] = i
    last: dict[str, int] = {}
    for i, s in enumerate(steps):
        for t in s.inputs:
            last[t] = i
    end = len(steps)
    for t in outputs:
        last[t] = end
    for cat, members in concats.items():
        last[cat] = max([last.get(cat, -1)] + [last.get(m, -1) for m in members])
        first[cat] = min(first[m] for m in members)
    for t in list(first):
        last.setdefault(t, first[t])

    capacity = engine.imem_bytes
    regions: dict[str, tuple[int, int]] = {}
    placements: dict[str, Placement] = {}
    lo, hi = 0, capacity
    if reserve:
        down = sum(size[t] for t in inputs)
        up = sum(size[t] for t in outputs)
        if down + up > capacity:
            raise EdgesynthError(
                f"the inputs ({down} bytes) and outputs ({up} bytes) alone exceed the "
                f"{engine.name} engine's IMEM ({capacity} bytes)"
            )
        addr = 0
        for t in inputs:
            placements[t] = Placement(t, addr, size[t], -1, last[t], "download")
            addr += size[t]
        lo, hi = down, capacity - up
        addr = hi
        for t in outputs:
            placements[t] = Placement(t, addr, size[t], first[t], end, "upload")
            addr += size[t]
        regions = {"download": (0, down), "processing": (lo, hi), "upload": (hi, capacity)}
    else:
        regions = {"processing": (0, capacity)}
    holes = _Holes(lo, hi)
    live: dict[str, Placement] = {}

    def place(t: str, step: int, high: bool, where: str) -> Placement:
        addr = holes.take(size[t], high)
        if addr is None:
            raise EdgesynthError(
                f"IMEM overflow at `{where}`: tensor `{t}` {'x'.join(map(str, shapes[t]))} needs "
                f"{size[t]} bytes, the largest free range is {holes.largest} bytes of the "
                f"{engine.name} engine's {capacity}"
            )
        p = Placement(t, addr, size[t], first[t], last[t])
        placements[t] = p
        live[t] = p
        return p

    if not reserve:
        for t in inputs:
            place(t, -1, False, "input")
    for i, s in enumerate(steps):
        for t, p in list(live.items()):
            if last[t] < i:
                holes.give(p.address, p.end)
                del live[t]
        t = s.output
        if t in placements:  # an output in the upload region
            continue
        cat = parent.get(t)
        if cat is None:
            place(t, i, False, s.name)
            continue
        if cat not in placements:
            if cat in outputs and reserve:
                raise EdgesynthError(f"concatenation `{cat}` as a program output is not supported")
            place(cat, i, True, s.name)
        base = placements[cat]
        offset = 0
        for m in concats[cat]:
            if m == t:
                break
            offset += size[m]
        placements[t] = Placement(t, base.address + offset, size[t], i, last[t], base.region, cat)
    peak = max((p.end for p in placements.values()), default=0)
    return ImemPlan(
        engine, placements, regions, peak, "reserved" if reserve else "shared", list(steps)
    )


def overlaps(plan: ImemPlan) -> list[tuple[str, str]]:
    """Pairs of tensors alive at the same time whose byte ranges overlap (a branch and its
    concatenation excepted). A tensor written by step i and one last read by step i overlap
    in time: a command never writes over what it reads."""
    ps = [p for p in plan.placements.values()]
    bad: list[tuple[str, str]] = []
    for i, a in enumerate(ps):
        for b in ps[i + 1 :]:
            if a.parent == b.tensor or b.parent == a.tensor:
                continue
            if a.last < b.first or b.last < a.first:
                continue
            if a.address < b.end and b.address < a.end:
                bad.append((a.tensor, b.tensor))
    return bad
