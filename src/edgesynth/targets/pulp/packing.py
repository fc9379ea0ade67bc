"""Bytes as the generated C stores them: containers of 2, 4, 8, 16 or 32 bits, sub-byte values
packed least significant first, wider ones little endian; per-channel parameters as little
endian 32- or 64-bit integers. Vectorized with NumPy."""

from __future__ import annotations

import numpy as np

from edgesynth.targets.pulp.lower import Storage


def pack(values: np.ndarray, storage: Storage) -> bytes:
    """Flat integers -> the bytes of `storage` containers (values must fit)."""
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    if v.size and (v.min() < storage.lo or v.max() > storage.hi):
        raise ValueError(f"values {v.min()}..{v.max()} do not fit {storage}")
    bits = storage.bits
    if bits >= 8:
        return v.astype(f"<i{bits // 8}" if storage.signed else f"<u{bits // 8}").tobytes()
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    padded = np.zeros(-(-v.size // per_byte) * per_byte, dtype=np.int64)
    padded[: v.size] = v & mask
    grouped = padded.reshape(-1, per_byte) << (np.arange(per_byte) * bits)
    return grouped.sum(axis=1).astype(np.uint8).tobytes()


def unpack(data: bytes | np.ndarray, storage: Storage, count: int) -> np.ndarray:
    """The first `count` values of `storage` containers in `data`, as int64."""
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    bits = storage.bits
    if bits >= 8:
        dtype = f"<i{bits // 8}" if storage.signed else f"<u{bits // 8}"
        return raw[: count * bits // 8].view(dtype).astype(np.int64)
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    fields = (raw[:, None].astype(np.int64) >> (np.arange(per_byte) * bits)) & mask
    out = fields.reshape(-1)[:count]
    if storage.signed:
        out = np.where(out >= 1 << (bits - 1), out - (1 << bits), out)
    return out


def to_hwc(x: np.ndarray) -> np.ndarray:
    """Per-sample (C, H, W), (C, L) or (C,) data flattened in H, W, C order."""
    if x.ndim == 3:
        return x.transpose(1, 2, 0).reshape(-1)
    if x.ndim == 2:
        return x.transpose(1, 0).reshape(-1)
    return x.reshape(-1)


def from_hwc(flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of `to_hwc` for a per-sample shape (C, H, W), (C, L) or (C,)."""
    if len(shape) == 3:
        c, h, w = shape
        return flat.reshape(h, w, c).transpose(2, 0, 1)
    if len(shape) == 2:
        c, length = shape
        return flat.reshape(length, c).transpose(1, 0)
    return flat.reshape(shape)


def param_bytes(arr: np.ndarray, width: int) -> bytes:
    return np.asarray(arr, dtype=np.int64).astype("<i4" if width == 4 else "<i8").tobytes()
