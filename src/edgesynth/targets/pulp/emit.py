"""Generate the C of a planned network from the Jinja2 templates (one template per file) and the
L3 image (`weights.bin`): every number is computed here, the templates only lay it out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.targets.pulp.lower import PulpLayer, Step
from edgesynth.targets.pulp.memory import blob_layout, has_blob
from edgesynth.targets.pulp.packing import pack, param_bytes
from edgesynth.targets.pulp.plan import LayerPlan, Plan
from edgesynth.targets.pulp.tiler import PARAM_ALIGN, param_width

TEMPLATES = {
    "es_hal.h": "es_hal.h.j2",
    "es_hal_host.c": "es_hal_host.c.j2",
    "es_hal_pulp.c": "es_hal_pulp.c.j2",
    "es_io.h": "es_io.h.j2",
    "es_io_stdio.c": "es_io_stdio.c.j2",
    "es_io_rv32.c": "es_io_rv32.c.j2",
    "es_kernels.h": "es_kernels.h.j2",
    "es_kernels.c": "es_kernels.c.j2",
    "network.h": "network.h.j2",
    "network.c": "network.c.j2",
    "main.c": "main.c.j2",
    "Makefile": "Makefile.j2",
}
WEIGHTS = "weights.bin"
RV32_FLAGS = (
    "-march=rv32imc -mabi=ilp32 -ffreestanding -nostdlib -nostartfiles -static "
    "-fno-tree-loop-distribute-patterns"
)
DMA_MAX_CMDS = 256


def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("edgesynth.targets.pulp", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


# -- C expressions --------------------------------------------------------------------------------


def c_int(v: int) -> str:
    v = int(v)
    if -(1 << 31) < v < (1 << 31):
        return str(v)
    return f"((int64_t){v}LL)"


def _param_ref(layer: PulpLayer, lp: LayerPlan, name: str) -> str:
    offset, width = param_l1_offsets(layer, lp.tiling.c)[name]
    return f"es_ld_param(prm + {offset}, c, {width})"


def param_l1_offsets(layer: PulpLayer, channels: int) -> dict[str, tuple[int, int]]:
    """Each per-channel array's offset in a tile's L1 parameter buffer, and its width."""
    out: dict[str, tuple[int, int]] = {}
    at = 0
    for name, arr in layer.params():
        width = param_width(arr)
        out[name] = (at, width)
        at += -(-channels * width // PARAM_ALIGN) * PARAM_ALIGN
    return out


def step_code(step: Step, var: str, refs: dict[str, str]) -> list[str]:
    """C statements applying one requantization to the int64 `var`."""
    lines = []
    if isinstance(step.mul, np.ndarray):
        lines.append(f"{var} = {var} * {refs['mul']};")
    elif int(step.mul) != 1:
        lines.append(f"{var} = {var} * {c_int(step.mul)};")
    if isinstance(step.add, np.ndarray):
        lines.append(f"{var} = {var} + {refs['add']};")
    elif int(step.add) != 0:
        lines.append(f"{var} = {var} + {c_int(step.add)};")
    d = int(step.div)
    if d != 1:
        power = d & (d - 1) == 0
        k = d.bit_length() - 1
        if power and step.rounding == "floor":
            lines.append(f"{var} = {var} >> {k};")
        elif power and step.rounding == "half_up":
            lines.append(f"{var} = ({var} + {c_int(d // 2)}) >> {k};")
        else:
            lines.append(f"{var} = es_div_{step.rounding}({var}, {c_int(d)});")
    if step.lo is not None and step.hi is not None:
        lines.append(f"{var} = es_clip({var}, {c_int(step.lo)}, {c_int(step.hi)});")
    elif step.lo is not None:
        lines.append(f"if ({var} < {c_int(step.lo)}) {var} = {c_int(step.lo)};")
    elif step.hi is not None:
        lines.append(f"if ({var} > {c_int(step.hi)}) {var} = {c_int(step.hi)};")
    return lines


def function_code(layer: PulpLayer, lp: LayerPlan) -> list[str]:
    lines: list[str] = []
    if layer.kind == "eltwise":
        for k, steps in enumerate(layer.pre_steps):
            lines.append(f"int64_t x{k} = {'ab'[k]};")
            for step in steps:
                lines += step_code(step, f"x{k}", {})
        join = " * " if layer.eltwise_op == "mul" else " + "
        lines.append("int64_t v = " + join.join(f"x{k}" for k in range(len(layer.pre_steps))) + ";")
    for k, step in enumerate(layer.steps):
        refs = {
            what: _param_ref(layer, lp, f"s{k}_{what}")
            for what in ("mul", "add")
            if isinstance(getattr(step, what), np.ndarray)
        }
        lines += step_code(step, "v", refs)
    lines.append("return (int32_t)v;")
    return lines


# -- the context of one layer --------------------------------------------------------------------


def _row_range(layer: PulpLayer, h_in: int) -> tuple[str, str]:
    if layer.kind == "linear":
        return "0", "1"
    if layer.kind == "eltwise":
        return "r.h0", "r.h1"
    sh, pt = layer.stride[0], layer.pads[0]
    span_h = (layer.kernel[0] - 1) * layer.dilation[0] + 1
    return f"imax(r.h0 * {sh} - {pt}, 0)", f"imin((r.h1 - 1) * {sh} - {pt} + {span_h}, {h_in})"


def layer_context(lp: LayerPlan, plan: Plan, index: int) -> dict[str, Any]:
    L, t, m = lp.layer, lp.tiling, lp.memory
    c_out, h_out, w_out = L.out_shape
    out_home = plan.memory.homes[L.output]
    w_ctx, mem_w, bias = _weight_context(lp)
    ctx: dict[str, Any] = {
        "index": L.index,
        "title": f"{L.op_label}, ONNX {L.name}, {'x'.join(map(str, L.in_shapes[0]))} -> "
        f"{c_out}x{h_out}x{w_out} (CxHxW)",
        "kind": "conv" if L.kind in ("conv", "linear") else L.kind,
        "linear": L.kind == "linear",
        "double": t.double,
        "tc": t.c,
        "th": t.h,
        "tw": t.w,
        "co": c_out,
        "ho": h_out,
        "wo": w_out,
        "nbx": t.nb_x,
        "nbw": t.nb_w,
        "nby": t.nb_y,
        "l1_bytes": t.l1_bytes,
        "x": _input_tiles(lp),
        "y": {
            "bits": L.out_storage.bits,
            "signed": int(L.out_storage.signed),
            "pix": L.out_storage.nbytes(c_out),
            "l1": [t.offsets[f"y_{b}"] for b in range(t.nb_y)],
        },
        **_window_context(L),
        "wide": int(L.wide_acc),
        "w_bits": L.w_storage.bits if L.w_storage else 8,
        "fn_code": function_code(L, lp),
        "trace": c_out * h_out * w_out if L.acc_tensor else 0,
        "bias": bias,
        "out_place": {
            "level": 2 if out_home.level == "L2" else 3,
            "offset": out_home.offset,
            "bytes": out_home.nbytes,
        },
        **_input_channels(L),
        "w": w_ctx,
    }
    ctx["mem"] = {
        "describe": m.describe() + (" (weights prefetched)" if m.prefetched else ""),
        "n_stripes": -(-h_out // m.stripe_rows),
        "stripe_rows": m.stripe_rows,
        "n_chunks": -(-c_out // m.chunk_channels),
        "chunk_channels": m.chunk_channels,
        "x": _input_transfers(lp, plan),
        "y": {
            "l3": m.y_l3,
            "buf": m.y_buf,
            "home": out_home.offset,
            "row_bytes": L.out_storage.nbytes(c_out * w_out),
        },
        "w": mem_w,
        "prefetch_next": _next_prefetch(plan, index),
    }
    return ctx


def _input_tiles(lp: LayerPlan) -> list[dict[str, Any]]:
    """Each input's shape, storage and L1 buffers."""
    L, t = lp.layer, lp.tiling
    xs = []
    for k, (shape, storage) in enumerate(zip(L.in_shapes, L.in_storage, strict=True)):
        cin, h_in, w_in = shape
        xs.append(
            {
                "c": cin,
                "h": h_in,
                "w": w_in,
                "bits": storage.bits,
                "signed": int(storage.signed),
                "pix": storage.nbytes(cin),
                "l1": [t.offsets[f"x{k}_{b}"] for b in range(t.nb_x)],
            }
        )
    return xs


