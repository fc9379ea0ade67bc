"""Write results so that a failed run never leaves half a file or half a folder behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError


def npy_path(path: Path) -> Path:
    """np.save's naming: a `.npy` suffix is added when missing."""
    return path if path.suffix == ".npy" else path.with_name(path.name + ".npy")


def save_npy_atomic(path: Path, array: np.ndarray) -> Path:
    """Save `array` to `path` (.npy added like np.save does) via a temporary file + rename."""
    target = npy_path(Path(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npy", dir=target.parent)
        with os.fdopen(fd, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, target)
    except OSError as err:
        raise EdgesynthError(f"cannot write {target}: {err.strerror or err}") from None
    return target


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces `target`'s contents."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    except OSError as err:
        raise EdgesynthError(f"cannot create {target}: {err.strerror or err}") from None
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
