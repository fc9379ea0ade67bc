"""Ctrl-C after the CP-SAT solver has run: exit status 130, "interrupted", nothing left.

OR-Tools catches SIGINT during a solve unless told not to, and left to itself makes a later
Ctrl-C kill the process by signal (no message, staging files left in the output folder). Each
case runs a real `edgesynth` process that has solved at least once and has its output staged,
sends it SIGINT, and checks the exit status, the one message and the user's files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from edgesynth.outputs import STAGING_PREFIX

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared"
MNIST = SHARED / "corpus" / "cases" / "MAX78000" / "mnist"
PULP = SHARED / "pulp" / "cases" / "eegnet_1d_8b_Hx1" / "network.onnx"
SRC = HERE.parents[1] / "src"

pytest.importorskip("ortools")


def _project(root: Path) -> None:
    """The MNIST network without placement keys (the planner's CP-SAT model places it), its
    checkpoint and sample, a PULP network, a non-empty folder and a file of the user's."""
    data = yaml.safe_load((MNIST / "networks" / "mnist-chw-ai85.yaml").read_text())
    for layer in data["layers"]:
        for key in ("processors", "output_processors", "in_offset", "out_offset"):
            layer.pop(key, None)
    (root / "net.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copy(MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar", root / "ck.pth.tar")
    shutil.copytree(MNIST / "tests", root / "tests")
    shutil.copy(PULP, root / "pulp.onnx")
    (root / "busy").mkdir()
    (root / "busy" / "notes.txt").write_text("the user's notes\n")
    (root / "planned.yaml").write_text("the user's old plan\n")


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


CASES = {
    "pulp compile (folder)": ["pulp", "compile", "pulp.onnx", "-o", "busy", "--overwrite"],
    "compile max78000 (new folder)": [
        "compile", "net.yaml", "--checkpoint", "ck.pth.tar", "-t", "max78000", "-o", "out/new",
    ],
    "plan -o (file)": ["plan", "net.yaml", "ck.pth.tar", "-o", "planned.yaml", "--overwrite"],
}  # fmt: skip


@pytest.mark.skipif(not (MNIST.is_dir() and PULP.is_file()), reason="needs ../shared")
@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_ctrl_c_after_the_solver_exits_130_and_leaves_nothing(
    tmp_path: Path, argv: list[str]
) -> None:
    _project(tmp_path)
    before = _digests(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
    process = subprocess.Popen(
        [sys.executable, str(HERE / "interrupt_driver.py"), *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        ready = process.stderr.readline()
        assert ready.startswith("staged after "), ready + process.stderr.read()
        assert int(ready.split()[2]) >= 1, f"no CP-SAT solve ran: {ready}"
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        status = process.wait(timeout=60)
    finally:
        process.kill()
    assert status == 130, f"exit status {status}: {rest!r}"
    assert rest == "edgesynth: interrupted\n"
    assert _digests(tmp_path) == before
    assert not list(tmp_path.rglob(f"*{STAGING_PREFIX[1:]}*")), "staging files left behind"
    assert not (tmp_path / "out").exists()
