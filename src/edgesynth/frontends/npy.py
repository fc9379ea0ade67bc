"""NumPy `.npy` files the user gives: consecutive `np.save` arrays, and sample inputs.

Anything that is not a complete `.npy` array is one message naming the file, what the bytes
look like (text, a PyTorch checkpoint, a compressed archive) and the array's position.
"""

from __future__ import annotations

import os
from os import PathLike
from pathlib import Path
from typing import BinaryIO

import numpy as np

from edgesynth.errors import EdgesynthError

__all__ = [
    "NPY_MAGIC",
    "checked_sample",
    "integer_array",
    "load_npy_arrays",
    "load_sample",
    "not_npy_reason",
]


def _open_checked(path: Path, what: str) -> BinaryIO:
    if not path.exists():
        raise EdgesynthError(f"{what} file does not exist", file=str(path))
    if path.is_dir():
        raise EdgesynthError(f"{what} file is a directory", file=str(path))
    try:
        return path.open("rb")
    except OSError as exc:
        detail = exc.strerror or str(exc)
        raise EdgesynthError(f"cannot read {what} file: {detail}", file=str(path)) from None


NPY_MAGIC = b"\x93NUMPY"


def not_npy_reason(head: bytes) -> str | None:
    """Why bytes that start a file are not a `.npy` array (None when they are): named by
    what they look like (text, a PyTorch checkpoint, a compressed archive...)."""
    if head.startswith(NPY_MAGIC):
        return None
    if head.startswith(b"PK\x03\x04"):
        return "it is a zip archive (a PyTorch checkpoint or an .npz file), not a .npy array"
    if head[:1] == b"\x80":
        return "it is a Python pickle (a legacy PyTorch checkpoint?), not a .npy array"
    if head.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed; decompress it first"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\r\n\t" for c in text):
        first = text.strip().splitlines()[0][:40] if text.strip() else ""
        return (
            f"it is a text file (it begins `{first}`), not a binary .npy array; "
            "write arrays with np.save"
        )
    return "it does not start with the .npy header (\\x93NUMPY); write arrays with np.save"


def load_npy_arrays(path: str | PathLike[str], *, what: str = "NumPy") -> list[np.ndarray]:
    """Every array in a file of consecutive `np.save` arrays, in order (none for an empty file).

    Pickled (object) arrays are refused; anything that is not a complete `.npy` array raises
    EdgesynthError naming the file and the array's position.
    """
    path = Path(path)
    arrays: list[np.ndarray] = []
    with _open_checked(path, what) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size:
            reason = not_npy_reason(stream.read(64))
            if reason:
                raise EdgesynthError(f"{what} file is not a .npy array: {reason}", file=str(path))
            stream.seek(0)
        while stream.tell() < size:
            start = stream.tell()
            try:
                arrays.append(np.load(stream, allow_pickle=False))
            except Exception as exc:  # any failure here means a damaged or foreign file
                where = f"array {len(arrays)} (byte {start})" if arrays else "the file"
                detail = str(exc).split("\n")[0] or type(exc).__name__
                raise EdgesynthError(
                    f"{where} is not a valid .npy array ({detail})", file=str(path)
                ) from None
    return arrays


def integer_array(array: np.ndarray, *, what: str, file: str) -> np.ndarray:
    kind = array.dtype.kind
    if kind in "iub":
        return array.astype(np.int64)
    if kind == "f" and np.all(np.isfinite(array)) and np.array_equal(np.trunc(array), array):
        return array.astype(np.int64)
    raise EdgesynthError(f"{what} must hold integers, found {array.dtype} values", file=file)


def load_sample(path: str | PathLike[str]) -> np.ndarray:
    """A sample input (C x H x W or C x L) as int64, every value a signed 8-bit number."""
    path = Path(path)
    arrays = load_npy_arrays(path, what="sample input")
    if not arrays:
        raise EdgesynthError("sample input file holds no array (it is empty)", file=str(path))
    return checked_sample(arrays[0], str(path))


def checked_sample(array: np.ndarray, file: str) -> np.ndarray:
    """A sample input (C x H x W or C x L) as int64, every value a signed 8-bit number;
    problems name `file`."""
    data = integer_array(array, what="sample input data", file=file)
    if data.ndim not in (2, 3):
        raise EdgesynthError(
            f"sample input must be C x H x W or C x L, found shape {list(data.shape)}", file=file
        )
    if data.size and (data.min() < -128 or data.max() > 127):
        raise EdgesynthError(
            f"sample input contains values outside the limits of signed 8-bit "
            f"(min={int(data.min())}, max={int(data.max())})",
            file=file,
        )
    return data
