"""`plain_table` writes what Rich writes for the tables it accepts, and declines the others."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.table import Table

from edgesynth.targets.max7800x.commands import text_table
from edgesynth.targets.max7800x.commands.text_table import Justify, plain_table


def _rich(title: str, columns: list[tuple[str, Justify]], rows: list[list[str]], width: int) -> str:
    table = Table(title=title)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for row in rows:
        table.add_row(*row)
    out = io.StringIO()
    Console(width=width, file=out).print(table)
    return out.getvalue()


def _word(rng: random.Random, most: int) -> str:
    letters = "abcxyz0123456789-_/.()x"
    return "".join(rng.choice(letters) for _ in range(rng.randint(0, most)))


def test_a_plain_table_is_laid_out_as_rich_lays_it_out() -> None:
    rng = random.Random(7)
    taken = 0
    for _ in range(200):
        columns: list[tuple[str, Justify]] = [
            (_word(rng, 6), rng.choice(("left", "right"))) for _ in range(rng.randint(1, 9))
        ]
        rows = [[_word(rng, 12) for _ in columns] for _ in range(rng.randint(1, 12))]
        title = (_word(rng, 30) or "t") + rng.choice(("", " on MAX78000"))
        text = plain_table(title, columns, rows, 120)
        expected = _rich(title, columns, rows, 120)
        if text is None:  # declined: wider than 120 (Rich shrinks it), or a wider title
            cells = [[name for name, _ in columns], *rows]
            width = sum(max(len(r[i]) for r in cells) + 3 for i in range(len(columns))) + 1
            assert width > 120 or len(title) > width
        else:
            assert text == expected
            taken += 1
    assert taken > 100


def test_the_summary_table_of_a_network_is_taken() -> None:
    columns = [
        (name, "right" if name in ("#", "min", "max") else "left") for name in ["#", "name", "op"]
    ]
    rows = [["0", "conv1", "conv2d 3x3"], ["10", "", "maxpool 2x2/2 conv2d 1x1"]]
    title = "tests/x.yaml on MAX78002"
    text = plain_table(title, columns, rows, 120)  # type: ignore[arg-type]
    assert text is not None
    assert text == _rich(title, columns, rows, 120)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cell",
    ["[bold]x", "a:smile:", "tab\there", "wide  gap", " lead", "ü", "back\\slash", "two\nlines"],
)
def test_text_rich_could_change_is_left_to_rich(cell: str) -> None:
    assert plain_table("title", [("a", "left")], [[cell]], 120) is None


def test_a_table_wider_than_the_limit_is_left_to_rich() -> None:
    columns: list[tuple[str, Justify]] = [("a", "left"), ("b", "left")]
    assert plain_table("t", columns, [["x" * 60, "y" * 60]], 120) is None
    assert plain_table("a long title for a small table", columns, [["x", "y"]], 120) is None


def test_rich_settings_or_a_terminal_turn_the_plain_path_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Stream(io.StringIO):
        encoding = "utf-8"

        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    assert text_table.plain_output(Stream(tty=False))
    assert not text_table.plain_output(Stream(tty=True))
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not text_table.plain_output(Stream(tty=False))
