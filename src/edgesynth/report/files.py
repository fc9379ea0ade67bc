"""Reading the files a compile wrote, for a report: one message naming the file when one is
missing or unreadable."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError


def read_json(folder: Path, name: str) -> Any:
    """`folder/name` parsed; a missing or broken file is one message naming it."""
    path = Path(folder) / name
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise EdgesynthError(
            f"{folder} has no {name}, which the compiler writes there; compile again to make "
            "a report of it",
            file=str(path),
        ) from None
    except (OSError, ValueError) as err:
        raise EdgesynthError(f"cannot read it: {err}", file=str(path)) from None


def shape_text(shape: Iterable[int]) -> str:
    """(1, 28, 28) -> "1x28x28"."""
    return "x".join(str(int(d)) for d in shape)


def shapes_text(shapes: Iterable[Iterable[int]]) -> str:
    """Several inputs: "8x14x14 + 8x14x14"."""
    return " + ".join(shape_text(s) for s in shapes)