def _window_context(L: PulpLayer) -> dict[str, int]:
    """The kernel window: size, stride, dilation, leading pads, and its span on the input."""
    return {
        "kh": L.kernel[0],
        "kw": L.kernel[1],
        "sh": L.stride[0],
        "sw": L.stride[1],
        "dh": L.dilation[0],
        "dw": L.dilation[1],
        "pt": L.pads[0],
        "pl": L.pads[1],
        "span_h": (L.kernel[0] - 1) * L.dilation[0] + 1,
        "span_w": (L.kernel[1] - 1) * L.dilation[1] + 1,
        "is_max": int(L.pool_kind == "max"),
    }


def _input_channels(L: PulpLayer) -> dict[str, Any]:
    """Which input channels an output tile reads (C expressions over the tile `t`): its group's
    for a grouped convolution, all for a dense one, its own for pools and additions."""
    c_out = L.out_shape[0]
    if L.kind == "conv" and L.groups > 1:
        cout_g, cin_g = c_out // L.groups, L.cin // L.groups
        return {
            "ci0": f"(t->c0 / {cout_g}) * {cin_g}",
            "ci_count": f"((t->c1 - t->c0) / {cout_g}) * {cin_g}",
            "cin_g": cin_g,
            "cout_g": cout_g,
        }
    if L.kind in ("conv", "linear"):
        return {"ci0": "0", "ci_count": str(L.cin), "cin_g": L.cin, "cout_g": c_out}
    return {"ci0": "t->c0", "ci_count": "(t->c1 - t->c0)", "cin_g": 1, "cout_g": 1}


