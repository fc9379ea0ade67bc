"""The geometry of the report's pictures (inline SVG drawn by templates/charts.html.j2):
coordinates, ticks, colours and hover titles computed here, the markup in the templates."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgesynth.targets.report_model import AddressMap, Region, UsageChart

WIDTH = 1180  # px: the page's content at a 1280 px window
LEFT = 210  # px for the lane and bar labels
RIGHT = 40  # room for the last tick's label
PLOT = WIDTH - LEFT - RIGHT
# distinct colours (a qualitative palette); a tensor keeps its colour in every lane
PALETTE = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#2f3e5c", "#a0cbe8",
]  # fmt: skip


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    title: str
    label: str = ""
    ink: str = "#fff"  # the label's colour


@dataclass
class Tick:
    pos: float
    text: str


@dataclass
class Chart:
    """One SVG: its size, rectangles, lines, texts, ticks and legend."""

    height: float
    rects: list[Rect] = field(default_factory=list)
    texts: list[tuple[float, float, str, str]] = field(default_factory=list)  # x, y, text, anchor
    xticks: list[Tick] = field(default_factory=list)
    yticks: list[Tick] = field(default_factory=list)
    xlabel: str = ""
    ylabel: str = ""
    ylabel_x: float = 16  # the rotated axis label's centre line
    legend: list[tuple[str, str]] = field(default_factory=list)  # colour, text
    polyline: str = ""  # "x,y x,y ..." for a line chart
    points: list[Rect] = field(default_factory=list)  # markers on the line, with titles
    plot_top: float = 30
    plot_bottom: float = 0
    width: float = WIDTH
    left: float = LEFT  # where the plot starts (the labels end)
    bands: list[tuple[float, float]] = field(default_factory=list)  # shaded rows: y, height
    xlabel_y: float = 0  # the axis label's baseline (set by `finish`)
    keys: list[tuple[float, float, str, str]] = field(default_factory=list)  # legend: x, y, ...
    caption: str = ""  # a line under the axis label, in place of a legend


CHAR = 7.2  # px: the mean width of a character at the pictures' 12 px font
KEY_ROW = 18.0  # px: one row of the legend


def finish(chart: Chart) -> Chart:
    """Place the axis label at the foot of the plot and the legend (swatch and text per
    series, in rows as wide as the picture) below it; grow the picture to hold them."""
    chart.xlabel_y = chart.height - 8
    x, y = chart.left, chart.height + 6
    if chart.caption:
        chart.keys.append((x, y, "", chart.caption))
    for colour, text in chart.legend:
        width = 12 + 5 + CHAR * len(text) + 18
        if x > chart.left and x + width > chart.width - RIGHT:
            x, y = chart.left, y + KEY_ROW
        chart.keys.append((x, y, colour, text))
        x += width
    if chart.keys:
        chart.height = y + KEY_ROW + 4
    return chart


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """0 and round steps up to at least `high`."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1.0
    while magnitude > raw:
        magnitude /= 10
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks, value = [0.0], 0.0
    while value < high:
        value += step
        ticks.append(value)
    return ticks


def byte_ticks(high: float) -> list[float]:
    """Round steps of bytes: in KiB (or MiB) once the range passes one."""
    for scale in (1024 * 1024, 1024):
        if high >= 2 * scale:
            return [t * scale for t in nice_ticks(high / scale)]
    return nice_ticks(high)


def size_text(n: float, unit: str = "B") -> str:
    if unit != "B":
        return f"{n:,.0f}"
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n:,.0f} B"


