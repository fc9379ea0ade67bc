"""A titled table as Rich prints it to a file that is not a terminal, without loading Rich.

`edgesynth izer --verbose` prints one table per run; importing Rich and laying the table out
costs more than most of the run (25-40 ms of 0.3 s). For plain tables (printable ASCII with no
Rich markup or emoji, nothing to wrap or shrink) the layout Rich gives is fixed: every column as
wide as its widest cell plus one space each side, heavy-head box edges, the title centred above.
`plain_table` writes exactly that, and returns None for anything else (the caller then prints
with Rich); tests/max7800x/test_text_table.py checks it against Rich, character for character.
"""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

Justify = Literal["left", "right"]
# Settings under which Rich prints differently to a file (colours, a notebook, terminal emulation)
_RICH_ENVIRONMENT = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - set("[]:\\")


def plain_output(stream: TextIO) -> bool:
    """Whether Rich would print to `stream` as plain text in UTF-8: not a terminal, no setting
    that forces colours or terminal behaviour, not inside a notebook."""
    return (
        not stream.isatty()
        and (getattr(stream, "encoding", None) or "").lower().startswith("utf")
        and not any(name in os.environ for name in _RICH_ENVIRONMENT)
        and not hasattr(builtins, "get_ipython")
    )


def _is_plain(text: str) -> bool:
    """Printable ASCII without Rich markup (`[`), emoji codes (`:`), escapes or spaces Rich
    could trim or wrap at (leading, trailing or doubled)."""
    return _PLAIN.issuperset(text) and text == text.strip() and "  " not in text


def plain_table(
    title: str,
    columns: Sequence[tuple[str, Justify]],
    rows: Sequence[Sequence[str]],
    max_width: int,
) -> str | None:
    """The table's lines as Rich's `Console(width=max_width).print(Table(title=...))` writes
    them to a plain file, or None where Rich would lay it out differently."""
    cells = [[name for name, _ in columns], *rows]
    if not all(_is_plain(text) for row in cells for text in row) or not _is_plain(title):
        return None
    widths = [max(len(row[i]) for row in cells) + 2 for i in range(len(columns))]
    width = sum(widths) + len(widths) + 1
    if width > max_width or len(title) > width or not title:
        return None

    def edge(left: str, line: str, cross: str, right: str) -> str:
        return left + cross.join(line * w for w in widths) + right

    def row_line(row: Sequence[str], bar: str) -> str:
        parts = []
        for text, w, (_, justify) in zip(row, widths, columns, strict=True):
            parts.append(" " + (text.rjust if justify == "right" else text.ljust)(w - 2) + " ")
        return bar + bar.join(parts) + bar

    excess = width - len(title)
    lines = [" " * (excess // 2) + title + " " * (excess - excess // 2)]
    lines += [edge("┏", "━", "┳", "┓"), row_line(cells[0], "┃"), edge("┡", "━", "╇", "┩")]
    lines += [row_line(row, "│") for row in rows]
    lines.append(edge("└", "─", "┴", "┘"))
    return "".join(line + "\n" for line in lines)


def print_table(
    title: str,
    columns: Sequence[tuple[str, Justify]],
    rows: Sequence[Sequence[str]],
    max_width: int = 120,
) -> None:
    """Print the table to standard output as Rich does (at most `max_width` columns wide where
    standard output is not a terminal; the terminal's width where it is)."""
    text = plain_table(title, columns, rows, max_width) if plain_output(sys.stdout) else None
    if text is not None:
        sys.stdout.write(text)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for row in rows:
        table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else max_width).print(table)
