"""The module map of every target package, drawn from the code: each module's (and each
sub-package's) role, the first sentence of its docstring.

    python scripts/module_map.py            print the map
    python scripts/module_map.py --write    put it into docs/architecture.md (between the markers)

tests/test_target_skeleton.py checks that docs/architecture.md holds the map as printed here.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ROOT / "src" / "edgesynth" / "targets"
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- module map: written by scripts/module_map.py --write; do not edit by hand -->"
END = "<!-- end of the module map -->"
NAME_WIDTH = 20
WIDTH = 100


def role(path: Path) -> str:
    """The first sentence of a module's docstring (the first paragraph, up to its first full
    stop)."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    match = re.search(r"\.(\s|$)", paragraph)
    return paragraph[: match.start() + 1] if match else paragraph


def _line(name: str, text: str, indent: str) -> list[str]:
    head = f"{indent}{name}".ljust(NAME_WIDTH)
    if len(head) > NAME_WIDTH:
        head += " "
    rest = " " * len(head)
    wrapped = textwrap.wrap(
        text, WIDTH, initial_indent=head, subsequent_indent=rest, break_on_hyphens=False
    )
    return wrapped or [head]


def package_map(folder: Path) -> list[str]:
    """One target package: its own role, then each module and sub-package at its top level."""
    lines = _line(f"targets/{folder.name}/", role(folder / "__init__.py"), "")
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.name.startswith(("_", ".")):
            continue
        if path.suffix == ".py":
            lines += _line(path.name, role(path), "  ")
        elif (path / "__init__.py").exists():
            lines += _line(f"{path.name}/", role(path / "__init__.py"), "  ")
        elif path.name == "templates":
            count = sum(1 for _ in path.rglob("*.j2"))
            text = f"the Jinja2 templates of the generated C ({count})."
            lines += _line("templates/", text, "  ")
    return lines


def module_map() -> str:
    """The map of every target package, in a fenced block."""
    packages = sorted(p for p in TARGETS.iterdir() if (p / "plugin.py").exists())
    body = "\n\n".join("\n".join(package_map(p)) for p in packages)
    return f"```\n{body}\n```"


def with_map(doc: str, text: str) -> str:
    """`doc` with the text between the markers replaced by `text`."""
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    return f"{doc[:start]}\n{text}\n{doc[end:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(ROOT)}")
    args = parser.parse_args()
    text = module_map()
    if not args.write:
        print(text)
        return 0
    DOC.write_text(with_map(DOC.read_text(), text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
