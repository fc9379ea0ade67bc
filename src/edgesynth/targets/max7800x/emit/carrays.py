"""C initializers for large arrays, formatted with NumPy (no Python loop per element).

`define(name, values, digits)` gives `#define NAME { \\ ... }`: hexadecimal values of `digits`
digits, `per_line` per line, each line continued with a backslash.
"""

from __future__ import annotations

import numpy as np

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_items(values: np.ndarray, digits: int) -> np.ndarray:
    """(n, digits + 4) bytes per value: b'0x' + hex digits + b', '."""
    v = np.asarray(values).astype(np.uint64) & np.uint64((1 << (4 * digits)) - 1)
    shifts = np.arange(digits - 1, -1, -1, dtype=np.uint64) * np.uint64(4)
    nibbles = ((v[:, None] >> shifts[None, :]) & np.uint64(0xF)).astype(np.intp)
    out = np.empty((v.size, digits + 4), dtype=np.uint8)
    out[:, 0] = ord("0")
    out[:, 1] = ord("x")
    out[:, 2 : 2 + digits] = _HEX[nibbles]
    out[:, -2] = ord(",")
    out[:, -1] = ord(" ")
    return out


def initializer(values: np.ndarray, digits: int = 8, per_line: int = 8, indent: str = "  ") -> str:
    """The body of a brace initializer: comma-separated values, continued lines."""
    values = np.asarray(values).reshape(-1)
    if values.size == 0:
        return ""
    items = hex_items(values, digits)
    width = items.shape[1]
    flat = items.reshape(-1)
    text = flat.tobytes()[:-2].decode("ascii")  # drop the final ", "
    step = width * per_line
    lines = [text[i : i + step].rstrip() for i in range(0, len(text), step)]
    return (" \\\n" + indent).join(lines)


def define(name: str, values: np.ndarray, digits: int = 8, per_line: int = 8) -> str:
    """`#define NAME { \\ <values> \\ }` as the vendor's headers spell their arrays."""
    return f"#define {name} {{ \\\n  {initializer(values, digits, per_line)} \\\n}}\n"
