"""Run folders: every training run writes into a new folder and never overwrites another.

Files inside are written one at a time, atomically (`edgesynth.outputs.write_file_atomic`),
so an interrupted run keeps exactly the checkpoints it had completed. A run that fails or is
interrupted before its first checkpoint leaves nothing behind: not its folder, not the
`--out-dir` folders it created.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edgesynth.errors import EdgesynthError

CHECKPOINT_SUFFIX = ".pth.tar"


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or os.sep in name:
        raise EdgesynthError(
            f"`{name}` is not a folder name; --name takes a plain name (no `/`).", key="--name"
        )


def new_run_dir(root: Path, name: str | None = None) -> Path:
    """`root/<name or date-time>`, with `-1`, `-2`, ... appended if that exists already."""
    stem = name or time.strftime("%Y.%m.%d-%H%M%S")
    _check_name(stem)
    if root.exists() and not root.is_dir():
        raise EdgesynthError(f"{root} is a file, not a folder.", key="--out-dir")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EdgesynthError(f"cannot create {root}: {err.strerror or err}.") from None
    for i in range(1000):
        candidate = root / (stem if i == 0 else f"{stem}-{i}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
        except OSError as err:
            raise EdgesynthError(f"cannot create {candidate}: {err.strerror or err}.") from None
    raise EdgesynthError(f"too many runs named {stem} in {root}.")


def _missing_ancestors(folder: Path) -> list[Path]:
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing  # deepest first


@contextmanager
def run_folder(root: Path, name: str | None = None) -> Iterator[Path]:
    """A new run folder under `root`; removed again (with the `root` folders this created) if
    the block fails before a checkpoint was completed in it."""
    created_roots = _missing_ancestors(Path(root))
    run_dir = new_run_dir(Path(root), name)
    try:
        yield run_dir
    except BaseException:
        if not any(run_dir.glob(f"*{CHECKPOINT_SUFFIX}")):
            # Made by this run a moment ago (exclusive mkdir): everything in it is the run's.
            shutil.rmtree(run_dir, ignore_errors=True)
            for folder in created_roots:
                try:
                    folder.rmdir()
                except OSError:
                    break
        raise
