"""The host CPU's side: quantize and lay out inputs, send them, read back dispatched outputs.

`host_contract` is what the host needs to know about a compiled program (stored in the
report under "host"); `run_program` drives the functional model with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati import dwp, layout
from edgesynth.targets.gati.executor.dwp import Write
from edgesynth.targets.gati.executor.machine import GatiMachine
from edgesynth.targets.gati.floatref import host_post
from edgesynth.targets.gati.plan import CompiledProgram
from edgesynth.targets.gati.quantize import quantize_input

CONTRACT_FORMAT = "edgesynth-gati-host/1"


def host_contract(prog: CompiledProgram) -> dict[str, Any]:
    model = prog.model
    outputs = []
    for c, g in zip(prog.layers, model.layers, strict=True):
        if not c.dispatch:
            continue
        outputs.append(
            {
                "dispatch_id": c.dispatch_id,
                "layer": c.index,
                "node": c.name,
                "tensor": c.tensor,
                "shape": list(c.out_shape),
                "layout": "vector" if c.engine == "fc" else "map",
                "elem_bytes": g.out_bytes,
                "scale": g.out_scale,
                "final": c.index == len(prog.layers) - 1,
            }
        )
    return {
        "format": CONTRACT_FORMAT,
        "input": {
            "name": model.chain.input_name,
            "shape": list(model.input_shape),
            "layout": model.input_layout,
            "address": prog.input_region.start,
            "size": prog.input_region.size,
            "scale": model.input_scale,
        },
        "outputs": outputs,
        "output_tensor": model.chain.output_name,
        "output_shape": list(model.chain.output_shape),
        "host_post": model.chain.host_post,
        "dispatch_channel": "RAH",
    }


def known_answer(prog: CompiledProgram, sample: np.ndarray) -> tuple[bytes, bytes]:
    """(inference stream for one float sample, the DWP packets the FPGA must send back).

    The expected packets come from the integer reference, not from the functional model."""
    from edgesynth.targets.gati.reference import reference_layers

    host = host_contract(prog)
    xq = quantize_input(check_input(host, sample, "sample"), host["input"]["scale"])
    outs = reference_layers(prog.model, xq)
    expected = bytearray()
    for o in host["outputs"]:
        values = outs[o["layer"]]
        if o["layout"] == "map":
            data = layout.pack_map(values, o["elem_bytes"])
        else:
            data = layout.pack_vector(values.reshape(values.shape[0], -1), o["elem_bytes"])
        expected += dwp.encode_dwp(o["dispatch_id"], data[0].tobytes())
    return input_streams(host, xq)[0], bytes(expected)


def input_streams(host: Mapping[str, Any], xq: np.ndarray) -> list[bytes]:
    """One stream per inference: the input's DWP packet and META DISPATCH (channel RAH)."""
    inp = host["input"]
    if inp["layout"] == "map":
        data = layout.pack_map(xq.astype(np.int64), 1)
    else:
        data = layout.pack_vector(xq.reshape(xq.shape[0], -1).astype(np.int64), 1)
    if data.shape[1] != inp["size"]:
        raise EdgesynthError(f"input packs to {data.shape[1]} bytes, the layout has {inp['size']}")
    dispatch = dwp.encode_meta(dwp.META_DISPATCH, dwp.DISPATCH_RAH)
    return [dwp.encode_dwp(inp["address"], row.tobytes()) + dispatch for row in data]


def decode_dispatched(host: Mapping[str, Any], packets: list[list[Write]]) -> dict[int, np.ndarray]:
    """Integer outputs (B, *shape) per dispatched layer, from the dispatcher's DWP packets."""
    by_id = {o["dispatch_id"]: o for o in host["outputs"]}
    raw: dict[int, list[bytes]] = {o["dispatch_id"]: [] for o in host["outputs"]}
    for row, plist in enumerate(packets):
        seen = set()
        for p in plist:
            if p.address not in by_id:
                raise EdgesynthError(
                    f"inference {row}: dispatched packet with unknown id {p.address:#x}"
                )
            raw[p.address].append(p.payload)
            seen.add(p.address)
        if seen != set(by_id):
            raise EdgesynthError(f"inference {row}: missing dispatched outputs")
    out: dict[int, np.ndarray] = {}
    for did, chunks in raw.items():
        o = by_id[did]
        buf = np.frombuffer(b"".join(chunks), dtype=np.uint8).reshape(len(chunks), -1)
        if o["layout"] == "map":
            c, h, w = o["shape"]
            out[o["layer"]] = layout.unpack_map(buf, c, h, w, o["elem_bytes"])
        else:
            out[o["layer"]] = layout.unpack_vector(buf, o["shape"][0], o["elem_bytes"])
    return out


def check_input(host: Mapping[str, Any], x: np.ndarray, what: str = "input") -> np.ndarray:
    shape = tuple(host["input"]["shape"])
    x = np.asarray(x)
    if x.ndim != len(shape) + 1 or tuple(x.shape[1:]) != shape:
        raise EdgesynthError(
            f"{what} has shape {x.shape}; the model takes (N, {', '.join(map(str, shape))})"
        )
    if not np.issubdtype(x.dtype, np.number):
        raise EdgesynthError(f"{what} is not numeric ({x.dtype})")
    if x.shape[0] == 0:
        raise EdgesynthError(f"{what} holds no samples")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise EdgesynthError(f"{what} holds NaN or infinite values")
    return x


def run_program(
    stream: bytes, host: Mapping[str, Any], x: np.ndarray, machine: GatiMachine | None = None
) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Float outputs (dequantized, host post-processing applied, one row per input) and the
    integer outputs of every dispatched layer."""
    if host.get("format") != CONTRACT_FORMAT:
        raise EdgesynthError(f"not an edgesynth Gati host contract ({host.get('format')!r})")
    x = check_input(host, x)
    xq = quantize_input(x, host["input"]["scale"])
    machine = machine or GatiMachine(stream)
    ints = decode_dispatched(host, machine.run(input_streams(host, xq)))
    final = next(o for o in host["outputs"] if o["final"])
    y = ints[final["layer"]].astype(np.float64) * final["scale"]
    y = y.reshape(y.shape[0], *host["output_shape"])
    if host.get("host_post"):
        y = host_post(host["host_post"], y.reshape(y.shape[0], -1))
    return y, ints
