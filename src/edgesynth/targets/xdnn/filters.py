"""The filter image (`filters.bin`) the engine reads from DDR: per convolution its weights and
its per-channel scale/shift/bias block.

Weights (seed): 16-bit values; the input depth made even; the output depth padded to the next
multiple of 32; the padded 4-D matrix flattened row-major as (output, input, kernel row,
kernel column) (edgesynth's order). Per-channel block (edgesynth): for every one of the padded
output channels four int16 words: pre-shift, scale, post-shift, bias. Every block starts on a
64-byte boundary; values are little-endian.
"""

from __future__ import annotations

import numpy as np

from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.layers import XLayer


def _align(n: int) -> int:
    return -(-n // dev.DDR_ALIGN) * dev.DDR_ALIGN


def padded_out(o: int) -> int:
    return -(-o // dev.FILTER_OUTPUT_MULTIPLE) * dev.FILTER_OUTPUT_MULTIPLE


def padded_in(i: int) -> int:
    return i + (i & 1)


def weight_block(layer: XLayer) -> bytes:
    w = layer.weight
    assert w is not None
    o, i, kh, kw = w.shape
    out = np.zeros((padded_out(o), padded_in(i), kh, kw), dtype="<i2")
    out[:o, :i] = w
    return out.tobytes()


def quant_block(layer: XLayer) -> bytes:
    assert layer.weight is not None and layer.pre is not None
    o = layer.weight.shape[0]
    rec = np.zeros((padded_out(o), 4), dtype="<i2")
    rec[:o, 0] = layer.pre
    rec[:o, 1] = layer.scale
    rec[:o, 2] = layer.post
    rec[:o, 3] = layer.bias
    return rec.tobytes()


def pack_filters(layers: list[XLayer]) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """The image and, per convolution layer name, (weights offset, per-channel block offset)."""
    blob = bytearray()
    offsets: dict[str, tuple[int, int]] = {}
    for layer in layers:
        if layer.op != "XNConv":
            continue
        w_off = len(blob)
        blob += weight_block(layer)
        blob += bytes(_align(len(blob)) - len(blob))
        q_off = len(blob)
        blob += quant_block(layer)
        blob += bytes(_align(len(blob)) - len(blob))
        offsets[layer.name] = (w_off, q_off)
    return bytes(blob), offsets
