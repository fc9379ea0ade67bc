"""From lowered layers and their IMEM plan to what is emitted: the command list (ml-suite's
XN* form and compiler-JSON form) and the script (CSR writes per command)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.commands import Command
from edgesynth.targets.xdnn.imem import ImemPlan, volume_bytes
from edgesynth.targets.xdnn.layers import XLayer
from edgesynth.targets.xdnn.lower import Lowered
from edgesynth.targets.xdnn.scriptmodel import Script, ScriptCommand

TEMPLATES = (
    "# template <id> XNGather <uram_dest> <ddr_src> <input_w> <input_h> <input_chan> 0 1 1 "
    "<start_row> <end_row>",
    "# template <id> XNConv <layername> <kernel_w> <kernel_h> <strides_w> <strides_h> "
    "<padding_w> <padding_h> <dilation_w> <dilation_h> <preshift> <scale> <postshift> <relu> "
    "<bias> <inaddr> <insize_w> <insize_h> <inchan> <outaddr> <outsize_w> <outsize_h> "
    "<outchan> <Bypass_Perf_Opt>",
    "# template <id> XNMaxPool <layername> <kernel_w> <kernel_h> <strides_w> <strides_h> "
    "<paddings_w> <paddings_h> <inaddr> <insize_w> <insize_h> <inchan> <outaddr> <outsize_w> "
    "<outsize_h> <Bypass_Perf_Opt>",
    "# template <id> XNAvgPool <layername> <kernel_w> <kernel_h> <strides_w> <strides_h> "
    "<paddings_w> <paddings_h> <fcmode> <inaddr> <insize_w> <insize_h> <inchan> <outaddr> "
    "<outsize_w> <outsize_h> <Bypass_Perf_Opt>",
    "# template <id> XNEltwise <layername> <add> <bn> <relu> <inaddrA> <inaddrB> <insize_w> "
    "<insize_h> <inchan> <outaddr> <Bypass_Perf_Opt>",
    "# template <id> XNUpload <inaddr> <insize> <inchan>",
    "# template <id> XNScatter <uram_src> <ddr_dest> <input_w> <input_h> <input_chan> 0 1 1 "
    "<start_row> <end_row>",
)


@dataclass
class DdrMap:
    input_offset: int  # image region: the input, dense int16 (C, H, W)
    output_offset: int  # image region: the output, dense int16 (C, H, W)
    image_bytes: int
    filters: dict[str, tuple[int, int]] = field(default_factory=dict)  # layer -> offsets


def ddr_map(low: Lowered, filters: dict[str, tuple[int, int]]) -> DdrMap:
    def dense(t: str) -> int:
        c, h, w = low.graph.tensors[t].shape
        return c * h * w * 2

    a = dense(low.input_name)
    out_off = -(-a // dev.DDR_ALIGN) * dev.DDR_ALIGN
    return DdrMap(0, out_off, out_off + dense(low.output_name), filters)


def _shape(low: Lowered, t: str) -> tuple[int, int, int]:
    return low.graph.tensors[t].shape  # type: ignore[return-value]


def build(low: Lowered, plan: ImemPlan, ddr: DdrMap, bits: int) -> tuple[list[Command], Script]:
    """Every command in ml-suite's long form and as script fields, in execution order."""
    eng = plan.engine
    pairs = [_download(low, plan, ddr, 1)]
    last_reader = max(
        (i for i, lay in enumerate(low.layers) if low.input_name in lay.inputs), default=-1
    )
    for i, lay in enumerate(low.layers):
        free = int(i == last_reader and plan.mode == "reserved")
        pairs.append(_layer_command(lay, i + 2, plan, ddr, bits, free))
    pairs.append(_upload(low, plan, ddr, len(low.layers) + 2))
    script = Script(eng.dsp_pixels, eng.imem_bytes, [], [sc for _, sc in pairs])
    return [cmd for cmd, _ in pairs], script


def _download(low: Lowered, plan: ImemPlan, ddr: DdrMap, cid: int) -> tuple[Command, ScriptCommand]:
    """The XNGather that brings the input from DDR into IMEM."""
    c, h, w = _shape(low, low.input_name)
    to = plan.address(low.input_name)
    fields: dict[str, int | str] = {
        "uram_dest": to,
        "ddr_src": ddr.input_offset,
        "insize_w": w,
        "insize_h": h,
        "inchan": c,
        "a0": 0,
        "b1": 1,
        "c1": 1,
        "start_row": 0,
        "end_row": h - 1,
    }
    sf = {
        "command_id": cid,
        "in_w": w,
        "in_h": h,
        "in_c": c,
        "out_addr": to,
        "ddr_offset": ddr.input_offset,
        "start_row": 0,
        "end_row": h - 1,
    }
    cmd = Command(cid, "XNGather", fields, comment=f"download {low.input_name}")
    return cmd, ScriptCommand("XNGather", sf)


