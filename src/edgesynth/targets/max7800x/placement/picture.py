"""`edgesynth plan --picture`: the data-memory and kernel-memory maps drawn with matplotlib.

Left: data memory, one lane per memory instance in use; addresses run along each lane and time
runs down within it (from the input load to the host's read), so a tensor is a box over its byte
range, from the step it is written to the step it is last read, in every instance that holds it
(a box a few bytes wide is drawn a few pixels wide, so that it can be seen).
Right: kernel memory, one box per layer over its processors (x) and columns (y). Each tensor has
its own colour, and a layer's kernels take the colour of the tensor the layer writes; the legend
names each tensor, its processors, the layer that writes it and the last one that reads it. A
label that does not fit its box is left out (the legend names every colour).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.outputs import write_file_atomic
from edgesynth.targets.max7800x.placement import Placement
from edgesynth.targets.max7800x.placement.report import (
    TensorPlace,
    label,
    processor_range,
    tensors,
)
from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.rules import ffs, fls, memory_instances

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    from matplotlib.text import Text

FONT = {"font.size": 10, "axes.titlesize": 12, "axes.labelsize": 10, "legend.fontsize": 9.5}
LANE_GAP = 0.05  # the part of a lane's height left empty above and below its boxes
MIN_WIDTH = 0.004  # the narrowest box drawn, a part of the address axis, so that none vanishes
DPI = 120


@dataclass
class Drawn:
    """What the data-memory panel shows: the instances in lane order and each tensor's colour."""

    lanes: list[int]
    tensors: list[TensorPlace]
    colors: list[tuple[float, float, float, float]]
    labels: list[tuple[Text, Rectangle]]  # each box label and the box it must fit in


def instances_of(pmap: int, shared: int) -> set[int]:
    """The memory instances that hold the processors of `pmap`."""
    bits = memory_instances(pmap, shared)
    return {i for i in range(bits.bit_length()) if bits >> i & 1}


def palette(count: int) -> list[tuple[float, float, float, float]]:
    """`count` colours: matplotlib's ten qualitative ones, then ten lighter ones, repeated."""
    import matplotlib.pyplot as plt

    tab10, tab20 = plt.get_cmap("tab10"), plt.get_cmap("tab20")
    colors = [tab10(i) for i in range(10)] + [tab20(2 * i + 1) for i in range(10)]
    return [colors[n % len(colors)] for n in range(count)]


def short_name(t: TensorPlace) -> str:
    """The box label: `input` or the writing layer's number (`L3`); the legend says the rest."""
    if t.written_by.startswith("layer "):
        return "L" + t.written_by.split()[1]
    return t.names[0].split()[0]


def legend_text(t: TensorPlace) -> str:
    return (
        f"{' + '.join(t.names)}: P{processor_range(t.processors)}, steps {t.born}-{t.dies}: "
        f"written by {t.written_by}, last read by {t.last_reader}"
    )


