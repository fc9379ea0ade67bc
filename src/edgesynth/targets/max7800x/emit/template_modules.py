"""The MAX7800x templates compiled ahead of time, as Python source (`emit/compiled/*.jpy`).

Compiling a project's Jinja2 templates costs more than rendering them (a fifth of the
instructions of a small `izer` run), and a cache of compiled templates would be written outside
the run's output. So each template is compiled once, by `scripts/compile_templates.py`, into a
Python source file that Python loads, and caches as bytecode, like a module of the package. A
compiled file is used only where its KEY says it was made from the template's current text by
the Jinja2 version and environment settings in use; any other template is compiled as it loads,
so a stale file costs time, never a wrong project. tests/max7800x/test_template_modules.py keeps
the files current.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import jinja2

COMPILED = Path(__file__).resolve().parent / "compiled"
SUFFIX = ".jpy"


def compiled_path(name: str) -> Path:
    """Where template `name` (`cnn.c.j2`, `msdk/mxc.h.j2`) is kept compiled."""
    return COMPILED / (re.sub(r"[^A-Za-z0-9]", "_", name.removesuffix(".j2")) + SUFFIX)


def template_key(environment: jinja2.Environment, source: str) -> str:
    """What a compiled template depends on: its text, the Jinja2 version, the settings that
    change the compiled code."""
    e = environment
    settings = (
        jinja2.__version__,
        e.block_start_string,
        e.block_end_string,
        e.variable_start_string,
        e.variable_end_string,
        e.comment_start_string,
        e.comment_end_string,
        e.line_statement_prefix,
        e.line_comment_prefix,
        e.trim_blocks,
        e.lstrip_blocks,
        e.newline_sequence,
        e.keep_trailing_newline,
        e.autoescape,
        e.optimized,
        sorted(e.extensions),
    )
    return hashlib.sha256(f"{settings!r}\n{source}".encode()).hexdigest()


def compiled_text(environment: jinja2.Environment, name: str) -> str:
    """The compiled file of template `name`: its KEY, then the code Jinja2 makes of it."""
    source, _, _ = environment.loader.get_source(environment, name)  # type: ignore[union-attr]
    code = environment.compile(source, name, f"templates/{name}", raw=True, defer_init=True)
    header = f"# {name} compiled by scripts/compile_templates.py: do not edit\n"
    return f'{header}KEY = "{template_key(environment, source)}"\n{code}\n'


class CompiledLoader(jinja2.PackageLoader):
    """A package's templates, each from its compiled file where that is current."""

    def load(
        self,
        environment: jinja2.Environment,
        name: str,
        globals: MutableMapping[str, Any] | None = None,
    ) -> jinja2.Template:
        source, _, _ = self.get_source(environment, name)
        namespace = _compiled(compiled_path(name))
        if namespace is None or namespace.get("KEY") != template_key(environment, source):
            return super().load(environment, name, globals)
        template_class = environment.template_class
        return template_class.from_module_dict(
            environment, namespace, {} if globals is None else globals
        )


def _compiled(path: Path) -> dict[str, Any] | None:
    """The namespace of the compiled file at `path`, None where there is none."""
    if not path.is_file():
        return None
    loader = importlib.machinery.SourceFileLoader(f"_edgesynth_template_{path.stem}", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.__dict__