def _layer_command(
    lay: XLayer, cid: int, plan: ImemPlan, ddr: DdrMap, bits: int, free: int
) -> tuple[Command, ScriptCommand]:
    """One engine command: its long-form fields and its script fields. `free`: the command
    is the input's last reader, so the next download may start."""
    eight = int(bits == 8)
    if lay.op == "XNEltwise":
        sf, fields = _eltwise_fields(lay, cid, plan, free, eight)
    else:
        io = _io_fields(lay, cid, plan, free, eight)
        if lay.op == "XNConv":
            sf, fields = _conv_fields(lay, io, ddr)
        else:
            sf, fields = _pool_fields(lay, io)
    return Command(cid, lay.op, fields), ScriptCommand(lay.op, sf)


def _io_fields(lay: XLayer, cid: int, plan: ImemPlan, free: int, eight: int) -> dict[str, int]:
    """The script fields of a windowed command: geometry, then shapes and addresses."""
    ic, ih, iw = lay.in_shape
    oc, oh, ow = lay.out_shape
    return {
        "kernel_w": lay.kernel[1],
        "kernel_h": lay.kernel[0],
        "stride_w": lay.stride[1],
        "stride_h": lay.stride[0],
        "pad_w": lay.pad[1],
        "pad_h": lay.pad[0],
        "dilation_w": lay.dilation[1],
        "dilation_h": lay.dilation[0],
        "command_id": cid,
        "in_w": iw,
        "in_h": ih,
        "in_c": ic,
        "out_w": ow,
        "out_h": oh,
        "out_c": oc,
        "in_addr": plan.address(lay.inputs[0]),
        "out_addr": plan.address(lay.output),
        "free_download": free,
        "data_8bit": eight,
        "relu": int(lay.relu),
    }


def _conv_fields(
    lay: XLayer, io: dict[str, int], ddr: DdrMap
) -> tuple[dict[str, int], dict[str, int | str]]:
    assert lay.pre is not None and lay.scale is not None and lay.post is not None
    assert lay.bias is not None
    w_off, q_off = ddr.filters[lay.name]
    sf = {
        **io,
        "preshift": int(lay.pre[0]),
        "scale": int(lay.scale[0]),
        "postshift": int(lay.post[0]),
        "bias": int(lay.bias[0]),
        "bias_enable": 1,
        "per_channel": 1,
        "filter_offset": w_off,
        "quant_offset": q_off,
    }
    fields: dict[str, int | str] = {
        "name": lay.name,
        "kernel_w": lay.kernel[1],
        "kernel_h": lay.kernel[0],
        "strides_w": lay.stride[1],
        "strides_h": lay.stride[0],
        "padding_w": lay.pad[1],
        "padding_h": lay.pad[0],
        "dilation_w": lay.dilation[1],
        "dilation_h": lay.dilation[0],
        "preshift": sf["preshift"],
        "scale": sf["scale"],
        "postshift": sf["postshift"],
        "relu": int(lay.relu),
        "bias": 1,
        **_io_long_form(lay, io),
        "outchan": lay.out_shape[0],
        "Bypass_Perf_Opt": 0,
    }
    return sf, fields


def _io_long_form(lay: XLayer, io: dict[str, int]) -> dict[str, int | str]:
    """The long form's addresses and sizes (without the output depth)."""
    _, ih, iw = lay.in_shape
    _, oh, ow = lay.out_shape
    return {
        "inaddr": io["in_addr"],
        "insize_w": iw,
        "insize_h": ih,
        "inchan": lay.in_shape[0],
        "outaddr": io["out_addr"],
        "outsize_w": ow,
        "outsize_h": oh,
    }


def _pool_fields(lay: XLayer, io: dict[str, int]) -> tuple[dict[str, int], dict[str, int | str]]:
    """XNMaxPool, or XNAvgPool with its multiplier and fully-connected mode."""
    sf = {**io, "fc_mode": int(lay.fc_mode)}
    fields: dict[str, int | str] = {
        "name": lay.name,
        "kernel_w": lay.kernel[1],
        "kernel_h": lay.kernel[0],
        "strides_w": lay.stride[1],
        "strides_h": lay.stride[0],
        "paddings_w": lay.pad[1],
        "paddings_h": lay.pad[0],
    }
    if lay.op == "XNAvgPool":
        assert lay.scale is not None and lay.post is not None
        sf.update({"preshift": 0, "scale": int(lay.scale[0]), "postshift": int(lay.post[0])})
        fields["fcmode"] = int(lay.fc_mode)
    fields.update({**_io_long_form(lay, io), "Bypass_Perf_Opt": 0})
    return sf, fields


