"""Hardware layers of a YAML description (marked `cpu: true`, `description/cpu_marks.py`) as
the CPU part's integer layers: what the accelerator would compute for them, bit-exact.

Per hardware layer, in the MAX7800x's order: in-flight max pooling (a `pool` layer), the
convolution or linear layer on the pooled 8-bit input (a `conv` or `linear` layer: the
checkpoint's integer weights, the bias x 128 in the accumulator), its 8-bit output
clamp(floor(acc x 2**shift / 128 + 1/2)) as the CPU part's requantization (mult 2**k and
right shift 7 - shift + k, k >= 0 so that the shift is at least 1), or the raw accumulator for
a 32-bit output; then ReLU (the 8-bit output clamped to 0..127 is max(x, 0)). A flattened
layer's input is the channel-major buffer as it is (C x H x W values, the accelerator's
flatten order).
"""

from __future__ import annotations

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.cpu.program import CpuLayer, CpuProgram
from edgesynth.targets.max7800x.description.network import Layer, Network

Shape = tuple[int, int, int]


def requantizer(output_shift: int) -> tuple[int, int]:
    """(mult, shift) with clamp((acc x mult + 2**(shift-1)) >> shift) equal to the
    accelerator's clamp(floor(acc x 2**output_shift / 128 + 1/2))."""
    up = output_shift - 7  # the accelerator's net left shift
    return (1, -up) if up < 0 else (1 << (up + 1), 1)


def lower_layers(network: Network, first: int, softmax: bool) -> tuple[CpuProgram, Shape]:
    """The CPU program of the network's layers `first`.. (reading layer `first - 1`'s output,
    8-bit, as cnn_unload() leaves it) and its result's shape (C, H, W); `softmax`: the
    project's softmax runs on its result."""
    before = network.layers[first - 1]
    shape: Shape = (before.out_channels, *before.out_dim)
    layers: list[CpuLayer] = []
    for layer in network.layers[first:]:
        shape = _lower(layer, shape, layers)
    program = CpuProgram(
        in_shape=(before.out_channels, *before.out_dim),
        in_bits=8,
        in_scale=1.0,
        layers=layers,
        out_scale=1.0,
        softmax=softmax,
    )
    return program, shape


def _lower(layer: Layer, shape: Shape, out: list[CpuLayer]) -> Shape:
    """Append `layer`'s CPU layers to `out`; returns its output's shape."""
    name = layer.name
    if layer.spec.in_dim is not None:  # the same values viewed as other dimensions
        dims = layer.spec.in_dim
        shape = (int(np.prod(shape)) // int(np.prod(dims)), *dims)
    if layer.pool != (1, 1) or layer.pool_stride != (1, 1):
        shape = _pool(layer, shape, out)
    if layer.operation != "none":
        shape = _weighted(layer, shape, out)
    if layer.activation == "relu":
        size = int(np.prod(shape))
        out.append(CpuLayer(f"{name}/relu", "relu", size, nodes=[f"{name} (ReLU)"]))
    return shape


def _pool(layer: Layer, shape: Shape, out: list[CpuLayer]) -> Shape:
    """In-flight max pooling (a pool of 1 with a stride subsamples)."""
    c, h, w = shape
    (ph, pw), (sh, sw) = layer.pool, layer.pool_stride
    pooled = (c, (h - ph) // sh + 1, (w - pw) // sw + 1)
    pool = CpuLayer(f"{layer.name}/pool", "pool", int(np.prod(pooled)), pool="max",
                    kernel=[ph, pw], stride=[sh, sw], dilation=[1, 1], pads=[0, 0, 0, 0],
                    in_shape=list(shape), out_shape=list(pooled),
                    nodes=[f"{layer.name} (max pool)"])  # fmt: skip
    out.append(pool)
    return pooled


def _weighted(layer: Layer, shape: Shape, out: list[CpuLayer]) -> Shape:
    """The convolution or linear layer, requantized (or its 32-bit accumulator)."""
    if layer.weights is None:
        raise layer.error(f"{layer.name} has no weights for the Cortex-M4 part", key="cpu")
    weights = np.asarray(layer.weights, np.int64)
    outputs = weights.shape[0]
    bias = np.zeros(outputs, np.int64) if layer.bias is None else layer.bias[:outputs] * 128
    c, h, w = shape
    linear = layer.flatten or (layer.operation == "linear" and (h, w) == (1, 1))
    wanted = c * h * w if linear else c // layer.groups * int(np.prod(layer.kernel_size))
    if weights[0].size != wanted:
        raise layer.error(
            f"its {weights[0].size} weights per output do not match its {c}x{h}x{w} input on "
            "the Cortex-M4 (check `in_channels`, `flatten` and the checkpoint)",
            key="cpu",
        )
    if linear:
        new: Shape = (outputs, 1, 1)
        cpu = CpuLayer(layer.name, "linear", outputs, weight=weights.reshape(outputs, -1))
    else:
        (kh, kw), (sh, sw), (dh, dw) = layer.kernel_size, layer.stride, layer.dilation
        (py, px) = layer.pad
        new = (outputs, (h + 2 * py - dh * (kh - 1) - 1) // sh + 1,
               (w + 2 * px - dw * (kw - 1) - 1) // sw + 1)  # fmt: skip
        cpu = CpuLayer(layer.name, "conv", int(np.prod(new)), in_shape=list(shape),
                       out_shape=list(new), kernel=[kh, kw], stride=[sh, sw],
                       dilation=[dh, dw], pads=[py, px, py, px], groups=layer.groups,
                       weight=weights.reshape(outputs, c // layer.groups, kh, kw))  # fmt: skip
    cpu.bias, cpu.nodes = np.asarray(bias, np.int64), [layer.name]
    inputs = int(np.prod(cpu.weight.shape[1:]))  # type: ignore[union-attr]
    if inputs * 128 * 128 + int(np.abs(cpu.bias).max(initial=0)) >= 2**31:
        raise EdgesynthError(
            f"{layer.name}: its 32-bit accumulator could overflow on the Cortex-M4 "
            f"({inputs:,} inputs per output)"
        )
    if layer.output_width == 32:
        cpu.out_bits = 32
    else:
        cpu.mult, cpu.shift = requantizer(layer.output_shift)
    out.append(cpu)
    return new
