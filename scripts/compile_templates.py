"""Compile the MAX7800x Jinja2 templates into the Python source `izer` loads them from.

    .venv/bin/python scripts/compile_templates.py [--check]

Writes `src/edgesynth/targets/max7800x/emit/compiled/*.jpy`, one per template (see
`emit/template_modules.py`), and removes compiled files whose template is gone. Run it after
changing a template or upgrading Jinja2; `--check` only says whether they are current (exit 1
where not). A stale file is never used: the template is then compiled on every run.
"""

from __future__ import annotations

import argparse
import sys

from edgesynth.targets.max7800x.emit.project import _environment
from edgesynth.targets.max7800x.emit.template_modules import (
    COMPILED,
    SUFFIX,
    compiled_path,
    compiled_text,
)


def expected() -> dict[str, str]:
    """Every compiled file's name and text, as the templates and Jinja2 make them now."""
    environment = _environment()
    files: dict[str, str] = {}
    for name in environment.list_templates(extensions=["j2"]):
        path = compiled_path(name)
        if path.name in files:
            raise SystemExit(f"two templates compile to {path.name}: rename one")
        files[path.name] = compiled_text(environment, name)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; write nothing")
    args = parser.parse_args()
    files = expected()
    present = {p.name: p.read_text() for p in COMPILED.glob(f"*{SUFFIX}")}
    stale = sorted(n for n in files.keys() | present.keys() if files.get(n) != present.get(n))
    if args.check:
        print("\n".join(f"stale: {n}" for n in stale) or "compiled templates are current")
        return 1 if stale else 0
    COMPILED.mkdir(exist_ok=True)
    for name in stale:
        if name in files:
            (COMPILED / name).write_text(files[name])
        else:
            (COMPILED / name).unlink()
    print(f"{len(files)} compiled templates in {COMPILED}, {len(stale)} written or removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
