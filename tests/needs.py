"""What the tests need from the machine: a missing program or Python module fails the test
with the line that installs it (scripts/setup.sh installs them all, the compilers when run as
root). A test is never silently left out for want of a tool.

On a developer's machine without them, EDGESYNTH_ALLOW_MISSING_TOOLS=1 turns these failures
into skips that still say what to install; CI (CI=true) ignores it and fails.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

# program -> the Debian packages that provide it (one fact: scripts/setup.sh lists the same)
APT_PACKAGES = {
    "gcc": "gcc",
    "arm-none-eabi-gcc": "gcc-arm-none-eabi libnewlib-arm-none-eabi",
    "riscv64-unknown-elf-gcc": "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf",
    "qemu-riscv32": "qemu-user",
    "chromium": "chromium",
}
# Python module -> what installs it
PIP_PACKAGES = {
    "torch": "torch==2.13.0 (bash scripts/setup.sh)",
    "onnx": "-e '.[onnx]'",
    "onnxruntime": "-e '.[onnx]'",
    "PIL.Image": "-e '.[plot]' (Pillow comes with matplotlib)",
}
DEVTRACE = Path(__file__).resolve().parents[2] / "shared" / "tools" / "devtrace"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def missing_allowed() -> bool:
    return not in_ci() and os.environ.get("EDGESYNTH_ALLOW_MISSING_TOOLS") == "1"


def _missing(message: str) -> None:
    if missing_allowed():
        pytest.skip(message, allow_module_level=True)
    hint = "" if in_ci() else " (or EDGESYNTH_ALLOW_MISSING_TOOLS=1 to skip)"
    pytest.fail(message + hint, pytrace=False)


def tool(name: str) -> str:
    """The path of program `name`; the test fails (with the apt-get line) without it."""
    path = shutil.which(name)
    if path is None:
        _missing(f"{name} is not installed: sudo apt-get install {APT_PACKAGES[name]}")
    return str(path)


def tools(*names: str) -> list[str]:
    return [tool(name) for name in names]


def module(name: str) -> ModuleType:
    """Python module `name`; the test fails (with the pip line) without it."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        _missing(f"{name} cannot be imported ({err}): pip install {PIP_PACKAGES[name]}")
        raise  # not reached: _missing raises


def devtrace() -> Path:
    """The devtrace recorder's folder (../shared/tools/devtrace) and gcc to build it."""
    tool("gcc")
    if not (DEVTRACE / "run.sh").is_file():
        pytest.fail(f"the devtrace recorder is missing: expected it at {DEVTRACE}", pytrace=False)
    return DEVTRACE


CORPUS = DEVTRACE.parents[1] / "corpus"


def in_corpus(path: Path | None) -> Path:
    """`path` of the reference corpus (../shared/corpus); the test fails when it is missing
    (None: a parameter list found no corpus files at all)."""
    if path is None or not path.exists():
        where = CORPUS if path is None else path
        pytest.fail(f"missing from the reference corpus: {where}", pytrace=False)
    return path


def corpus_params(paths: list[Path], root: Path) -> list:
    """One parameter per corpus file (id: its path under `root`), or one that fails in
    in_corpus when there are none."""
    if not paths:
        return [pytest.param(None, id="corpus-missing")]
    return [pytest.param(p, id=str(p.relative_to(root))) for p in paths]
