"""The architecture's import rules (docs/architecture.md), checked on the source tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "edgesynth"


def imports(path: Path) -> set[str]:
    """Every `edgesynth...` module a file imports (at any depth: lazy imports count)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("edgesynth")}


def files(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


TARGETS = sorted(p.name for p in (SRC / "targets").iterdir() if (p / "__init__.py").exists())


@pytest.mark.parametrize("target", TARGETS)
def test_no_target_imports_another(target: str) -> None:
    others = [t for t in TARGETS if t != target]
    for path in files(f"targets/{target}"):
        for name in imports(path):
            for other in others:
                assert not name.startswith(f"edgesynth.targets.{other}"), (
                    f"{path.relative_to(SRC)} imports {name}"
                )


def test_sim_knows_no_vendor_command_line_flag() -> None:
    """`sim/` is the reference arithmetic: a vendor option (izer's `--legacy-test`,
    `--reshape-inputs`, ...) never appears there, by name or by its parsed name. An operator
    parameter with the meaning of an option (`rounding` for --avg-pool-rounding) is named for
    the arithmetic, not the option."""
    from edgesynth.targets.max7800x.izer_args import OPTIONS

    names = {f for o in OPTIONS for f in o.flags if f.startswith("--")}
    names |= {o.dest for o in OPTIONS if len(o.dest) > 3}
    for path in files("sim"):
        text = path.read_text()
        words = set(re.findall(r"--[a-z0-9][a-z0-9-]+|\b[a-z][a-z0-9_]+\b", text))
        bad = sorted(n for n in names & words if n.startswith("--") or "_" in n)
        assert not bad, f"{path.relative_to(SRC)} names vendor options {bad}"


def test_sim_imports_no_target() -> None:
    for path in files("sim"):
        bad = [n for n in imports(path) if n.startswith("edgesynth.targets")]
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


@pytest.mark.parametrize("package", ["nn", "quant", "train"])
def test_training_layers_reach_a_device_only_through_its_description(package: str) -> None:
    for path in files(package):
        for name in imports(path):
            if name.startswith("edgesynth.targets"):
                assert ".device" in name, f"{path.relative_to(SRC)} imports {name}"


def test_frontends_import_no_target_but_the_vendor_builder() -> None:
    """Front ends make no hardware decision; the vendor-YAML reader may use the max7800x
    builder (the YAML's meaning is that chip's)."""
    for path in files("frontends"):
        for name in imports(path):
            if not name.startswith("edgesynth.targets"):
                continue
            assert "ai8x" in path.parts and name.startswith("edgesynth.targets.max7800x"), (
                f"{path.relative_to(SRC)} imports {name}"
            )


def test_virtual_device_is_independent_of_the_code_generator() -> None:
    """The virtual device decodes writes from the hardware documentation alone: it imports
    nothing of the max7800x synthesizer (plan, emit, regmap, rules, ...) but the device facts
    (device.py, and snoop_unit.py: what a snoop unit decides, which the planner reads too) and
    the marked vendor behaviour (compat), and nothing outside it imports it but the command
    line and the placement's proof (placement/verify.py runs a generated project's writes on it,
    as a checker). The recorder (recorder/) is allowed too: it compiles a project's C on this PC
    and hands over the raw writes it makes (`device run PROJECT`), decoding none of them."""
    allowed = {
        f"edgesynth.targets.max7800x.{name}"
        for name in ("vdevice", "device", "snoop_unit", "compat", "recorder")
    }
    for path in files("targets/max7800x/vdevice"):
        for name in imports(path):
            if name.startswith("edgesynth.targets"):
                assert any(name == a or name.startswith(a + ".") for a in allowed), (
                    f"{path.relative_to(SRC)} imports {name}"
                )
    for path in SRC.rglob("*.py"):
        if "vdevice" in path.parts or (path.name == "cli.py" and path.parent == SRC):
            continue
        if path == SRC / "targets" / "max7800x" / "placement" / "verify.py":
            continue
        if "recorder" in path.parts:  # writes traces in the device's input format
            continue
        bad = [n for n in imports(path) if ".vdevice" in n]
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_every_cp_sat_solver_comes_from_cpsat() -> None:
    """A CpSolver made elsewhere would catch SIGINT and make Ctrl-C kill edgesynth by signal."""
    makers = [
        path.relative_to(SRC)
        for path in sorted(SRC.rglob("*.py"))
        if "CpSolver(" in path.read_text() and path.name != "cpsat.py"
    ]
    assert not makers, f"use edgesynth.cpsat.new_solver in {makers}"


def imported_names(path: Path) -> set[str]:
    """Every `edgesynth...` name a file imports, as `module.name` for `from module import name`
    (at any depth: lazy imports count)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("edgesynth")}


# Each target's executor (the functional model a compiled program is proved on): its modules,
# what of its own target it may import (device facts, containers, its own decoders), and the
# encoder's modules (the field tables and writers it must never reach, even through another
# module of the target).
EXECUTORS = {
    "gati": (
        ("funcsim", "funcsim_isa", "funcsim_dwp", "readback"),
        ("hw", "chain", "model", "funcsim", "funcsim_isa", "funcsim_dwp"),
        ("isa", "dwp", "layout", "compiler", "artifacts", "decoder", "program_graph"),
    ),
    "xdnn": (
        ("funcmodel", "scriptdecode"),
        ("device", "scriptmodel.Script", "scriptmodel.ScriptCommand", "scriptdecode"),
        ("regmap", "script", "program", "emit", "filters", "imem", "lower", "commands"),
    ),
}


def _target_module(name: str, target: str) -> str:
    """`edgesynth.targets.gati.isa.decode` -> `isa` (the module of `target` it names)."""
    rest = name.removeprefix(f"edgesynth.targets.{target}.")
    return rest.split(".")[0]


@pytest.mark.parametrize("target", sorted(EXECUTORS))
def test_executors_decode_with_their_own_tables(target: str) -> None:
    """An executor decodes the emitted bytes with its own field tables, written from the
    documents: it imports only the allowed modules of its target, and nothing it imports
    (followed through the target's modules) reaches the encoder's, so a wrong bit position in
    the encoder shows up as a wrong result instead of being decoded back the same wrong way."""
    modules, allowed, encoder = EXECUTORS[target]
    package = SRC / "targets" / target
    prefix = f"edgesynth.targets.{target}."
    for module in modules:
        path = package / f"{module}.py"
        for name in imported_names(path):
            if not name.startswith("edgesynth.targets"):
                continue
            rest = name.removeprefix(prefix)
            ok = name.startswith(prefix) and any(
                rest == a or rest.startswith(a + ".") for a in allowed
            )
            assert ok, f"{path.relative_to(SRC)} imports {name}"
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in seen or not (package / f"{module}.py").exists():
            continue
        seen.add(module)
        for name in imported_names(package / f"{module}.py"):
            if name.startswith(prefix):
                todo.append(_target_module(name, target))
    reached = sorted(seen & set(encoder))
    assert not reached, f"the {target} executor reaches the encoder's modules {reached}"
