"""The compiled templates (`emit/compiled/*.jpy`) are current, are what the projects are
rendered from, and a stale one is never used."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import jinja2
import pytest

from edgesynth.targets.max7800x.emit import template_modules
from edgesynth.targets.max7800x.emit.project import _environment

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compile_templates.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compile_templates", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_compiled_templates_are_current() -> None:
    """Fails after a template changes (or Jinja2 is upgraded) until
    `scripts/compile_templates.py` is run."""
    expected = _script().expected()
    present = {p.name: p.read_text() for p in template_modules.COMPILED.glob("*.jpy")}
    assert sorted(present) == sorted(expected)
    stale = [name for name, text in expected.items() if present[name] != text]
    assert stale == [], "run scripts/compile_templates.py"


def test_every_template_loads_from_its_compiled_file() -> None:
    environment = _environment()
    for name in environment.list_templates(extensions=["j2"]):
        template = environment.get_template(name)
        assert template.filename == str(template_modules.compiled_path(name)), name


def test_a_compiled_template_renders_what_the_template_renders() -> None:
    environment = _environment()
    fresh = jinja2.Environment(
        loader=jinja2.PackageLoader("edgesynth.targets.max7800x", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    name = "softmax.c.j2"
    compiled = environment.get_template(name)
    assert compiled.filename.endswith(".jpy")
    assert compiled.render(name="net") == fresh.get_template(name).render(name="net")


def test_a_stale_compiled_template_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compiled file whose KEY does not match the template's text is passed over: the
    template is compiled from its text."""
    environment = _environment()
    name = "softmax.c.j2"
    text = template_modules.compiled_text(environment, name)
    stale = text.replace('KEY = "', 'KEY = "0', 1)
    monkeypatch.setattr(template_modules, "COMPILED", tmp_path)
    template_modules.compiled_path(name).write_text(stale)
    loader = template_modules.CompiledLoader("edgesynth.targets.max7800x", "templates")
    template = loader.load(environment, name)
    assert not template.filename.endswith(".jpy")
    assert template.render(name="net") == environment.get_template(name).render(name="net")