def figure(placement: Placement, plan: Plan) -> Figure:
    """The two panels and the legend, laid out and with every label that does not fit removed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(FONT):
        count = len(placement.problem.blocks)
        columns = 1 if count <= 8 else 2
        rows = -(-count // columns)
        fig = plt.figure(figsize=(13, 6.5 + 0.25 * rows), dpi=DPI, layout="constrained")
        data_ax, kernel_ax = fig.subplots(1, 2, width_ratios=[3, 2])
        drawn = _data_panel(data_ax, placement)
        _kernel_panel(kernel_ax, plan, drawn)
        handles = [
            plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="black") for c in drawn.colors
        ]
        fig.legend(
            handles,
            [legend_text(t) for t in drawn.tensors],
            loc="outside lower center",
            ncol=columns,
            title="tensors in data memory (kernels: the colour of the tensor the layer writes)",
            frameon=False,
        )
        fig.canvas.draw()
        _drop_labels_that_do_not_fit(fig, drawn.labels)
    return fig


def _data_panel(ax: Axes, placement: Placement) -> Drawn:
    import matplotlib.pyplot as plt

    problem = placement.problem
    places = tensors(placement)
    colors = palette(len(places))
    held = [instances_of(t.processors, problem.shared) for t in places]
    lanes = sorted(set().union(*held)) if held else []
    row = {instance: n for n, instance in enumerate(lanes)}
    labels: list[tuple[Text, Rectangle]] = []
    span = problem.steps + 1  # steps 0..steps, then the host's read

    def y(lane: int, step: int) -> float:
        return lane + LANE_GAP + (1 - 2 * LANE_GAP) * step / span

    top_byte = max((t.end_byte for t in places), default=1)
    end = min(problem.device.instance_bytes, int(top_byte * 1.1) + 4)
    for t, color, where in zip(places, colors, held, strict=True):
        for instance in sorted(where):
            top, bottom = y(row[instance], t.born), y(row[instance], t.dies + 1)
            box = plt.Rectangle(
                (t.first_byte, top),
                max(t.end_byte - t.first_byte, MIN_WIDTH * end),
                bottom - top,
                facecolor=color,
                edgecolor="black",
                linewidth=0.6,
            )
            ax.add_patch(box)
            if instance == min(where):  # one label per tensor, in its first lane
                text = ax.text(
                    t.first_byte + (t.end_byte - t.first_byte) / 2,
                    (top + bottom) / 2,
                    short_name(t),
                    ha="center",
                    va="center",
                    fontsize=9,
                )
                labels.append((text, box))
    for n in range(1, len(lanes)):
        ax.axhline(n, color="0.8", linewidth=0.6)
    ax.set_xlim(0, end)
    ax.set_ylim(len(lanes), 0)  # the first instance on top, time running down each lane
    ax.set_yticks(
        [n + 0.5 for n in range(len(lanes))],
        [_lane_name(i, problem.shared) for i in lanes],
    )
    ax.tick_params(axis="y", length=0)
    ax.xaxis.set_major_locator(plt.MultipleLocator(_tick_step(ax.get_xlim()[1])))
    ax.xaxis.set_major_formatter(lambda value, _: f"0x{int(value):04x}")
    ax.set_xlabel(
        f"byte address within the instance ({problem.device.instance_bytes:,} bytes each)"
    )
    ax.set_ylabel(
        "memory instance (processors)\n"
        f"time runs down each lane: step 0 (input load) to {problem.steps} (host read)"
    )
    ax.set_title(f"data memory: {len(lanes)} of {problem.instances} instances in use")
    return Drawn(lanes, places, colors, labels)


def _tick_step(end: float, ticks: int = 6) -> int:
    """A power of two that puts about `ticks` address ticks on the axis."""
    step = 1
    while end / step > ticks:
        step *= 2
    return step


def _lane_name(instance: int, shared: int) -> str:
    first = instance * shared
    return f"{instance} (P{first}-{first + shared - 1})"


def _kernel_panel(ax: Axes, plan: Plan, drawn: Drawn) -> None:
    import matplotlib.pyplot as plt

    s = plan.settings
    color_of = {t.written_by: c for t, c in zip(drawn.tensors, drawn.colors, strict=True)}
    used = 0
    for h in s.hw:
        layout = s.kernels.layouts.get(h.index)
        if layout is None or not layout.length:
            continue
        low, high = ffs(h.processor_map), fls(h.processor_map)
        name = label(h.layer)
        box = plt.Rectangle(
            (low, layout.offset),
            high + 1 - low,
            layout.length,
            facecolor=color_of.get(name, "0.7"),
            edgecolor="black",
            linewidth=0.6,
        )
        ax.add_patch(box)
        text = ax.text(
            (low + high + 1) / 2,
            layout.offset + layout.length / 2,
            name,
            ha="center",
            va="center",
            fontsize=9,
        )
        drawn.labels.append((text, box))
        used = max(used, layout.offset + layout.length)
    total = s.chip.regs.mask_width_large
    ax.set_xlim(0, s.chip.max_proc)
    ax.set_ylim(0, min(total, max(16, int(used * 1.15))))
    ax.set_xlabel("processor")
    ax.set_ylabel(f"kernel memory column (72-bit words; {total:,} per processor)")
    ax.set_title(f"kernel memory: columns 0-{used - 1} in use" if used else "kernel memory")


def _drop_labels_that_do_not_fit(fig: Figure, labels: list[tuple[Text, Rectangle]]) -> None:
    """Hide each box label wider or taller than its box, or overlapping an earlier label."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    kept = []
    for text, box in labels:
        extent = text.get_window_extent(renderer)
        inside = box.get_window_extent(renderer)
        fits = (
            extent.width <= inside.width - 2
            and extent.height <= inside.height - 2
            and not any(extent.overlaps(other) for other in kept)
        )
        text.set_visible(fits)
        if fits:
            kept.append(extent)


def draw(placement: Placement, plan: Plan, path: Path, *, overwrite: bool = False) -> Path:
    import matplotlib.pyplot as plt

    fig = figure(placement, plan)
    fmt = path.suffix.lower().lstrip(".")

    def writer(handle) -> None:
        fig.savefig(handle, format=fmt, dpi=DPI)

    try:
        return write_file_atomic(path, writer=writer, overwrite=overwrite, option="--picture")
    finally:
        plt.close(fig)
