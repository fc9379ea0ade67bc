"""The source's shape (the project's rule: functions that fit a screen): no function or method
in src/ is longer than MAX_LINES lines, from its `def` line to its last line (decorators not
counted; a nested function counts on its own and inside the function around it)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 120


def long_functions(source: str, filename: str, limit: int) -> list[tuple[int, str, str]]:
    """(lines, file:line, name) of every function in `source` longer than `limit` lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((lines, f"{filename}:{node.lineno}", node.name))
    return found


def test_the_count_runs_from_def_to_the_last_line() -> None:
    body = [f"x{i} = {i}" for i in range(MAX_LINES - 1)]
    fits = "\n".join(["def fits():", *(f"    {line}" for line in body)])  # MAX_LINES lines
    header = ["class C:", "    @staticmethod", "    def longer():"]
    longer = "\n".join([*header, *(f"        {x}" for x in [*body, "y = 0"])])  # one more
    assert long_functions(fits, "fits.py", MAX_LINES) == []
    assert long_functions(longer, "c.py", MAX_LINES) == [(MAX_LINES + 1, "c.py:3", "longer")]


def test_no_function_in_src_is_longer_than_the_limit() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        offenders += long_functions(path.read_text(), str(path.relative_to(SRC)), MAX_LINES)
    listing = "\n".join(
        f"  {lines} lines: {where} {name}" for lines, where, name in sorted(offenders)
    )
    assert not offenders, f"{len(offenders)} functions over {MAX_LINES} lines:\n{listing}"
