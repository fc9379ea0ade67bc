"""The user's YAML with the chosen placement keys added, every other line kept as written.

Each layer entry gets the keys edgesynth chose inserted after its last line of content (so after
a multi-line value; comments and blank lines that follow stay where they are), at the
indentation of its keys.
Keys the YAML already has are never touched. A layer written in flow style (`- {op: ...}`) gets
its keys added inside the braces.
"""

from __future__ import annotations

import re

import yaml

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.spec import NetworkSpec
from edgesynth.targets.max7800x.placement import PLACEMENT_KEYS

_ENTRY = re.compile(r"^(\s*)-(\s+)(.*)$")


def format_value(key: str, value: int) -> str:
    if key in ("processors", "output_processors"):
        return f"0x{value:016x}"
    if key in ("in_offset", "out_offset"):
        return f"0x{value:04x}"
    return str(value)


def _key_indent(lines: list[str], first: int, last: int) -> str:
    """The indentation of the keys of the layer entry spanning lines first..last (0-based)."""
    m = _ENTRY.match(lines[first])
    if m and m.group(3) and not m.group(3).startswith("#"):
        return " " * (len(m.group(1)) + 1 + len(m.group(2)))
    for line in lines[first + 1 : last + 1]:
        stripped = line.lstrip()
        if stripped and not stripped.startswith("#"):
            return line[: len(line) - len(stripped)]
    base = len(m.group(1)) if m else 0
    return " " * (base + 2)


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _entry_end(lines: list[str], first: int, following: int | None) -> int:
    """The last line (0-based) holding content of the entry that starts at `first`."""
    if following is None:
        dash = len(lines[first]) - len(lines[first].lstrip())
        following = first + 1
        while following < len(lines) and (
            not _content(lines[following])
            or len(lines[following]) - len(lines[following].lstrip()) > dash
        ):
            following += 1
    last = following - 1
    while last > first and not _content(lines[last]):
        last -= 1
    return last


def with_placement(
    text: str, spec: NetworkSpec, chosen: dict[int, dict[str, int]], path: str
) -> str:
    """`text` (the YAML `spec` was read from) with the `chosen` keys of each layer added."""
    return with_keys(text, [layer.line for layer in spec.layers], chosen, path)


def with_keys(text: str, entries: list[int], chosen: dict[int, dict[str, int]], path: str) -> str:
    """`text` with the `chosen` keys of each layer added; `entries`: the line (1-based) of each
    layer entry's `- `, in the order of the YAML's `layers`."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    inserts: dict[int, list[str]] = {}  # 0-based line -> lines to add after it
    for index, values in sorted(chosen.items()):
        if not values:
            continue
        first = entries[index] - 1
        following = entries[index + 1] - 1 if index + 1 < len(entries) else None
        last = _entry_end(lines, first, following)
        entry = lines[first]
        m = _ENTRY.match(entry)
        if m and m.group(3).lstrip().startswith("{"):
            if first != last or "}" not in entry:
                raise EdgesynthError(
                    "a layer written in flow style over several lines cannot take added keys; "
                    "write it in block style (one key per line).",
                    file=path,
                    line=entries[index],
                )
            added = ", ".join(f"{k}: {format_value(k, v)}" for k, v in values.items())
            close = entry.rindex("}")
            lines[first] = entry[:close].rstrip() + f", {added}" + entry[close:]
            continue
        indent = _key_indent(lines, first, last)
        inserts[last] = [f"{indent}{k}: {format_value(k, v)}\n" for k, v in values.items()]
    result: list[str] = []
    for i, line in enumerate(lines):
        result.append(line)
        result.extend(inserts.get(i, []))
    return "".join(result)


def without_placement(text: str) -> str:
    """A YAML description with every placement key (and the global `output_map`) removed:
    what edgesynth is asked to place (the corpus checks and benchmarks start from it)."""
    data = yaml.safe_load(text)
    for layer in data.get("layers") or []:
        for key in PLACEMENT_KEYS:
            layer.pop(key, None)
    data.pop("output_map", None)
    return yaml.safe_dump(data, sort_keys=False)
