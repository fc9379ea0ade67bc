"""Small helpers for the words of messages and reports."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 input`, `2 inputs`; `many` for nouns whose plural is not noun + "s"."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
