"""Every example command of the README, run as a new user would: in a clean copy of the
repository (the files git tracks, `../shared` beside it), with `edgesynth` on the PATH from
`.venv/bin`, block after block in one shell working directory each.

Skipped, and only these: blocks that need files the repository does not have (named in
`NEEDS_USER_FILES`). (`scripts/test.sh`, which runs this very suite, is named in prose.)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# A block whose commands read files the user brings: (a word in the block, why it is skipped).
NEEDS_USER_FILES = {
    "gati compile model.onnx": "needs the user's float ONNX model (model.onnx) and calibration "
    "batch (calib.npy); the repository ships neither (tests/gati covers these commands)",
    "xdnn compile model.onnx": "needs the user's float ONNX model and calibration batch; "
    "tests/xdnn/test_mnist.py runs these commands' code on trained MNIST networks",
    "--data data/cifar100": "needs the user's CIFAR-100 batches (data/cifar100) and CUDA GPUs; "
    "tests/train/test_distributed.py and test_accel.py run the same options on the CPU",
}


def readme_blocks() -> list[str]:
    """The ```bash blocks of README.md, line continuations joined."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [block.replace("\\\n", " ") for block in blocks]


def _skip_reason(block: str) -> str | None:
    for word, why in NEEDS_USER_FILES.items():
        if word in block:
            return why
    return None


def _is_demo(block: str) -> bool:
    return "scripts/demo.sh" in block


@pytest.fixture
def clean_copy(tmp_path: Path) -> Path:
    """The tracked files only (no out/, logs/, caches), `../shared` beside, `.venv` linked."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    root = tmp_path / "edgesynth"
    for name in filter(None, (f.decode() for f in files)):
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    (tmp_path / "shared").symlink_to(SHARED)
    # The environment is this repository's; setup.sh finds it up to date (its stamp is the
    # digest of pyproject.toml + setup.sh) and installs nothing.
    (root / ".venv").mkdir()
    (root / ".venv" / "bin").symlink_to(REPO / ".venv" / "bin")
    digest = hashlib.sha256(
        (root / "pyproject.toml").read_bytes() + (root / "scripts" / "setup.sh").read_bytes()
    ).hexdigest()
    (root / ".venv" / ".edgesynth-installed").write_text(digest + "\n")
    return root


def _run_block(block: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("EDGESYNTH_DEBUG", None)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def test_the_readme_has_examples() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 6
    assert any("edgesynth izer" in b for b in blocks)
    assert any(_is_demo(b) for b in blocks)


@pytest.mark.slow
def test_readme_command_examples(clean_copy: Path) -> None:
    """Every command block except the demo, in order, in one working copy."""
    ran = 0
    for block in readme_blocks():
        if _is_demo(block) or _skip_reason(block):
            continue
        run = _run_block(block, clean_copy)
        assert run.returncode == 0, f"README block failed:\n{block}\n{run.stdout}\n{run.stderr}"
        assert "Traceback" not in run.stderr
        ran += 1
    assert ran >= 4
    project = clean_copy / "my-project"
    kat = np.load(project / "out" / "mnist" / "kat.npy")
    expected = np.load(SHARED / "corpus" / "cases" / "MAX78000" / "mnist" / "expected_output.npy")
    np.testing.assert_array_equal(kat, expected)
    np.testing.assert_array_equal(np.load(project / "kat.npy"), expected)
    assert len(list((project / "layers").glob("layer*.npy"))) == 5
    assert "processors" in (project / "networks" / "mnist-planned.yaml").read_text()
    assert (project / "out" / "auto" / "cnn.c").is_file()
    assert (clean_copy / "digits-out.npy").is_file() and (clean_copy / "mnist.yaml").is_file()
    assert (clean_copy / "logs" / "mnist" / "qat_best-q.pth.tar").is_file()


@pytest.mark.slow
def test_readme_demo(clean_copy: Path) -> None:
    """`bash scripts/demo.sh` from a clean copy, then again: refused until --overwrite."""
    (block,) = [b for b in readme_blocks() if _is_demo(b)]
    run = _run_block(block, clean_copy)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "equals the 8-bit training model's output value for value" in run.stdout
    assert "identical outputs 100.00%" in run.stdout  # simulator vs 8-bit model, 297 images
    demo_run = clean_copy / "out" / "demo" / "run"
    kat = np.load(demo_run / "kat" / "output.npy")
    assert kat.shape == (10, 1, 1) and kat.dtype == np.int64
    np.testing.assert_array_equal(kat, np.load(demo_run / "evaluate.npy"))
    assert not list((clean_copy / "out").rglob(".edgesynth-staging-*"))
    again = _run_block(block, clean_copy)
    assert again.returncode == 1 and "pass --overwrite" in again.stderr


def test_skips_are_only_for_missing_user_files() -> None:
    for block in readme_blocks():
        reason = _skip_reason(block)
        if reason is None:
            continue
        missing = [w for w in ("model.onnx", "calib.npy", "data/cifar100") if w in block]
        assert missing and not any((REPO / w).exists() for w in missing), block
