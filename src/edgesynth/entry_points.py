"""Entry points of one group, read from the installed packages' metadata without
`importlib.metadata` (which costs `edgesynth --help` about 50 ms of CPU to load and scan).

It reads what `importlib.metadata.entry_points(group=...)` reads for packages installed in
folders on `sys.path`: each `NAME-VERSION.dist-info/entry_points.txt` (and `.egg-info`), the
first distribution of a name winning, in `sys.path` order. tests/cli/test_entry_points.py
checks that both find the same entry points.
"""

from __future__ import annotations

import os
import sys

from edgesynth.lean_dataclass import dataclass


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str  # "module:attribute" (or "module")
    distribution: str  # the distribution that declares it (its metadata folder's name)

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    @property
    def attribute(self) -> str | None:
        return self.value.partition(":")[2].strip() or None


def entry_points(group: str) -> list[EntryPoint]:
    """Every entry point of `group` that the installed distributions declare."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for folder in sys.path:
        for meta in _metadata_folders(folder or "."):
            name = _distribution(os.path.basename(meta))
            if name in seen:
                continue
            seen.add(name)
            found += _read(os.path.join(meta, "entry_points.txt"), group, name)
    return found


def _metadata_folders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.name.endswith((".dist-info", ".egg-info")))
    except OSError:  # not a folder (a zip file on sys.path), or unreadable
        return []
    return [os.path.join(folder, n) for n in names]


def _distribution(folder_name: str) -> str:
    """`Foo_Bar-1.0.dist-info` -> `foo_bar` (the name importlib.metadata compares)."""
    stem = folder_name.rsplit(".", 1)[0]
    return stem.split("-")[0].lower().replace(".", "_")


def _read(path: str, group: str, distribution: str) -> list[EntryPoint]:
    """The entries of section `[group]` of an entry_points.txt (INI: `name = value`)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    if f"[{group}]" not in text:
        return []
    found: list[EntryPoint] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            value = value.split("[")[0].strip()  # drop extras: `module:attr [extra]`
            found.append(EntryPoint(name.strip(), value, distribution))
    return found
