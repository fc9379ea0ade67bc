"""JSON text exactly as `json.dumps(value, indent=N)` writes it, several times faster where
the document is mostly long flat lists (xDNN's quant.json: one threshold, step and shift per
output channel): the standard library writes indented JSON in Python, value by value; here
each flat list is written by its C encoder and split one value a line."""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import Any

# Items separated by NUL, which never appears raw in JSON text (a string escapes it as \u0000)
_FLAT = json.JSONEncoder(separators=("\0", ": "))
_NESTED = (dict, list, tuple)


def dumps(value: Any, indent: int = 1) -> str:
    """`json.dumps(value, indent=indent)`, the same text."""
    return _text(value, "\n", " " * indent)


def _text(value: Any, newline: str, step: str) -> str:
    """`value` written at the depth whose lines begin with `newline` (a newline and the
    indentation)."""
    inner = newline + step
    if isinstance(value, dict):
        if not value:
            return "{}"
        if not all(isinstance(key, str) for key in value):  # keys json converts: its own way
            return json.dumps(value, indent=len(step)).replace("\n", newline)
        items = [f"{encode_basestring_ascii(k)}: {_text(v, inner, step)}" for k, v in value.items()]
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = None if isinstance(value[0], _NESTED) else _flat_items(value)
        if items is None:
            items = [_text(v, inner, step) for v in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return _FLAT.encode(value)


def _flat_items(value: list | tuple) -> list[str] | None:
    """The items of a list that holds no list or object, as the C encoder writes them (None for
    one that does)."""
    text = _FLAT.encode(value)
    maybe_nested = '"' in text or "[" in text[1:] or "{" in text  # (or strings)
    if maybe_nested and any(isinstance(v, _NESTED) for v in value):
        return None
    return text[1:-1].split("\0")
