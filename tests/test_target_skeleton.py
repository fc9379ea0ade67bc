"""Every registered target package has the same skeleton of role-named modules
(docs/architecture.md, "Module map"), and the map in docs/architecture.md is the code's."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from edgesynth.entry_points import entry_points
from edgesynth.targets.registry import GROUP

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# role -> what the module (or package of that name) holds
ROLES = {
    "device": "the device facts",
    "lower": "graph -> the target's hardware layers",
    "plan": "the plan step",
    "emit": "writing the files",
    "cli": "the target's sub-commands",
    "target": "the Target class",
    "plugin": "what the entry point registers",
}
# what runs the emitted files: an `executor/` package or a `model.py`; the MAX7800x virtual
# device keeps its documented name, `vdevice/`
EXECUTORS = ("executor", "model", "vdevice")


def _packages() -> list[Path]:
    """The folder of every package registered under the `edgesynth.targets` entry points."""
    folders = set()
    for entry in entry_points(GROUP):
        module = entry.value.split(":")[0]
        folders.add(SRC.joinpath(*module.split(".")[:-1]))
    return sorted(folders)


PACKAGES = _packages()


def _has(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def test_every_target_folder_is_registered() -> None:
    folders = {p.parent for p in (SRC / "edgesynth" / "targets").glob("*/__init__.py")}
    assert sorted(folders) == PACKAGES


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda p: p.name)
def test_target_package_has_the_role_modules(folder: Path) -> None:
    missing = [role for role in ROLES if not _has(folder, role)]
    assert not missing, f"{folder.name} lacks {missing}"
    executors = [name for name in EXECUTORS if _has(folder, name)]
    assert len(executors) == 1, f"{folder.name}: executors {executors} (want one of {EXECUTORS})"


def _generates_c(folder: Path) -> bool:
    """Whether a module of the target renders Jinja2 templates of its package (makes a
    PackageLoader, or a loader of the target's own that extends it)."""
    trees = [ast.parse(path.read_text(), str(path)) for path in folder.rglob("*.py")]
    loaders = {"PackageLoader"}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                getattr(base, "attr", getattr(base, "id", None)) == "PackageLoader"
                for base in node.bases
            ):
                loaders.add(node.name)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name in loaders:
                    return True
    return False


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda p: p.name)
def test_templates_where_the_target_generates_c(folder: Path) -> None:
    templates = folder / "templates"
    has = templates.is_dir() and any(templates.rglob("*.j2"))
    assert has == _generates_c(folder), f"{folder.name}: templates/ {has}"


def _module_map() -> ModuleType:
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "scripts" / "module_map.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_module_says_its_role() -> None:
    """The map is drawn from docstrings: every module and sub-package of a target has one."""
    mm = _module_map()
    silent = [
        str(path.relative_to(SRC))
        for folder in PACKAGES
        for path in sorted(folder.rglob("*.py"))
        if not mm.role(path)
    ]
    assert not silent, f"modules without a docstring: {silent}"


def test_the_architecture_doc_holds_the_current_module_map() -> None:
    mm = _module_map()
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert mm.with_map(doc, mm.module_map()) == doc, (
        "docs/architecture.md's module map is stale: python scripts/module_map.py --write"
    )
