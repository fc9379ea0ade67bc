"""The virtual device is written from the hardware documentation, not from the encoder: the
two sides never import each other (so an encoder bug cannot be mirrored)."""

from __future__ import annotations

import ast
from pathlib import Path

import edgesynth

SRC = Path(edgesynth.__file__).resolve().parent
VDEVICE = SRC / "targets" / "max7800x" / "vdevice"
ENCODER = (
    "description.assemble",
    "description.layer_config",
    "description.weights",
    "description.sequence",
    "description.shapes",
    "description.buffers",
    "pipeline",
    "rules",
    "commands",
    "codegen",
    "emit",
    "lower",
    "target",
    "plan",
)
ENCODER_PREFIXES = tuple(f"edgesynth.targets.max7800x.{name}" for name in ENCODER)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _forbidden(name: str) -> bool:
    return any(
        name == p or name.startswith(p + ".") or name.startswith(p + "_") for p in ENCODER_PREFIXES
    )


def test_vdevice_does_not_import_the_encoder():
    files = sorted(VDEVICE.rglob("*.py"))
    assert files
    for path in files:
        bad = sorted(n for n in _imports(path) if _forbidden(n))
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


# The one place that runs the encoder's output on the virtual device, as a checker: the proof
# of an automatic placement (the encoder never uses the device to compute anything).
# The placement's proof runs a project's writes on the device, as a checker; the target's
# command-line entry mounts the device's own commands (`edgesynth max7800x device`).
CHECKERS = {
    SRC / "targets" / "max7800x" / "placement" / "verify.py",
    SRC / "targets" / "max7800x" / "cli.py",
}
# The recorder writes the trace the device reads (its phase markers are the device's format).
RECORDER = SRC / "targets" / "max7800x" / "recorder"


def test_encoder_does_not_import_vdevice():
    for path in sorted((SRC / "targets" / "max7800x").rglob("*.py")):
        if VDEVICE in path.parents or path in CHECKERS or RECORDER in path.parents:
            continue
        bad = sorted(n for n in _imports(path) if "vdevice" in n)
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_the_rule_catches_an_encoder_import(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text(
        "from edgesynth.targets.max7800x.description.layer_config import x\n"
        "import edgesynth.targets.max7800x.rules.memory\n"
        "from edgesynth.targets.max7800x import device\n"
    )
    found = sorted(n for n in _imports(sample) if _forbidden(n))
    assert found == [
        "edgesynth.targets.max7800x.description.layer_config",
        "edgesynth.targets.max7800x.description.layer_config.x",
        "edgesynth.targets.max7800x.rules.memory",
    ]
