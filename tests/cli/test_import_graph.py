"""Start-up stays lean: the `edgesynth` entry point, each command's module and every
sub-command's `--help` load no heavy library (each checked in a fresh interpreter, where
sys.modules shows what was loaded). Libraries load in the handlers that use them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from edgesynth.cli import _subcommands, build_parser, command_modules

# What no command's module, no --help and no --version may load: the numeric and model
# libraries, the code-generation templates, the solver, plotting, and importlib.metadata
# (slow to load; --version alone looks the version up)
HEAVY = (
    "numpy",
    "yaml",
    "jinja2",
    "ortools",
    "torch",
    "onnx",
    "onnxruntime",
    "matplotlib",
    "scipy",
    "sklearn",
    "importlib.metadata",
)


def _loaded(code: str) -> list[str]:
    """The HEAVY modules in sys.modules after `code` runs in a fresh interpreter."""
    probe = f"""
import contextlib, io, json, sys
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
{code}
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def _command_paths() -> list[tuple[str, ...]]:
    paths = []
    for name, sub in _subcommands(build_parser()).items():
        paths.append((name,))
        paths += [(name, n) for n in _subcommands(sub)]
    return paths


@pytest.mark.parametrize("module", ["edgesynth.cli", *command_modules()])
def test_a_command_module_loads_nothing_heavy(module: str) -> None:
    assert _loaded(f"    import {module}") == []


@pytest.mark.parametrize("words", [(), *_command_paths()], ids=" ".join)
def test_help_loads_nothing_heavy(words: tuple[str, ...]) -> None:
    argv = [*words, "--help"]
    loaded = _loaded(f"    from edgesynth.cli import main\n    assert main({argv!r}) == 0")
    assert loaded == []


def test_version_loads_no_command() -> None:
    probe = """
import contextlib, io, sys
from edgesynth.cli import command_modules, main
with contextlib.redirect_stdout(io.StringIO()) as out:
    assert main(["--version"]) == 0
print(out.getvalue().startswith("edgesynth "), [m for m in command_modules() if m in sys.modules])
print("numpy" in sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["True []", "False"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [({}, "1"), ({"OPENBLAS_NUM_THREADS": "4"}, "4"), ({"OMP_NUM_THREADS": "2"}, None)],
)
def test_blas_runs_one_thread_unless_the_user_sets_it(
    monkeypatch: pytest.MonkeyPatch, given: dict[str, str], expected: str | None
) -> None:
    from edgesynth.cli import BLAS_THREADS, one_blas_thread

    environ = {k: v for k, v in os.environ.items() if k not in BLAS_THREADS} | given
    monkeypatch.setattr(os, "environ", environ)
    one_blas_thread()
    assert environ.get("OPENBLAS_NUM_THREADS") == expected
