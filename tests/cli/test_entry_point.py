"""The `edgesynth` entry point: help, version, exit statuses, interrupts, internal errors,
missing optional parts, and random command lines that must never end in a traceback."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import run_cli
from edgesynth.cli import RESULT_LIBRARIES, _distribution_version, _subcommands, build_parser

CASE = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases" / "MAX78000"
MNIST = CASE / "mnist"
YAML = MNIST / "networks" / "mnist-chw-ai85.yaml"
CKPT = MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"
SAMPLE = MNIST / "tests" / "sample_mnist.npy"


def _command_paths() -> list[list[str]]:
    paths = []
    for name, sub in _subcommands(build_parser()).items():
        nested = _subcommands(sub)
        paths += [[name, n] for n in nested] if nested else [[name]]
    return paths


@pytest.mark.parametrize("words", [[], *_command_paths(), ["gati"]], ids=" ".join)
def test_help_exits_0(words: list[str]) -> None:
    result = run_cli(*words, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("usage: ") and not result.stderr


def test_version_and_no_command() -> None:
    from importlib.metadata import version

    result = run_cli("--version")
    lines = result.stdout.splitlines()
    assert (result.exit_code, lines[0]) == (0, f"edgesynth {version('edgesynth')}")
    assert f"numpy {version('numpy')}" in lines and f"OR-Tools {version('ortools')}" in lines
    assert len(lines) == 1 + len(RESULT_LIBRARIES) - sum(
        _distribution_version(d) is None for d in RESULT_LIBRARIES
    )
    result = run_cli()
    assert result.exit_code == 2
    assert "simulate" in result.stderr and result.stderr.endswith("no command given\n")


def test_unknown_command_suggests() -> None:
    result = run_cli("simualte")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == "usage: edgesynth COMMAND ... [options]"
    assert "Did you mean `simulate`?" in result.stderr


def test_internal_error_is_one_line_unless_debugging(monkeypatch: pytest.MonkeyPatch) -> None:
    from edgesynth.targets.gati import cli as gati_cli

    def broken(args):  # type: ignore[no-untyped-def]
        raise ValueError("something impossible\nsecond line")

    monkeypatch.setattr(gati_cli, "decode_cmd", broken)
    monkeypatch.delenv("EDGESYNTH_DEBUG", raising=False)
    result = run_cli("gati", "decode", "x")
    assert result.exit_code == 70
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("edgesynth: internal error: ValueError: something impossible")
    monkeypatch.setenv("EDGESYNTH_DEBUG", "1")
    result = run_cli("gati", "decode", "x")
    assert result.exit_code == 70 and "Traceback (most recent call last)" in result.stderr


def _python(code: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_izer_and_simulate_never_import_torch_or_onnx(tmp_path: Path) -> None:
    code = f"""
import sys
from edgesynth.cli import main
assert main(["simulate", {str(YAML)!r}, {str(CKPT)!r}, "--sample-input", {str(SAMPLE)!r}]) == 0
assert main(["izer", "--device", "MAX78000", "--config-file", {str(YAML)!r},
             "--checkpoint-file", {str(CKPT)!r}, "--sample-input", {str(SAMPLE)!r},
             "--test-dir", "out", "--prefix", "p", "--sample-numpy-filename", "kat"]) == 0
heavy = sorted(m for m in ("torch", "onnx", "onnxruntime") if m in sys.modules)
print("HEAVY", heavy)
"""
    run = _python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "HEAVY []" in run.stdout


@pytest.mark.parametrize(
    ("blocked", "argv", "extra"),
    [
        ("torch", ["train", "--dataset", "synthetic"], "train"),
        ("torch", ["evaluate", "--checkpoint", str(CKPT), "--sample-input", str(SAMPLE)], "train"),
        ("onnx", ["gati", "compile", "m.onnx", "-c", "c.npy", "-o", "out"], "onnx"),
    ],
)
def test_missing_optional_part_names_the_extra(
    tmp_path: Path, blocked: str, argv: list[str], extra: str
) -> None:
    """As after `pip install edgesynth` without extras: one line naming what to install."""
    (tmp_path / "m.onnx").write_bytes(b"\x08\x08")
    code = f"""
import sys
import numpy as np
np.save("c.npy", np.zeros((2, 1, 8, 8), dtype=np.float32))
sys.modules[{blocked!r}] = None  # `import {blocked}` fails as if it were not installed
from edgesynth.cli import main
sys.exit(main({argv!r}))
"""
    run = _python(code, tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip().endswith(f"pip install 'edgesynth[{extra}]'"), run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "logs").exists()


def test_a_missing_dependency_is_named_not_called_a_bug(tmp_path: Path) -> None:
    """A dependency every install has, removed since (seen on a machine whose Python had
    everything but OR-Tools): one line naming the package, exit 1, not 'internal error'."""
    code = """
import sys
sys.modules["ortools"] = None  # `import ortools` fails as if it were not installed
from edgesynth.cli import guarded
def job():  # a command whose handler reaches the solver
    import ortools  # noqa: F401
    return 0
