"""DRAM layout: where each piece goes, and how tensors are laid out in bytes.

Data layouts (all little-endian, signed):

* Feature maps, NHW8C8: channels in groups of 8, pixels (row-major H x W) in blocks of 8. A
  block is 8 channels x 8 pixels, channel-major: element (c, p) of a C x (H*W) map with
  E-byte elements is at
  ``((c // 8) * ceil(H*W / 8) + p // 8) * 64 * E + ((c % 8) * 8 + p % 8) * E``.
  Missing channels and pixels of the last group/block are zero.
* Vectors (FC inputs/outputs): consecutive elements, padded with zeros to a 32-bit word.
* CONV weights: for each kernel iteration k (8 filters) and channel iteration c (8 input
  channels), 8 engines x 9 rows x 8 columns of int8: engine e holds input channel 8c + e, row r
  is kernel tap r (row-major over KH x KW, zero past KH*KW), column j is filter 8k + j.
* FC weights: the N x M matrix (input feature x output) padded with zero columns to a multiple
  of P = 32, stored as ceil(M/32) column blocks of N rows x 32 int8.
* Bias: one 8-bit or 32-bit value per output channel, channels padded with zeros to a whole
  kernel iteration (8 for CONV, 32 for FC).
* Accumulants: int32 partial sums of one kernel iteration, NHW8C8 (one channel group).

Regions start at 32-byte boundaries: instructions at GATI_INST_ORG (0), then weights, biases,
the input, every layer's output, and the shared accumulant buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati import device

BLOCK = device.PIXEL_BLOCK * device.CHANNEL_BLOCK  # elements per NHW8C8 block
# 576 weights per (k, c) iteration
CONV_TILE = device.ENGINES * device.ENGINE_ROWS * device.ENGINE_COLS


def map_bytes(channels: int, pixels: int, elem: int) -> int:
    return device.cdiv(channels, 8) * device.cdiv(pixels, 8) * BLOCK * elem


def vector_bytes(n: int, elem: int) -> int:
    return device.align(n * elem, device.WORD_BYTES)


def _dtype(elem: int) -> np.dtype:
    return np.dtype("<i1") if elem == 1 else np.dtype("<i4")


def pack_map(x: np.ndarray, elem: int) -> np.ndarray:
    """(B, C, H, W) integers -> (B, bytes) uint8 in NHW8C8."""
    b, c, h, w = x.shape
    cg, pb = device.cdiv(c, 8), device.cdiv(h * w, 8)
    buf = np.zeros((b, cg * 8, pb * 8), dtype=_dtype(elem))
    buf[:, :c, : h * w] = x.reshape(b, c, h * w)
    blocks = buf.reshape(b, cg, 8, pb, 8).transpose(0, 1, 3, 2, 4)  # (B, cg, pb, 8c, 8p)
    return np.ascontiguousarray(blocks).view(np.uint8).reshape(b, -1)


def unpack_map(buf: np.ndarray, c: int, h: int, w: int, elem: int) -> np.ndarray:
    """(B, bytes) uint8 in NHW8C8 -> (B, C, H, W) int64."""
    b = buf.shape[0]
    cg, pb = device.cdiv(c, 8), device.cdiv(h * w, 8)
    n = map_bytes(c, h * w, elem)
    vals = np.ascontiguousarray(buf[:, :n]).view(_dtype(elem)).reshape(b, cg, pb, 8, 8)
    flat = vals.transpose(0, 1, 3, 2, 4).reshape(b, cg * 8, pb * 8)
    return flat[:, :c, : h * w].reshape(b, c, h, w).astype(np.int64)


def pack_vector(x: np.ndarray, elem: int) -> np.ndarray:
    """(B, N) integers -> (B, bytes) uint8, padded to a 32-bit word."""
    b, n = x.shape
    out = np.zeros((b, vector_bytes(n, elem)), dtype=np.uint8)
    out[:, : n * elem] = np.ascontiguousarray(x.astype(_dtype(elem))).view(np.uint8)
    return out


def unpack_vector(buf: np.ndarray, n: int, elem: int) -> np.ndarray:
    return np.ascontiguousarray(buf[:, : n * elem]).view(_dtype(elem)).astype(np.int64)


def pack_conv_weights(w: np.ndarray) -> bytes:
    """(KN, IC, KH, KW) int8 weights -> [k][c][engine][row][col] tiles."""
    kn, ic, kh, kw = w.shape
    ki, ci = device.cdiv(kn, 8), device.cdiv(ic, 8)
    taps = np.zeros((ki * 8, ci * 8, device.ENGINE_ROWS), dtype=np.int8)
    taps[:kn, :ic, : kh * kw] = w.reshape(kn, ic, kh * kw)
    tiles = taps.reshape(ki, 8, ci, 8, device.ENGINE_ROWS).transpose(0, 2, 3, 4, 1)
    return np.ascontiguousarray(tiles).tobytes()


def pack_fc_weights(w: np.ndarray) -> bytes:
    """(M, N) int8 weights (output x input) -> ceil(M/32) blocks of N x 32."""
    m, n = w.shape
    blocks = device.cdiv(m, device.FC_WIDTH)
    mat = np.zeros((n, blocks * device.FC_WIDTH), dtype=np.int8)
    mat[:, :m] = w.T
    return np.ascontiguousarray(
        mat.reshape(n, blocks, device.FC_WIDTH).transpose(1, 0, 2)
    ).tobytes()


def pack_bias(b: np.ndarray, width: int, padded: int) -> bytes:
    out = np.zeros(padded, dtype=np.int8 if width == 8 else np.dtype("<i4"))
    out[: b.size] = b
    data = out.tobytes()
    return data + b"\0" * ((-len(data)) % device.WORD_BYTES)


@dataclass
class Region:
    name: str
    kind: str  # instructions | weights | bias | input | output | accumulants
    start: int
    size: int
    layer: int | None = None

    @property
    def end(self) -> int:
        """One past the last byte (the End*Address fields hold this value)."""
        return self.start + self.size

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "layer": self.layer,
            "start": self.start,
            "end": self.end,
            "size": self.size,
        }


class Planner:
    """Hands out 32-byte aligned DRAM regions in order."""

    def __init__(self, origin: int = device.INST_ORIGIN) -> None:
        self.next = origin
        self.regions: list[Region] = []

    def add(self, name: str, kind: str, size: int, layer: int | None = None) -> Region:
        start = device.align(self.next, device.DRAM_ALIGN)
        region = Region(name, kind, start, size, layer)
        self.next = start + size
        if self.next > 0xFFFFFFFF:
            raise EdgesynthError(
                f"the DRAM layout needs {self.next} bytes, more than 32-bit addresses reach"
            )
        self.regions.append(region)
        return region

    @property
    def total(self) -> int:
        return device.align(self.next, device.DRAM_ALIGN)