def _eltwise_fields(
    lay: XLayer, cid: int, plan: ImemPlan, free: int, eight: int
) -> tuple[dict[str, int], dict[str, int | str]]:
    ic, ih, iw = lay.in_shape
    sf = {
        "command_id": cid,
        "in_w": iw,
        "in_h": ih,
        "in_c": ic,
        "in_addr": plan.address(lay.inputs[0]),
        "in_b_addr": plan.address(lay.inputs[1]),
        "out_addr": plan.address(lay.output),
        "eltwise_add": 1,
        "relu": int(lay.relu),
        "free_download": free,
        "data_8bit": eight,
    }
    fields: dict[str, int | str] = {
        "name": lay.name,
        "add": 1,
        "bn": 0,
        "relu": int(lay.relu),
        "inaddrA": sf["in_addr"],
        "inaddrB": sf["in_b_addr"],
        "insize_w": iw,
        "insize_h": ih,
        "inchan": ic,
        "outaddr": sf["out_addr"],
        "Bypass_Perf_Opt": 0,
    }
    return sf, fields


def _upload(low: Lowered, plan: ImemPlan, ddr: DdrMap, cid: int) -> tuple[Command, ScriptCommand]:
    """The output's way back to DDR: XNUpload for a square output, XNScatter otherwise (the
    script has one upload command either way)."""
    c, h, w = _shape(low, low.output_name)
    out_addr = plan.address(low.output_name)
    comment = f"upload {low.output_name}"
    if h == w:
        fields: dict[str, int | str] = {"inaddr": out_addr, "insize": w, "inchan": c}
        cmd = Command(cid, "XNUpload", fields, comment=comment)
    else:
        fields = {
            "uram_src": out_addr,
            "ddr_dest": ddr.output_offset,
            "outsize_w": w,
            "outsize_h": h,
            "outchan": c,
            "a0": 0,
            "b1": 1,
            "c1": 1,
            "start_row": 0,
            "end_row": h - 1,
        }
        cmd = Command(cid, "XNScatter", fields, comment=comment)
    sf = {
        "command_id": cid,
        "in_w": w,
        "in_h": h,
        "in_c": c,
        "in_addr": out_addr,
        "ddr_offset": ddr.output_offset,
    }
    return cmd, ScriptCommand("XNUpload", sf)


def cmd_text(low: Lowered, cmds: list[Command], plan: ImemPlan, engine: dev.Engine) -> str:
    lines = [
        f"# edgesynth xDNN program: {low.graph.name}, engine {engine.name}",
        *TEMPLATES,
    ]
    pending = dict(low.concats)
    for cmd in cmds:
        lines.append(cmd.format())
        for cat, members in list(pending.items()):
            if cmd.op != "XNGather" and members[-1] == _written(cmd, low):
                p = plan.placements[cat]
                lines.append(f"# {cmd.id} XNConcat {cat}  {hex(p.address)} {hex(p.end)} {p.size}")
                del pending[cat]
    return "\n".join(lines) + "\n"


def _written(cmd: Command, low: Lowered) -> str | None:
    for lay in low.layers:
        if lay.name == cmd.fields.get("name"):
            return lay.output
    return None


def program_json(
    low: Lowered, cmds: list[Command], engine: dev.Engine, bits: int
) -> dict[str, Any]:
    by_name = {lay.name: lay for lay in low.layers}
    network: list[dict[str, Any]] = []
    for cmd in cmds:
        kv = {"id": str(cmd.id), "XNOp": cmd.op}
        for k, v in cmd.fields.items():
            kv[k] = hex(v) if isinstance(v, int) and _is_address(k) else str(v)
        lay = by_name.get(str(cmd.fields.get("name", "")))
        entry: dict[str, Any] = {
            "name": lay.name if lay else cmd.comment,
            "type": {
                "XNConv": "Convolution",
                "XNMaxPool": "Pooling",
                "XNAvgPool": "Pooling",
                "XNEltwise": "Eltwise",
                "XNGather": "Input",
            }.get(cmd.op, "Output"),
            "bottoms": list(lay.inputs) if lay else [],
            "outputshapes": [1, *lay.out_shape] if lay else [],
            "sources": list(lay.sources) if lay else [],
            "xdnn_instr": cmd.format(),
            "xdnn_kv": kv,
        }
        network.append(entry)
    return {
        "version": "edgesynth-xdnn/1",
        "arguments": {
            "dsp": engine.dsp_pixels,
            "bytesperpixels": engine.bytes_per_pixel,
            "memory": engine.imem_bytes / (1 << 20),
            "bits": bits,
        },
        "inputs": [{"input_name": low.input_name, "input_address": 0}],
        "outputs": [{"output_name": low.output_name}],
        "network": network,
    }


def _is_address(name: str) -> bool:
    n = name.lower()
    return "addr" in n or n.startswith(("uram_", "ddr_"))


def imem_bytes_needed(low: Lowered, engine: dev.Engine) -> int:
    return sum(
        volume_bytes(engine, t.shape) for t in low.graph.tensors.values() if len(t.shape) == 3
    )
