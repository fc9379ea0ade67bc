"""`edgesynth plan --picture`: the data-memory and kernel-memory maps drawn with matplotlib.

Left: data memory, one box per tensor from the step it is written to the step it is last read
(x) over its byte range within each memory instance (y), labelled with the processors holding
it. Right: kernel memory, one box per layer over its processors (x) and columns (y).
"""

from __future__ import annotations

from pathlib import Path

from edgesynth.outputs import write_file_atomic
from edgesynth.targets.max7800x.placement import Placement
from edgesynth.targets.max7800x.placement.report import label, processor_range, tensors
from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.rules import ffs, fls


def draw(placement: Placement, plan: Plan, path: Path, *, overwrite: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (data_ax, kernel_ax) = plt.subplots(1, 2, figsize=(14, 6))
    colors = plt.get_cmap("tab20")
    for n, t in enumerate(tensors(placement)):
        width = t.dies + 1 - t.born
        data_ax.add_patch(
            plt.Rectangle(
                (t.born, t.first_byte),
                width,
                t.end_byte - t.first_byte,
                facecolor=colors(n % 20),
                edgecolor="black",
                alpha=0.8,
            )
        )
        data_ax.text(
            t.born + width / 2,
            (t.first_byte + t.end_byte) / 2,
            f"{' + '.join(t.names)}\nP{processor_range(t.processors)}",
            ha="center",
            va="center",
            fontsize=6,
        )
    steps = placement.problem.steps
    data_ax.set_xlim(0, steps + 1)
    top = max((t.end_byte for t in tensors(placement)), default=1)
    data_ax.set_ylim(0, min(placement.problem.device.instance_bytes, int(top * 1.15) + 4))
    data_ax.set_xlabel("step (0: input loaded, then one per layer)")
    data_ax.set_ylabel("byte offset within a memory instance")
    data_ax.set_title("data memory")

    s = plan.settings
    for n, h in enumerate(s.hw):
        layout = s.kernels.layouts.get(h.index)
        if layout is None or not layout.length:
            continue
        low, high = ffs(h.processor_map), fls(h.processor_map)
        kernel_ax.add_patch(
            plt.Rectangle(
                (low, layout.offset),
                high + 1 - low,
                layout.length,
                facecolor=colors(n % 20),
                edgecolor="black",
                alpha=0.8,
            )
        )
        kernel_ax.text(
            (low + high + 1) / 2,
            layout.offset + layout.length / 2,
            label(h.layer),
            ha="center",
            va="center",
            fontsize=6,
        )
    kernel_ax.set_xlim(0, s.chip.max_proc)
    kernel_ax.set_ylim(0, s.chip.regs.mask_width_large)
    kernel_ax.set_xlabel("processor")
    kernel_ax.set_ylabel("kernel memory column")
    kernel_ax.set_title("kernel memory")
    fig.tight_layout()
    fmt = path.suffix.lower().lstrip(".")

    def writer(handle) -> None:
        fig.savefig(handle, format=fmt, dpi=120)

    try:
        return write_file_atomic(path, writer=writer, overwrite=overwrite, option="--picture")
    finally:
        plt.close(fig)
