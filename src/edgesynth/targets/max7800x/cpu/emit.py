"""The CPU part as C (`cpu_part.c`, `cpu_part.h` from the target's templates) and its estimated
cycles on the Cortex-M4.

The estimate is an instruction-count model of the generated loops (cycles per inner-loop
iteration and per output, counted from the instructions GCC emits for them at -Os: loads,
multiply-accumulate, loop control), not a measurement: memory wait states and the cache are
not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgesynth.targets.max7800x.cpu.program import CpuLayer, CpuProgram

# Cycles per unit of work (see the module doc):
CYCLES = {
    "mac": 6,  # linear inner loop: two byte loads, a multiply-accumulate, the loop's add/branch
    "linear_out": 20,  # per output: the bias, the 64-bit requantization, saturation, the store
    "conv_tap": 14,  # convolution: the bounds checks and index arithmetic of a tap, then the MAC
    "convt_skip": 6,  # transposed convolution: a tap on a stuffed zero (index test, branch)
    "pool_tap": 8,  # pooling: index arithmetic, load, add, compare per window value
    "requantize": 14,  # per value: load, 64-bit multiply and add, shift, saturation, store
    "relu": 5,  # per value: load, compare, select, store, loop
    "leaky": 12,  # per value: load, compare, multiply and shift when negative, store
    "lut": 6,  # per value: load, add, table load, store, loop
    "add": 16,  # per value: two loads, two multiplies, add, the rounding shift, saturation
    "sub": 16,
    "mul": 14,  # per value: two loads, two multiplies, the rounding shift, saturation, store
    "concat": 14,  # per value: a requantized copy
    "rescale": 14,  # per value: 8-bit codes requantized to the scale the accelerator takes back
    "softmax": 150,  # per value: the project's softmax.c (exponent, sums, division)
}


@dataclass
class LayerCost:
    name: str
    kind: str
    cycles: int


def estimate(program: CpuProgram) -> list[LayerCost]:
    """Each CPU layer's estimated cycles (and the softmax's, when it runs)."""
    costs = []
    for layer in program.layers:
        if layer.kind == "linear":
            assert layer.weight is not None
            inputs = layer.weight.shape[1]
            cycles = inputs * layer.size * CYCLES["mac"] + layer.size * CYCLES["linear_out"]
        elif layer.kind in ("conv", "convt"):
            assert layer.weight is not None
            taps = int(np.prod(layer.weight.shape[1:]))
            hits = taps if layer.kind == "conv" else -(-taps // int(np.prod(layer.stride)))
            tap_cycles = hits * CYCLES["conv_tap"] + (taps - hits) * CYCLES["convt_skip"]
            cycles = layer.size * (tap_cycles + CYCLES["linear_out"])
        elif layer.kind == "pool":
            cycles = layer.size * (layer.kernel[0] * layer.kernel[1] * CYCLES["pool_tap"] + 10)
        else:
            cycles = layer.size * CYCLES[layer.kind]
        costs.append(LayerCost(layer.nodes[0] if layer.nodes else layer.name, layer.kind, cycles))
    if program.softmax:
        costs.append(LayerCost("softmax", "softmax", program.out_size * CYCLES["softmax"]))
    return costs


def estimate_lines(program: CpuProgram) -> list[str]:
    costs = estimate(program)
    lines = [f"{c.name} ({c.kind}): {c.cycles:,}" for c in costs]
    return [*lines, f"total: {sum(c.cycles for c in costs):,} cycles"]


def _c_type(bits: int) -> str:
    return "int32_t" if bits == 32 else "int8_t"


def _lines(values: np.ndarray, per_line: int = 16) -> list[str]:
    flat = [str(int(v)) for v in np.asarray(values).reshape(-1)]
    return [", ".join(flat[i : i + per_line]) + "," for i in range(0, len(flat), per_line)]


def _shape(layer: CpuLayer) -> str:
    """The `shape_t` initializer of a convolution or pooling layer."""
    c, h, w = layer.in_shape
    o, oh, ow = layer.out_shape
    (kh, kw), (sh, sw), (dh, dw) = layer.kernel, layer.stride, layer.dilation
    values = [c, h, w, o, oh, ow, kh, kw, sh, sw, layer.pads[0], layer.pads[1], dh, dw]
    return ", ".join(str(int(v)) for v in [*values, layer.groups])


def _combined_calls(layer: CpuLayer, out: str, sources: list[tuple[str, int]]) -> list[str]:
    """The calls of an element-wise or concat layer (`sources`: each buffer and its size)."""
    (a, _), *rest = sources
    if layer.kind == "mul":
        return [f"mul8({a}, {rest[0][0]}, {layer.size}, {layer.mult}, {layer.shift}, {out})"]
    if layer.kind in ("add", "sub"):
        mb = -layer.mults[1] if layer.kind == "sub" else layer.mults[1]
        b = rest[0][0]
        return [f"add8({a}, {b}, {layer.size}, {layer.mults[0]}, {mb}, {layer.shift}, {out})"]
    calls, offset = [], 0
    for (src, size), mult, shift in zip(sources, layer.mults, layer.shifts, strict=True):
        calls.append(f"rescale8({src}, {size}, {mult}, {shift}, {out} + {offset})")
        offset += size
    return calls


def _layer_context(i: int, layer: CpuLayer, sources: list[tuple[str, int]]) -> dict[str, Any]:
    """What the template needs of layer `i` (`sources`: the buffers it reads and their sizes)."""
    bits = "32" if layer.out_bits == 32 else "8"
    kind = f"{layer.kind}{bits}"
    out = f"out_{i}"
    shape = ""
    source, inputs = sources[0]
    if layer.kind in ("conv", "convt", "pool"):
        shape = _shape(layer)
    calls = []
    if layer.kind in ("add", "sub", "mul", "concat"):
        calls = _combined_calls(layer, out, sources)
        kind = {"sub": "add8", "concat": "rescale8"}.get(layer.kind, kind)
        args = ""
    elif layer.kind == "linear":
        args = f"{source}, {inputs}, weight_{i}, bias_{i}, {layer.size}, "
        args += f"{out}" if bits == "32" else f"{layer.mult}, {layer.shift}, {out}"
    elif layer.kind in ("conv", "convt"):
        args = f"{source}, &shape_{i}, weight_{i}, bias_{i}, "
        args += f"{out}" if bits == "32" else f"{layer.mult}, {layer.shift}, {out}"
    elif layer.kind == "pool":
        avg = int(layer.pool == "avg")
        args = f"{source}, &shape_{i}, {avg}, {layer.mult}, {layer.shift or 1}, {out}"
    elif layer.kind in ("requantize", "leaky", "rescale"):
        args = f"{source}, {layer.size}, {layer.mult}, {layer.shift}, {out}"
    elif layer.kind == "lut":
        args = f"{source}, {layer.size}, table_{i}, {out}"
    else:
        args = f"{source}, {layer.size}, {out}"
    ctx: dict[str, Any] = {
        "kind": layer.kind,
        "key": kind,
        "node": layer.nodes[0] if layer.nodes else layer.name,
        "size": layer.size,
        "inputs": inputs,
        "type": _c_type(layer.out_bits),
        "function": layer.function,
        "calls": calls or [f"{kind}({args})"],
        "shape": shape,
    }
    if layer.weight is not None and layer.bias is not None:
        ctx["weight_lines"] = _lines(layer.weight)
        ctx["weights"], ctx["biases"] = layer.weight.size, layer.bias.size
        ctx["bias_lines"] = _lines(layer.bias, 8)
    if layer.table is not None:
        ctx["table_lines"] = _lines(layer.table)
    return ctx


def render_cpu_part(
    program: CpuProgram,
    name: str,
    device: str,
    expected: np.ndarray | None,
    alone: bool = False,
    back: bool = False,
) -> dict[str, str]:
    """`cpu_part.c` and `cpu_part.h`; `expected`: the known answer's result (None: no check);
    `alone`: the whole network, no accelerator layers before it (--cpu-only); `back`: the
    accelerator takes the result back (`cpu_part()` is segment2.c's)."""
    from edgesynth.targets.max7800x.emit.project import render

    layers = []
    buffers = {-1: ("in", program.in_size)}
    for i, layer in enumerate(program.layers):
        layers.append(_layer_context(i, layer, [buffers[k] for k in layer.inputs(i)]))
        buffers[i] = (f"out_{i}", layer.size)
    source = buffers[len(program.layers) - 1][0]
    context = {
        "name": name,
        "device": device,
        "alone": alone,
        "program": program,
        "layers": layers,
        "kinds": {layer["key"] for layer in layers},
        "in_type": _c_type(program.in_bits),
        "out_type": _c_type(program.out_bits),
        "result": source,
        "estimate": estimate_lines(program),
        "kat": expected is not None,
        "back": back,
        "expected_lines": [] if expected is None else _lines(expected),
    }
    return {
        "cpu_part.c": render("cpu_part.c.j2", **context),
        "cpu_part.h": render("cpu_part.h.j2", **context),
    }
