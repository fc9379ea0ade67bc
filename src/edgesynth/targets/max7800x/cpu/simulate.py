"""The CPU part's integer arithmetic in NumPy: the reference the generated C must equal value
for value (`cpu_part.c`; compile's proof builds it for the host and compares, `host.py`).

Rounding: a linear layer's requantization is (acc x mult + 2**(shift-1)) >> shift with an
arithmetic (flooring) shift, then saturation to -128..127: round half up, as the accelerator's
output shift rounds. An element-wise function (sigmoid, tanh, hardsigmoid, hardswish, swish,
mish) is one 256-entry table (`activation_table`), made here once and written into the C as
it is.
"""

from __future__ import annotations

import numpy as np

from edgesynth.sim.unary import UNARY, unary
from edgesynth.targets.max7800x.cpu.program import CpuLayer, CpuProgram

COMBINED = ("add", "sub", "mul", "concat")  # the kinds of several sources
TABLE_SCALE = 1.0 / 127  # the output step of a bounded function's table (1.0 is code 127)


def activation_table(
    function: str,
    in_scale: float,
    out_scale: float = TABLE_SCALE,
    alpha: float = 0.2,
    beta: float = 0.5,
) -> np.ndarray:
    """The int8 output code of `function` (`sim.unary`; `alpha`, `beta`: hardsigmoid's) for
    each int8 input code -128..127 (index code + 128): round half up of
    f(code x in_scale) / out_scale, saturated to -128..127."""
    if function not in UNARY:
        raise ValueError(f"no table for {function}")
    x = np.arange(-128, 128, dtype=np.float64) * in_scale
    y = unary(function, x, alpha, beta)
    return np.clip(np.floor(y / out_scale + 0.5), -128, 127).astype(np.int64)


def requantize(acc: np.ndarray, mult: int, shift: int) -> np.ndarray:
    """clamp((acc x mult + 2**(shift-1)) >> shift, -128, 127) in 64-bit integers."""
    v = (np.asarray(acc, dtype=np.int64) * mult + (1 << (shift - 1))) >> shift
    return np.clip(v, -128, 127)


def combine(layer: CpuLayer, xs: list[np.ndarray]) -> np.ndarray:
    """An element-wise (`add`, `sub`, `mul`) or `concat` layer on its sources' batches."""
    if layer.kind == "concat":
        parts = [requantize(x, m, s) for x, m, s in zip(xs, layer.mults, layer.shifts, strict=True)]
        return np.concatenate(parts, axis=1)
    a, b = xs
    if layer.kind == "mul":
        return requantize(a * b, layer.mult, layer.shift)
    sign = -1 if layer.kind == "sub" else 1
    return requantize(a * layer.mults[0] + sign * b * layer.mults[1], 1, layer.shift)


def run_layer(layer: CpuLayer, x: np.ndarray) -> np.ndarray:
    """One layer of one source on a batch (N, size) of int64 codes."""
    if layer.kind == "linear":
        assert layer.weight is not None and layer.bias is not None
        acc = x @ np.asarray(layer.weight, np.int64).T + np.asarray(layer.bias, np.int64)
        return acc if layer.out_bits == 32 else requantize(acc, layer.mult, layer.shift)
    if layer.kind in ("requantize", "rescale"):
        return requantize(x, layer.mult, layer.shift)
    if layer.kind == "relu":
        return np.maximum(x, 0)
    if layer.kind == "leaky":
        return np.where(x >= 0, x, requantize(x, layer.mult, layer.shift))
    if layer.kind in ("conv", "convt", "pool"):
        return _spatial(layer, x)
    if layer.kind == "lut":
        assert layer.table is not None
        return np.asarray(layer.table, np.int64)[x + 128]
    raise ValueError(f"unknown CPU layer kind {layer.kind}")


def _spatial(layer: CpuLayer, x: np.ndarray) -> np.ndarray:
    """A convolution or pooling on flat (N, C x H x W) values, flat again."""
    from edgesynth.targets.max7800x.cpu.spatial import conv2d, pool2d

    x = x.reshape(len(x), *layer.in_shape)
    if layer.kind in ("conv", "convt"):
        acc = conv2d(layer, x)
        out = acc if layer.out_bits == 32 else requantize(acc, layer.mult, layer.shift)
    else:
        out = pool2d(layer, x)
        out = out if layer.pool == "max" else requantize(out, layer.mult, layer.shift)
    return out.reshape(len(x), -1)


def layer_outputs(program: CpuProgram, x: np.ndarray) -> list[np.ndarray]:
    """Every layer's output (N, size) int64 for a batch of accelerator outputs (N, *in_shape)."""
    values = {-1: np.asarray(x, dtype=np.int64).reshape(len(x), -1)}
    for i, layer in enumerate(program.layers):
        xs = [values[k] for k in layer.inputs(i)]
        values[i] = combine(layer, xs) if layer.kind in COMBINED else run_layer(layer, xs[0])
    return [values[i] for i in range(len(program.layers))]


def simulate(program: CpuProgram, x: np.ndarray) -> np.ndarray:
    """The CPU part on a batch of accelerator outputs (N, *in_shape): (N, out_size) int64."""
    outputs = layer_outputs(program, x)
    return outputs[-1] if outputs else np.asarray(x, dtype=np.int64).reshape(len(x), -1)
