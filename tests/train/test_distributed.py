"""Data-parallel training on this machine's CPU: two processes under torch.distributed (Gloo).

Each test starts `edgesynth train --nproc-per-node 2` as a user would and checks what lands on
disk: one run folder, one set of checkpoints, rank 0's lines once; a resume across the two
kinds of run; and a killed process ending the run with one clear line and status 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from edgesynth.quant.checkpoint import read_checkpoint

pytestmark = pytest.mark.train

MNIST = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mnist"


def _edgesynth(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgesynth", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def _policy(tmp: Path, start: int) -> str:
    path = tmp / f"policy{start}.yaml"
    path.write_text(f"start_epoch: {start}\nweight_bits: 8\n")
    return str(path)


COMMON = ["--device", "cpu", "--no-progress", "--seed", "3", "--batch-size", "64"]


def test_two_processes_train_qat_and_quantize_into_one_run_folder(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    done = _edgesynth(
        "train",
        "--dataset",
        "mnist-test-split",
        "--data",
        str(MNIST),
        "--train-limit",
        "1500",
        "--epochs",
        "2",
        "--qat-policy",
        _policy(tmp_path, 1),
        "--nproc-per-node",
        "2",
        "--simulate",
        "30",
        "--out-dir",
        str(logs),
        *COMMON,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Data-parallel training: 2 processes (2 on this node), backend Gloo" in out
    assert "2 processes)" in out  # rank 0's device line
    # Rank 0 alone prints and writes: each line once.
    assert out.count("epoch 1/1 QAT:") == 1
    assert out.count("8-bit (quantized) test top1") == 1
    assert "identical outputs 100.00%" in out
    assert "Traceback" not in done.stderr
    runs = list(logs.iterdir())
    assert len(runs) == 1
    names = sorted(p.name for p in runs[0].iterdir())
    assert names == [
        "ai85net5.yaml",
        "best.pth.tar",
        "checkpoint.pth.tar",
        "qat_best-q.pth.tar",
        "qat_best.pth.tar",
        "qat_checkpoint.pth.tar",
    ]
    ck = read_checkpoint(runs[0] / "qat_checkpoint.pth.tar")
    assert ck["epoch"] == 1
    assert not any(k.startswith("module.") for k in ck["state_dict"])


def test_resume_goes_between_one_and_two_processes(tmp_path: Path) -> None:
    """A single-process run's checkpoint continues under two processes, and that run's
    checkpoint continues in one process again; the epochs count on."""
    logs = tmp_path / "logs"
    base = ["train", "--dataset", "synthetic", "--out-dir", str(logs), *COMMON]
    policy = _policy(tmp_path, 1)
    first = _edgesynth(*base, "--epochs", "1", "--qat-policy", policy, "--name", "one")
    assert first.returncode == 0, first.stderr
    second = _edgesynth(
        *base,
        "--epochs",
        "2",
        "--qat-policy",
        policy,
        "--name",
        "two",
        "--nproc-per-node",
        "2",
        "--resume",
        str(logs / "one" / "checkpoint.pth.tar"),
    )
    assert second.returncode == 0, second.stderr
    assert "epoch 1: quantization-aware training starts" in second.stdout
    assert "epoch 0/" not in second.stdout
    third = _edgesynth(
        *base,
        "--epochs",
        "3",
        "--qat-policy",
        policy,
        "--name",
        "three",
        "--resume",
        str(logs / "two" / "qat_checkpoint.pth.tar"),
    )
    assert third.returncode == 0, third.stderr
    assert "epoch 2/2 QAT:" in third.stdout and "epoch 1/" not in third.stdout
    assert read_checkpoint(logs / "three" / "qat_checkpoint.pth.tar")["epoch"] == 2
    assert sorted(p.name for p in logs.iterdir()) == ["one", "three", "two"]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_a_killed_process_ends_the_run_with_one_line_and_status_1(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgesynth",
            "train",
            "--dataset",
            "synthetic",
            "--epochs",
            "400",
            "--nproc-per-node",
            "2",
            "--out-dir",
            str(logs),
            "--name",
            "run",
            *COMMON,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while not (logs / "run" / "checkpoint.pth.tar").exists():
            assert launcher.poll() is None, launcher.communicate()
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.2)
        ranks = {_rank_of(p): p for p in _descendants(launcher.pid)}
        assert 1 in ranks, ranks
        os.kill(ranks[1], signal.SIGKILL)
        _out, err = launcher.communicate(timeout=120)  # no hang
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 1, err
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last.startswith("edgesynth: error: training process rank 1 was killed by signal SIGKILL")
    assert "Traceback" not in err
    # The checkpoints rank 0 finished are kept.
    assert torch.is_tensor(
        next(iter(read_checkpoint(logs / "run" / "checkpoint.pth.tar")["state_dict"].values()))
    )


def test_the_failure_named_is_the_killed_process_not_the_one_that_lost_it() -> None:
    """The launcher may see the survivor's exit (status 1, lost contact) before the killed
    process; the line names the killed one. Among exits alone, the earliest."""
    from types import SimpleNamespace

    from edgesynth.train.distributed import Launch, _failure_line

    spec = Launch(nproc_per_node=2)
    lost = SimpleNamespace(exitcode=1, timestamp=10)
    killed = SimpleNamespace(exitcode=-signal.SIGKILL, timestamp=20)
    line = _failure_line(SimpleNamespace(failures={0: lost, 1: killed}), spec)
    assert line.startswith("training process rank 1 was killed by signal SIGKILL")
    later = SimpleNamespace(exitcode=2, timestamp=30)
    line = _failure_line(SimpleNamespace(failures={0: later, 1: lost}), spec)
    assert line.startswith("training process rank 1 exited with 1")
