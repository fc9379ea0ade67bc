"""What `edgesynth report` shows of a GAP8 folder, from the plan compile wrote (plan.json):
every layer's tiling, its L1/L2/L3 use against the budgets and its cycle estimate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesynth.targets.pulp.device import GAP8
from edgesynth.targets.report_model import (
    LayerRow,
    TargetReport,
    UsageChart,
    read_json,
    shape_text,
    shapes_text,
)


def _row(layer: dict[str, Any]) -> LayerRow:
    memory, tiling = layer["memory"], layer["tiling"]
    weights = tiling.get("w_bytes", 0) if layer.get("bits", {}).get("weights") else 0
    where = f"cluster, weights in {memory['where']}"
    if memory.get("prefetched_weights"):
        where += " (prefetched)"
    return LayerRow(
        index=int(layer["index"]),
        name=str(layer["name"]),
        operator=str(layer["op"]),
        in_shape=shapes_text(layer["in_shape_chw"]),
        out_shape=shape_text(layer["out_shape_chw"]),
        macs=int(layer["macs"]),
        weight_bytes=int(weights),
        where=where,
        cycles=int(layer["cycles"]),
    )


def _tiles(layer: dict[str, Any]) -> str:
    t = layer["tiling"]
    counts = "x".join(map(str, t["tile_counts"]))
    buffered = "double" if t.get("double_buffer") else "single"
    return (
        f"{t['tiles']} tiles ({counts}) of {shape_text(t['tile_out'])} out, "
        f"{shape_text(t['tile_in'][0] if isinstance(t['tile_in'][0], list) else t['tile_in'])}"
        f" in; {buffered} buffered"
    )


def collect(folder: Path, manifest: dict[str, Any]) -> TargetReport:
    plan = read_json(folder, "plan.json")
    layers = plan["layers"]
    names = [f"{la['index']}: {la['name']}" for la in layers]
    usage = UsageChart(
        title="GAP8 memory per layer (L1: the tile buffers; L2: tensors in use; L3: weights "
        "fetched)",
        layers=names,
        series={
            "L1": [int(la["tiling"]["l1_bytes"]) for la in layers],
            "L2": [int(la["memory"]["l2_in_use"]) for la in layers],
            "L3": [int(la["dma"].get("l3_bytes", 0)) for la in layers],
        },
        budgets={"L1": plan.get("l1_budget"), "L2": plan.get("l2_budget"), "L3": GAP8.l3_bytes},
        details=[_tiles(la) for la in layers],
    )
    return TargetReport(
        target=manifest["target"],
        network=str(manifest.get("network", "")),
        folder=str(folder),
        layers=[_row(la) for la in layers],
        usage=[usage],
        clock_hz=GAP8.frequency_hz,
        total_cycles=int(plan["cycles"]),
        facts={
            "L1 peak": f"{plan['l1_peak']:,} of {plan['l1_budget']:,} B",
            "L2 peak": f"{plan['l2_peak']:,} of {plan['l2_budget']:,} B",
            "L3 (weights)": f"{plan['l3_bytes']:,} of {GAP8.l3_bytes:,} B",
        },
    )