sys.exit(guarded(job, ["plan", "net.yaml"]))
"""
    run = _python(code, tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip() == (
        "edgesynth: error: `edgesynth plan net.yaml` needs ortools, a dependency of edgesynth "
        "that is not installed: pip install ortools (or reinstall edgesynth)"
    )


@pytest.mark.slow
def test_ctrl_c_during_training(tmp_path: Path) -> None:
    """A real SIGINT: exit 130, `edgesynth: interrupted`, only complete checkpoints kept."""
    argv = [
        sys.executable, "-m", "edgesynth", "train", "--dataset", "synthetic", "--epochs", "200",
        "--no-progress", "--out-dir", "runs", "--name", "run", "--qat-policy", "None",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        if line.startswith("epoch 1/") or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().endswith("edgesynth: interrupted") and "Traceback" not in err
    run = tmp_path / "runs" / "run"
    names = sorted(p.name for p in run.iterdir())
    assert names == ["best.pth.tar", "checkpoint.pth.tar"], names
    from edgesynth.quant.checkpoint import read_checkpoint

    # The signal may land while epoch 1's checkpoint is written: then epoch 0's stays, whole.
    assert read_checkpoint(run / "checkpoint.pth.tar")["epoch"] in (0, 1)


# --- random command lines ------------------------------------------------------------------


def _options(words: list[str]) -> list[str]:
    parser = build_parser()
    for word in words:
        parser = _subcommands(parser)[word]
    return [s for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")]


QUICK = [p for p in _command_paths() if p[0] not in ("train", "demo", "izer")]
VALUES = [
    str(YAML), str(CKPT), str(SAMPLE), ".", "..", "out", "-1", "0", "99", "abc", "", "MAX78002",
    "missing.npy", "SENTINEL", "tests",
]  # fmt: skip


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    words = draw(st.sampled_from(QUICK))
    options = _options(words)  # `targets` has none
    tokens = st.sampled_from(options + VALUES)
    return [*words, *draw(st.lists(tokens, max_size=7))]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(argv=command_lines())
def test_random_command_lines_never_crash_or_destroy(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever is typed: exit 0, 1 or 2, no traceback, and the user's files are intact."""
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True, exist_ok=True)
    (work / "SENTINEL").write_text("mine")
    (work / "tests" / "keep.txt").write_text("mine too")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run_cli(*argv)
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert (work / "SENTINEL").read_text() == "mine"
    assert (work / "tests" / "keep.txt").read_text() == "mine too"


def test_izer_help_does_not_promise_onnx() -> None:
    result = run_cli("izer", "--help")
    assert result.exit_code == 0
    assert "quantized checkpoint (.pth.tar)" in result.stdout and ".onnx" not in result.stdout


# Run as the program, with a spy on edgesynth.collector.start: what had loaded, and the
# collector's state, when it started; then the collector's state at the end.
COLLECTOR_PROBE = """
import gc, json, sys
from edgesynth import cli, collector
seen = []
real = collector.start
def spy():
    seen.append([gc.get_threshold()[0], sorted(m for m in WATCHED if m in sys.modules)])
    real()
collector.start = spy
sys.argv = ["edgesynth", *ARGS]
code = cli.main()
print(json.dumps([code, seen, gc.get_threshold(), gc.get_freeze_count() > 10000]))
"""


def _collector_probe(args: list[str], watched: list[str], cwd: Path) -> list:
    code = COLLECTOR_PROBE.replace("WATCHED", repr(watched)).replace("ARGS", repr(args))
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd
    )
    return json.loads(run.stdout.splitlines()[-1])


def test_the_program_collects_garbage_once_the_command_is_loaded(tmp_path: Path) -> None:
    """Run as the program, collection waits for start-up, then runs as usual with the
    start-up's objects frozen; a call with an argument list leaves the collector alone."""
    usual = list(gc.get_threshold())
    code, seen, after, frozen = _collector_probe(["targets"], [], tmp_path)
    assert (code, seen, after, frozen) == (0, [[200_000, []]], usual, True)
    before = gc.get_threshold(), gc.get_freeze_count()
    from edgesynth.cli import main

    assert main(["targets"]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


@pytest.mark.corpus
def test_izer_starts_the_collector_once_every_stage_is_loaded(tmp_path: Path) -> None:
    case = CASE / "test-conv1d-1"
    for entry in case.iterdir():
        (tmp_path / entry.name).symlink_to(entry)
    args = json.loads((case / "case.json").read_text())["args"]
    watched = ["edgesynth.targets.max7800x.vdevice.runner", "jinja2"]  # sorted
    code, seen, _, _ = _collector_probe(
        ["izer", *args, "--test-dir", "out", "--prefix", "p"], watched, tmp_path
    )
    assert (code, seen) == (0, [[200_000, watched]])


def test_xdnn_starts_the_collector_once_parsed(tmp_path: Path) -> None:
    """`edgesynth xdnn` reads its own command line (a raw command): it starts the collector
    itself, once, after parsing and before its handler."""
    quant = tmp_path / "quant.json"
    quant.write_text("{}")
    code, seen, after, frozen = _collector_probe(["xdnn", "check-quant", str(quant)], [], tmp_path)
    assert seen == [[200_000, []]]
    assert (after, frozen) == (list(gc.get_threshold()), True)
    assert code == 1  # the handler ran after it: "not an xDNN quantization file"
