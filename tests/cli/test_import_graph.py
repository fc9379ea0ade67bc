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


def test_izer_builds_no_other_command_before_its_handler() -> None:
    """`edgesynth izer` reads its own command line: when its handler starts, no other
    command's module and nothing heavy is loaded (izer_main is the plugin's `raw_commands`)."""
    others = sorted(set(command_modules()) - {"edgesynth.targets.max7800x.cli"})
    probe = f"""
import json, sys
import edgesynth.targets.max7800x.cli as max7800x_cli
from edgesynth.cli import main

def handler(argv):
    loaded = [m for m in {[*HEAVY, *others]!r} if m in sys.modules]
    print(json.dumps([argv, loaded]))
    return 0

max7800x_cli.izer_main = handler
assert main(["izer", "--device", "MAX78000"]) == 0
"""
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [["--device", "MAX78000"], []]


# What `edgesynth izer` never loads on a YAML that places every layer: the solver and the
# placement search, the model libraries, plotting
IZER_NEVER = (
    "ortools",
    "edgesynth.cpsat",
    "edgesynth.targets.max7800x.placement.problem",
    "edgesynth.targets.max7800x.placement.solve",
    "torch",
    "onnx",
    "onnxruntime",
    "matplotlib",
    "scipy",
    "sklearn",
)


def test_izer_on_a_placed_yaml_loads_no_solver(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "tests").mkdir()
    (tmp_path / "net.yaml").write_text(
        "arch: test\ndataset: t\nlayers:\n"
        "  - {processors: 0x3, output_processors: 0xf, out_offset: 0x2000, op: conv2d, pad: 1}\n"
        "  - {processors: 0xf, output_processors: 0xf, out_offset: 0x0, op: conv2d, pad: 1}\n"
    )
    import numpy as np

    rng = np.random.default_rng(5)
    np.save(tmp_path / "tests" / "sample_t.npy", rng.integers(-50, 50, size=(2, 4, 4)))
    with open(tmp_path / "tests" / "weights_t.npy", "wb") as f:
        for shape in ((4, 2, 3, 3), (4, 4, 3, 3)):
            np.save(f, rng.integers(-100, 100, size=shape))
    argv = ["izer", "--device", "MAX78000", "--config-file", "net.yaml"]
    argv += ["--test-dir", "out", "--prefix", "p"]
    probe = f"""
import json, sys
from edgesynth.cli import main
assert main({argv!r}) == 0
print(json.dumps([m for m in {IZER_NEVER!r} if m in sys.modules]))
"""
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out" / "p" / "cnn.c").is_file()
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


def test_raw_commands_are_the_parsers_raw_handlers() -> None:
    """A target's `raw_commands` run the same function its parser registers for the name (so
    `edgesynth NAME` does the same with or without the whole command line built)."""
    from edgesynth.targets.registry import load_object, plugins

    subcommands = _subcommands(build_parser())
    declared = {
        name: load_object(reference, name)
        for plugin in plugins().values()
        for name, reference in plugin.raw_commands.items()
    }
    assert "izer" in declared
    for name, handler in declared.items():
        assert subcommands[name].get_default("raw_handler") is handler
