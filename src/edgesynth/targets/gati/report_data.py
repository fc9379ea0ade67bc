"""What `edgesynth report` shows of a Gati folder, from report.json (what compile wrote): each
layer's engine, shapes, MACs and cycle estimate, and the DRAM layout region by region."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesynth.targets.report_model import (
    AddressMap,
    LayerRow,
    Region,
    TargetReport,
    read_json,
    shape_text,
)


def _weight_bytes(layer: dict[str, Any]) -> int:
    regions = layer.get("regions", {})
    return sum(int(regions[k]["size"]) for k in ("weights", "bias") if regions.get(k))


def _row(layer: dict[str, Any]) -> LayerRow:
    extra = [layer.get("activation"), (layer.get("pool") or {}).get("type")]
    operator = str(layer["operation"]) + "".join(f" + {e}" for e in extra if e and e != "none")
    return LayerRow(
        index=int(layer["index"]),
        name=str(layer["name"]),
        operator=operator,
        in_shape=shape_text(layer["in_shape"]),
        out_shape=shape_text(layer["out_shape"]),
        macs=int(layer["macs"]),
        weight_bytes=_weight_bytes(layer),
        where=f"{layer['engine']} engine",
        cycles=int(layer["cycles"]),
    )


def _dram(report: dict[str, Any], names: dict[int, str]) -> AddressMap:
    dram = report["dram"]
    regions = []
    for r in dram["regions"]:
        layer = names.get(r["layer"], "the host" if r["kind"] == "input" else "the program")
        regions.append(
            Region(
                lane=str(r["kind"]),
                start=int(r["start"]),
                end=int(r["end"]),
                name=str(r["name"]),
                layer=layer,
                detail=f"{r['kind']}, {int(r['size']):,} B",
            )
        )
    lanes = list(dict.fromkeys(r.lane for r in regions))
    return AddressMap(
        title=f"Gati DRAM layout ({int(dram['bytes']):,} B, {dram['alignment']}-byte aligned), "
        "one lane per kind of region",
        lanes=lanes,
        size=int(dram["bytes"]),
        regions=regions,
        shared_axis=False,
    )


def collect(folder: Path, manifest: dict[str, Any]) -> TargetReport:
    report = read_json(folder, "report.json")
    layers = report["layers"]
    names = {int(la["index"]): f"layer {la['index']} ({la['name']})" for la in layers}
    array = report.get("array", {})
    return TargetReport(
        target=manifest["target"],
        network=str(manifest.get("network", "")),
        folder=str(folder),
        layers=[_row(la) for la in layers],
        maps=[_dram(report, names)],
        total_cycles=int(report["total_cycles"]),
        facts={
            "DRAM": f"{int(report['dram']['bytes']):,} B",
            "instructions": str(report.get("instruction_count", "")),
            "array": f"{array.get('engines')} engines of {array.get('engine_rows')}x"
            f"{array.get('engine_cols')}",
        },
        notes=["the Gati seed names no clock: cycles only"],
    )
