"""What `edgesynth report` shows of an xDNN folder, from program.json and imem_map.json (what
compile wrote): each command's layer, the filter bytes in DDR and the image-memory regions
with every tensor's lifetime. The sources give no cycle model."""

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


def _int(text: Any) -> int:
    return int(str(text), 0)


def _macs(kv: dict[str, str], out: list[int]) -> int:
    if kv.get("XNOp") != "XNConv":
        return 0
    c, h, w = out[-3:]
    return c * h * w * _int(kv["inchan"]) * _int(kv["kernel_w"]) * _int(kv["kernel_h"])


def _filter_bytes(imem: dict[str, Any]) -> dict[str, int]:
    """Each layer's filter bytes in DDR: from its weights to the next layer's (or the end)."""
    ddr = imem.get("ddr", {})
    starts = sorted((int(v["weights"]), k) for k, v in ddr.get("filters", {}).items())
    ends = [s for s, _ in starts[1:]] + [int(ddr.get("filter_bytes", 0))]
    return {name: end - start for (start, name), end in zip(starts, ends, strict=True)}


def _rows(program: dict[str, Any], imem: dict[str, Any]) -> list[LayerRow]:
    shapes = {t["tensor"]: t["shape"] for t in imem["tensors"]}
    filters = _filter_bytes(imem)
    rows = []
    for entry in program["network"]:
        if entry["type"] in ("Input", "Output"):
            continue
        kv, out = entry["xdnn_kv"], entry["outputshapes"]
        ins = " + ".join(shape_text(shapes[b]) for b in entry["bottoms"] if b in shapes)
        rows.append(
            LayerRow(
                index=len(rows),
                name=str(entry["name"]),
                operator=f"{entry['type']} ({kv.get('XNOp', '')})",
                in_shape=ins,
                out_shape=shape_text(out[1:] if len(out) == 4 else out),
                macs=_macs(kv, out),
                weight_bytes=filters.get(entry["name"], 0),
                where="xDNN engine, image memory",
            )
        )
    return rows


def _imem(imem: dict[str, Any]) -> AddressMap:
    regions = []
    for t in imem["tensors"]:
        regions.append(
            Region(
                lane=str(t["region"]),
                start=_int(t["start"]),
                end=_int(t["end"]),
                name=f"{t['tensor']} {shape_text(t['shape'])}",
                layer=f"written by {t['written_by']}",
                detail=f"last read by {t['last_read_by']}; steps {t['first_step']} to "
                f"{t['last_step']}",
            )
        )
    used = max((r.end for r in regions if r.lane != "upload"), default=0)
    return AddressMap(
        title=f"xDNN image memory (IMEM, {int(imem['imem_bytes']):,} B; engine "
        f"{imem['engine']}): the tensors in the download, processing and upload regions",
        lanes=list(imem["regions"]),
        size=int(imem["imem_bytes"]),
        regions=regions,
        shared_axis=False,
        note=f"processing tensors end by 0x{used:x}; the upload region is at the top",
    )


def _lifetimes(imem: dict[str, Any]) -> AddressMap:
    """Each tensor from the step that writes it to the last that reads it (step 0: the host's
    download; step k: the k-th command)."""
    regions = [
        Region(
            lane=f"{t['tensor']} {shape_text(t['shape'])}",
            start=int(t["first_step"]) + 1,
            end=int(t["last_step"]) + 2,
            name=f"{t['tensor']} {shape_text(t['shape'])}",
            layer=f"written by {t['written_by']}, last read by {t['last_read_by']}",
            detail=f"{t['region']} region {t['start']}-{t['end']}",
        )
        for t in imem["tensors"]
    ]
    return AddressMap(
        title="xDNN image memory: each tensor's lifetime (step 0: the download; step k: the "
        "k-th command)",
        lanes=[r.lane for r in regions],
        size=max([r.end for r in regions] + [1]),
        regions=regions,
        unit="steps",
    )


def collect(folder: Path, manifest: dict[str, Any]) -> TargetReport:
    program = read_json(folder, "program.json")
    imem = read_json(folder, "imem_map.json")
    return TargetReport(
        target=manifest["target"],
        network=str(manifest.get("network", "")),
        folder=str(folder),
        layers=_rows(program, imem),
        maps=[_imem(imem), _lifetimes(imem)],
        facts={
            "filters (DDR)": f"{int(imem.get('ddr', {}).get('filter_bytes', 0)):,} B",
            "image memory": f"{int(imem['imem_bytes']):,} B",
        },
        notes=["the xDNN sources give no cycle model: no time per layer"],
    )