def ink(fill: str) -> str:
    """The colour of a label inside a rectangle of colour `fill` ("#rrggbb"): dark on light
    fills (yellow, light grey, light blue), white on the others."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#222" if 0.299 * r + 0.587 * g + 0.114 * b > 170 else "#fff"


def short(label: str, chars: int) -> str:
    """`label` cut to `chars` characters, an ellipsis marking the cut."""
    return label if len(label) <= chars else label[: chars - 1] + "\u2026"


def colours(names: list[str]) -> dict[str, str]:
    """Each distinct name its colour, in order of appearance."""
    distinct = list(dict.fromkeys(names))
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(distinct)}


def address_map(m: AddressMap) -> Chart:
    """Lanes of addresses, each region a rectangle titled with what it holds. Regions of one
    lane that share addresses (at different times) take rows of their own in the lane."""
    rows = _rows(m)
    count = {lane: max([rows[i] for i, r in enumerate(m.regions) if r.lane == lane] + [0]) + 1
             for lane in m.lanes}  # fmt: skip
    total = sum(count.values())
    row_h = 18.0 if total <= 24 else 12.0 if total <= 64 else 8.0
    top = 12.0
    first, y = {}, top
    for lane in m.lanes:
        first[lane], y = y, y + row_h * count[lane]
    chart = Chart(height=y + 48, plot_top=top, plot_bottom=y)
    for i, lane in enumerate(m.lanes):  # every other lane shaded: which rows are one lane's
        if i % 2 == 0:
            chart.bands.append((first[lane], row_h * count[lane]))
    fill = colours([r.name for r in m.regions])
    spans = _lane_spans(m)
    for i, r in enumerate(m.regions):
        lo, hi = spans[r.lane]
        x = LEFT + PLOT * (r.start - lo) / max(hi - lo, 1)
        w = max(PLOT * (r.end - r.start) / max(hi - lo, 1), 1.5)
        label = r.name if w > 7 * len(r.name) and row_h >= 12 else ""  # 10 px text fits
        top_y = first[r.lane] + row_h * rows[i] + 1
        colour = fill[r.name]
        chart.rects.append(Rect(x, top_y, w, row_h - 2, colour, _title(m, r), label, ink(colour)))
    every = 1 if row_h >= 14 else 4
    for i, lane in enumerate(m.lanes):
        if i % every == 0 or count[lane] > 1:
            text = lane if m.shared_axis else f"{lane} ({_hex(spans[lane])})"
            chart.texts.append((LEFT - 6, first[lane] + row_h * 0.7, text, "end"))
    _address_axis(chart, m)
    if len(fill) <= len(PALETTE):
        chart.legend = [(c, n) for n, c in fill.items()]
    else:  # colours repeat: a legend would name several tensors by one colour
        chart.caption = (
            f"{len(fill)} tensors; their colours repeat every {len(PALETTE)}: hover a rectangle "
            "for its tensor and layer"
        )
    return finish(chart)


def _title(m: AddressMap, r: Region) -> str:
    unit = m.unit if m.unit != "B" else "bytes"
    title = f"{r.name} | {r.layer}"
    if m.unit != "steps":
        title += f" | {r.lane}: {unit} {r.start:,} to {r.end - 1:,}"
    return title + (f" | {r.detail}" if r.detail else "")


def _rows(m: AddressMap) -> list[int]:
    """Each region's row within its lane: the first row where it overlaps no region before."""
    ends: dict[str, list[int]] = {}  # lane -> the end of the last region in each row
    rows = [0] * len(m.regions)
    for i in sorted(range(len(m.regions)), key=lambda i: m.regions[i].start):
        r = m.regions[i]
        lane = ends.setdefault(r.lane, [])
        row = next((k for k, end in enumerate(lane) if end <= r.start), len(lane))
        if row == len(lane):
            lane.append(r.end)
        lane[row] = r.end
        rows[i] = row
    return rows


def _hex(span: tuple[int, int]) -> str:
    return f"0x{span[0]:x}-0x{span[1]:x}"


def _lane_spans(m: AddressMap) -> dict[str, tuple[int, int]]:
    if m.shared_axis:
        return {lane: (0, m.size) for lane in m.lanes}
    spans = {}
    for lane in m.lanes:
        mine = [r for r in m.regions if r.lane == lane]
        spans[lane] = (min(r.start for r in mine), max(r.end for r in mine)) if mine else (0, 1)
    return spans


def _address_axis(chart: Chart, m: AddressMap) -> None:
    unit = "words" if m.unit != "B" else "bytes"
    if not m.shared_axis:
        chart.xlabel = f"address within each lane's used span ({unit}; the span is in the label)"
        fractions = (0, 0.25, 0.5, 0.75, 1)
        chart.xticks = [Tick(LEFT + PLOT * f, f"{round(f * 100)}%") for f in fractions]
        return
    chart.xlabel = f"address in the lane ({unit})" if m.unit != "steps" else "step (layer)"
    ticks = byte_ticks(m.size) if m.unit == "B" else nice_ticks(m.size)
    ticks = [t for t in ticks if t <= m.size]
    if len(ticks) > 1 and m.size - ticks[-1] < 0.1 * m.size:
        ticks.pop()  # too close to the end's own tick
    ticks.append(float(m.size))
    chart.xticks = [Tick(LEFT + PLOT * t / m.size, size_text(t, m.unit)) for t in ticks]


