"""Argument types shared by the sub-commands' parsers (argparse `type=` callables).

A bad value raises argparse.ArgumentTypeError, which the parser reports as a usage error
(exit status 2) naming the option.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got `{text}`") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got `{text}`") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got `{text}`") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def add_overwrite(parser: argparse.ArgumentParser, what: str = "the output file") -> None:
    """`--overwrite`: without it an existing output file is refused (nothing is replaced)."""
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what} when it exists")


def parse_options(pairs: list[str] | None) -> dict[str, object]:
    """`--option KEY=VALUE` pairs; integers stay integers."""
    from edgesynth.errors import EdgesynthError

    out: dict[str, object] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise EdgesynthError(f"`{pair}` is not KEY=VALUE", key="--option")
        out[key.replace("-", "_")] = int(value) if value.lstrip("-").isdigit() else value
    return out