def _weight_context(
    lp: LayerPlan,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, int] | None]:
    """The weight blob's arrays in L1 (tile), in L2/L3 (whole and per chunk), and its
    transfers; the bias array the kernel starts each accumulator from. Nones without a blob."""
    L, t, m = lp.layer, lp.tiling, lp.memory
    if not has_blob(L):
        return None, None, None
    offsets = t.offsets
    tile_arrays = param_l1_offsets(L, t.c)
    bias = None
    if L.bias is not None:
        bias = {"offset": tile_arrays["bias"][0], "width": tile_arrays["bias"][1]}
    full = blob_layout(L, L.cout)
    chunk = blob_layout(L, m.chunk_channels)
    arrays = []
    for (name, width, full_off), (_, _, chunk_off) in zip(full.arrays, chunk.arrays, strict=True):
        arrays.append(
            {
                "name": name,
                "width": width,
                "l1": tile_arrays[name][0],
                "full_offset": full_off,
                "chunk_offset": chunk_off,
            }
        )
    w_ctx = {
        "row_bytes": full.row_bytes,
        "arrays": arrays,
        "l1": [offsets.get(f"w_{b}", offsets.get(f"p_{b}", 0)) for b in range(t.nb_w)],
        "p_l1": [offsets.get(f"p_{b}", 0) for b in range(t.nb_w)],
    }
    mem_w = {
        "prefetched": m.prefetched,
        "l3": m.w_l3,
        "l2": m.w_buf,
        "l3_offset": m.w_l3_offset,
        "bytes": full.nbytes,
        "arrays": arrays,
    }
    return w_ctx, mem_w, bias


def _input_transfers(lp: LayerPlan, plan: Plan) -> list[dict[str, Any]]:
    """Each input's home, L2 buffer and the rows a stripe reads."""
    L, m = lp.layer, lp.memory
    mem_x = []
    for k, tname in enumerate(L.inputs):
        home = plan.memory.homes[tname]
        cin, h_in, w_in = L.in_shapes[k]
        row_bytes = L.in_storage[k].nbytes(cin * w_in)
        lo, hi = _row_range(L, h_in)
        mem_x.append(
            {
                "l3": m.x_l3[k],
                "home": home.offset,
                "buf": m.x_buf[k],
                "row_bytes": row_bytes,
                "row_lo": lo,
                "row_hi": hi,
            }
        )
    return mem_x


def _next_prefetch(plan: Plan, index: int) -> dict[str, int] | None:
    """The next layer's weights, when this layer prefetches them."""
    if index + 1 < len(plan.layers) and plan.layers[index + 1].memory.prefetched:
        nxt = plan.layers[index + 1]
        nm = nxt.memory
        return {
            "l2": nm.w_buf,
            "l3": nm.w_l3_offset,
            "bytes": blob_layout(nxt.layer, nxt.layer.cout).nbytes,
        }
    return None


def weights_image(plan: Plan) -> bytes:
    """The L3 image: every layer's weight blob at its offset."""
    image = bytearray(plan.memory.weights_bytes)
    for lp, offset in zip(plan.layers, plan.memory.blob_l3, strict=True):
        L = lp.layer
        if offset < 0:
            continue
        layout = blob_layout(L, L.cout)
        blob = bytearray(layout.nbytes)
        if L.weight is not None:
            w = pack(L.weight.reshape(-1), L.w_storage)
            blob[: len(w)] = w
        for (_, arr), (_, width, at) in zip(L.params(), layout.arrays, strict=True):
            data = param_bytes(arr, width)
            blob[at : at + len(data)] = data
        image[offset : offset + len(blob)] = blob
    return bytes(image)


def render(plan: Plan, network: str, source: str) -> dict[str, str]:
    env = _environment()
    layers = [layer_context(lp, plan, i) for i, lp in enumerate(plan.layers)]
    inputs = []
    for name in plan.inputs_order:
        home = plan.memory.homes[name]
        inputs.append(
            {
                "name": name,
                "level": 2 if home.level == "L2" else 3,
                "offset": home.offset,
                "bytes": home.nbytes,
            }
        )
    context = {
        "network": network,
        "source": source,
        "cores": plan.device.cores,
        "dma_max_cmds": DMA_MAX_CMDS,
        "l1_bytes": max(plan.l1_budget, plan.max_l1, 8),
        "l2_bytes": max(plan.l2_budget, 8),
        "l3_bytes": max(plan.memory.l3_bytes, 8),
        "weights_bytes": plan.memory.weights_bytes,
        "max_input_bytes": max((i["bytes"] for i in inputs), default=0),
        "inputs": inputs,
        "layers": layers,
        "double": plan.options.double_buffer,
        "max_arrays": max([len(lp.layer.params()) for lp in plan.layers] + [1]),
        "rv32_flags": RV32_FLAGS,
    }
    return {name: env.get_template(tpl).render(**context) for name, tpl in TEMPLATES.items()}


def write_sources(plan: Plan, folder: Path, network: str, source: str) -> list[str]:
    files = render(plan, network, source)
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / WEIGHTS).write_bytes(weights_image(plan))
    return [*files, WEIGHTS]
