"""The architecture's import rules (docs/architecture.md), checked on the source tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "edgesynth"


def imports(path: Path) -> set[str]:
    """Every `edgesynth...` module a file imports (at any depth: lazy imports count), and the
    names it takes from them."""
    return _imported(path, with_modules=True)


def _imported(path: Path, *, with_modules: bool) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if with_modules:
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
    from edgesynth.targets.max7800x.commands.izer_args import OPTIONS

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
    """The training side reads device facts (`device.py`); the vendor YAML it evaluates or
    quantizes against reaches it as a torch model or a list of bits (`yaml_model.py`)."""
    for path in files(package):
        for name in imports(path):
            if name.startswith("edgesynth.targets"):
                assert ".device" in name or ".max7800x.yaml_model" in name, (
                    f"{path.relative_to(SRC)} imports {name}"
                )


def test_frontends_import_no_target() -> None:
    """Front ends make no hardware decision (the vendor YAML's reader is the MAX7800x
    target's own: targets/max7800x/description)."""
    for path in files("frontends"):
        bad = [n for n in imports(path) if n.startswith("edgesynth.targets")]
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_ir_is_the_graph_only() -> None:
    """`ir/` is the graph every target compiles: it imports nothing of edgesynth but itself
    and the error type, and reads no YAML."""
    for path in files("ir"):
        bad = [n for n in imports(path) if not n.startswith(("edgesynth.ir", "edgesynth.errors"))]
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"
        reads_yaml = re.search(r"^\s*(import|from) yaml\b", path.read_text(), re.M)
        assert not reads_yaml, f"{path.relative_to(SRC)} reads YAML"


def test_vendor_description_stays_in_the_max7800x_target() -> None:
    """The vendor's YAML/checkpoint description (targets/max7800x/description) is read only
    inside the MAX7800x target; everyone else gets a graph, a torch model or numbers from
    `yaml_model.py`."""
    inside = SRC / "targets" / "max7800x"
    for path in SRC.rglob("*.py"):
        if inside in path.parents:
            continue
        bad = [n for n in imports(path) if ".max7800x.description" in n]
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_virtual_device_is_independent_of_the_code_generator() -> None:
    """The virtual device decodes writes from the hardware documentation alone: it imports
    nothing of the max7800x synthesizer (plan, emit, regmap, rules, ...) but the device facts
    (device.py, and snoop_unit.py: what a snoop unit decides, which the planner reads too) and
    the marked vendor behaviour (compat), and nothing outside it imports it but the MAX7800x
    command line (targets/max7800x/cli.py) and the placement's proof (placement/verify.py runs
    a generated project's writes on it, as a checker). The recorder (recorder/) is allowed
    too: it compiles a project's C on this PC and hands over the raw writes it makes
    (`device run PROJECT`), decoding none of them."""
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
        if "vdevice" in path.parts or path == SRC / "targets" / "max7800x" / "cli.py":
            continue  # the MAX7800x command line mounts `device` (vdevice/cli.py)
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
    return _imported(path, with_modules=False)


# Each target's executor (the functional model a compiled program is proved on): its modules,
# what of its own target it may import (device facts, containers, its own decoders), and the
# encoder's modules (the field tables and writers it must never reach, even through another
# module of the target).
EXECUTORS = {
    "gati": (
        ("executor.machine", "executor.isa", "executor.dwp", "executor.readback"),
        ("device", "chain", "layers", "executor"),
        ("isa", "dwp", "layout", "plan", "emit", "decoder", "program_graph"),
    ),
    "xdnn": (
        ("executor.machine", "executor.decode"),
        ("device", "scriptmodel.Script", "scriptmodel.ScriptCommand", "executor"),
        ("regmap", "script", "program", "plan", "emit", "filters", "imem", "lower", "commands"),
    ),
}


def _module_path(package: Path, module: str) -> Path:
    """`executor.isa` -> package/executor/isa.py (or its `__init__.py` for a package)."""
    path = package.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _target_module(name: str, target: str) -> str:
    """`edgesynth.targets.gati.isa.decode` -> `isa`, `...gati.executor.isa.X` -> `executor.isa`
    (the module of `target` it names)."""
    parts = name.removeprefix(f"edgesynth.targets.{target}.").split(".")
    package = SRC / "targets" / target
    for n in range(len(parts), 0, -1):
        if _module_path(package, ".".join(parts[:n])).exists():
            return ".".join(parts[:n])
    return parts[0]


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
        path = _module_path(package, module)
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
        if module in seen or not _module_path(package, module).exists():
            continue
        seen.add(module)
        for name in imported_names(_module_path(package, module)):
            if name.startswith(prefix):
                todo.append(_target_module(name, target))
    reached = sorted(seen & set(encoder))
    assert not reached, f"the {target} executor reaches the encoder's modules {reached}"


# -- import circles -------------------------------------------------------------------------
#
# The module graph counts every import of an `edgesynth` module, wherever it is written: at
# module level, under `if TYPE_CHECKING:` (a type a module needs is a dependency too, only
# hidden from the interpreter) and inside functions (a lazy import delays a dependency, it does
# not remove it). `from package import name` points at `package.name` where that is a module,
# else at `package`; the implicit import of a parent package's `__init__` is not counted.


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module `name` denotes (a module, or the module a name is taken from)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_modules(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def module_imports(module: str) -> dict[str, str]:
    """The `edgesynth` modules `module` imports -> where ("module", "type" or "function"; the
    first of these that holds for some import of it)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, str] = {}

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                here = "function"
            elif isinstance(child, ast.If) and _is_type_checking(child.test) and where == "module":
                here = "type"
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in _imported_modules(child, package):
                    target = _resolve(name)
                    if not target or target == module:
                        continue
                    if target not in found or ORDER[here] < ORDER[found[target]]:
                        found[target] = here
            visit(child, here)

    visit(ast.parse(path.read_text(), str(path)), "module")
    return found


ORDER = {"module": 0, "type": 1, "function": 2}
GRAPH = {m: module_imports(m) for m in MODULES}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(component: list[str]) -> str:
    members = set(component)
    edges = [
        f"  {m} -> {t} ({where})"
        for m in component
        for t, where in sorted(GRAPH[m].items())
        if t in members
    ]
    return "\n".join([", ".join(component), *edges])


def test_circles_finds_a_circle_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_module_imports_sorts_imports_by_where_they_are_written() -> None:
    assert GRAPH["edgesynth.targets.max7800x.plan.plan"]["edgesynth.errors"] == "module"
    assert "edgesynth.targets.xdnn.executor.machine" in GRAPH["edgesynth.targets.xdnn.target"]
    assert GRAPH["edgesynth.targets.xdnn.target"]["edgesynth.targets.xdnn.executor.machine"] == (
        "function"
    )


def test_no_import_circle_between_modules() -> None:
    """No module reaches itself through the modules it imports (counting imports at module
    level, under TYPE_CHECKING and inside functions): dependencies point one way."""
    found = circles({m: set(targets) for m, targets in GRAPH.items()})
    assert not found, "import circles:\n" + "\n\n".join(_describe(c) for c in found)


def _package(module: str) -> str:
    """`edgesynth.targets.NAME...` -> `targets.NAME`; `edgesynth.PKG...` -> `PKG` (a module at
    the top is its own package)."""
    parts = module.split(".")[1:] or ["edgesynth"]
    return ".".join(parts[:2]) if parts[0] == "targets" and len(parts) > 1 else parts[0]


def test_no_import_circle_between_packages() -> None:
    """The packages (each target, `nn`, `quant`, `ir`, `sim`, ... and each top-level module)
    depend on each other one way: `quant` on `nn`, a target's command line on `cliargs`, never
    back."""
    graph: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        graph.setdefault(_package(module), set()).update(
            _package(t) for t in targets if _package(t) != _package(module)
        )
    found = circles(graph)
    edges = [
        f"  {m} -> {t}"
        for c in found
        for m, targets in GRAPH.items()
        for t in targets
        if _package(m) in c and _package(t) in c and _package(m) != _package(t)
    ]
    assert not found, f"package circles {found}:\n" + "\n".join(edges)