def bars(labels: list[str], series: dict[str, list[float]], xlabel: str, fmt=size_text) -> Chart:
    """Horizontal bars: one group per label, one bar per series."""
    groups = len(series)
    bar_h = 14.0
    group_h = bar_h * groups + 8
    top = 10.0
    chart = Chart(height=top + group_h * len(labels) + 50, plot_top=top)
    chart.plot_bottom = top + group_h * len(labels)
    high = max([v for values in series.values() for v in values] + [0])
    ticks = byte_ticks(high) if fmt is size_text else nice_ticks(high)
    scale = PLOT / (ticks[-1] or 1)
    fill = colours(list(series))
    for i, label in enumerate(labels):
        y0 = top + group_h * i + 4
        chart.texts.append((LEFT - 6, y0 + group_h / 2, short(label, 26), "end"))
        for j, (name, values) in enumerate(series.items()):
            v = values[i]
            title = f"{label}: {name} {fmt(v)}"
            chart.rects.append(
                Rect(LEFT, y0 + bar_h * j, max(v * scale, 1.0), bar_h - 2, fill[name], title)
            )
    chart.xticks = [Tick(LEFT + t * scale, fmt(t)) for t in ticks]
    chart.xlabel = xlabel
    chart.legend = [(c, n) for n, c in fill.items()] if groups > 1 else []
    return finish(chart)


def usage(u: UsageChart) -> Chart:
    legend = {
        name: name + (f" (budget {size_text(b)})" if (b := u.budgets.get(name)) else "")
        for name in u.series
    }
    series = {legend[k]: [float(v) for v in vs] for k, vs in u.series.items()}
    chart = bars(u.layers, series, "bytes in use during the layer")
    for rect, detail in zip(chart.rects[:: len(series)], u.details, strict=False):
        rect.title += f" | {detail}"
    return chart


def line(labels: list[str], values: list[float], ylabel: str) -> Chart:
    """A line over the layers (x: layer, y: value), each point titled."""
    top, height = 20.0, 260.0
    chart = Chart(height=top + height + 110, plot_top=top, plot_bottom=top + height)
    ticks = nice_ticks(max([*values, 0]))
    scale = height / (ticks[-1] or 1)
    step = (PLOT - 50) / max(len(values) - 1, 1)  # room for the last label
    pts = []
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        x, y = LEFT + step * i, top + height - v * scale
        pts.append(f"{x:.1f},{y:.1f}")
        chart.points.append(Rect(x - 4, y - 4, 8, 8, PALETTE[2], f"{label}: {v:.4g}"))
        if len(values) <= 30 or i % max(len(values) // 30, 1) == 0:
            chart.texts.append((x, top + height + 14, short(label, 14), "rot"))
    chart.polyline = " ".join(pts)
    chart.yticks = [Tick(top + height - t * scale, f"{t:.3g}") for t in ticks]
    chart.ylabel, chart.ylabel_x = ylabel, LEFT - 60
    chart.xlabel = "layer (tensor both graphs name)"
    return finish(chart)


def heat(matrix: list[list[int]], labels: list[str], rows: str) -> Chart:
    """The confusion matrix: rows `rows` (the label, or the float model's class), columns the
    target's top-1 class."""
    n = len(matrix)
    cell = min(40.0, 560.0 / max(n, 1))
    top, left = 30.0, 70.0
    chart = Chart(height=top + cell * n + 60, plot_top=top, plot_bottom=top + cell * n)
    chart.width, chart.left = left + cell * n + 40, left
    high = max([v for row in matrix for v in row] + [1])
    for i, row in enumerate(matrix):
        chart.texts.append((left - 6, top + cell * (i + 0.65), labels[i], "end"))
        for j, v in enumerate(row):
            shade = int(240 - 200 * v / high)
            fill = f"rgb({shade},{min(shade + 10, 245)},255)"
            title = f"{rows} {labels[i]}, the target's {labels[j]}: {v} samples"
            ink = "#fff" if shade < 150 else "#333"
            x, y = left + cell * j, top + cell * i
            chart.rects.append(Rect(x, y, cell - 1, cell - 1, fill, title, str(v), ink))
    chart.xticks = [Tick(left + cell * (j + 0.5), labels[j]) for j in range(n)]
    chart.xlabel = "target's top-1 class"
    chart.ylabel = rows
    return finish(chart)
