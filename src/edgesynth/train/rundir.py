"""Run folders: every training run writes into a new folder and never overwrites another."""

from __future__ import annotations

import time
from pathlib import Path

from edgesynth.errors import EdgesynthError


def new_run_dir(root: Path, name: str | None = None) -> Path:
    """`root/<name or date-time>`, with `-1`, `-2`, ... appended if that exists already."""
    stem = name or time.strftime("%Y.%m.%d-%H%M%S")
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
    raise EdgesynthError(f"too many runs named {stem} in {root}.")
