"""Every example block of the README, run as a new user would: in a clean copy of the
repository (the files git tracks, `../shared` beside it), with `edgesynth` on the PATH, in the
README's order, each block starting where the one before it left the shell (the README says
each starts and ends in the repository folder).

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# A block whose commands read files the user brings: (a word in the block, why it is skipped).
NEEDS_USER_FILES = {
    "--data data/cifar100": "needs the user's CIFAR-100 batches (data/cifar100) and CUDA GPUs; "
    "tests/train/test_distributed.py and test_accel.py run the same options on the CPU",
}
GIT = ["git", "-c", "user.name=readme", "-c", "user.email=readme@example.invalid"]


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


def _clean_copy(root: Path) -> Path:
    """The tracked files only (no out/, logs/, caches) as a new git repository, `../shared`
    beside it, `.venv` the running environment."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    (root.parent / "shared").symlink_to(SHARED)
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "clean copy"], cwd=root, check=True)
    # setup.sh finds this environment up to date (its stamp is the digest of pyproject.toml +
    # setup.sh) and installs nothing.
    (root / ".venv").mkdir()
    (root / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    digest = hashlib.sha256(
        (root / "pyproject.toml").read_bytes() + (root / "scripts" / "setup.sh").read_bytes()
    ).hexdigest()
    (root / ".venv" / ".edgesynth-installed").write_text(digest + "\n")
    return root


def _run_block(block: str, cwd: Path, root: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """One block in bash from `cwd`; the result and the folder the block ends in."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(root / "src"),  # the copy's code, not the checkout's
    }
    env.pop("EDGESYNTH_DEBUG", None)
    where = root.parent / "pwd-after-block"
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f'{block}\npwd > "{where}"\n'],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    ended = Path(where.read_text().strip()) if run.returncode == 0 else cwd
    return run, ended


@dataclass
class Ran:
    block: str
    run: subprocess.CompletedProcess
    ended: Path


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Ran]]:
    """Every block in order; stops at the first that fails (the rest would start wrong)."""
    root = _clean_copy(tmp_path_factory.mktemp("readme") / "edgesynth")
    ran: list[Ran] = []
    cwd = root
    for block in readme_blocks():
        if _skip_reason(block):
            continue
        run, cwd = _run_block(block, cwd, root)
        ran.append(Ran(block, run, cwd))
        if run.returncode != 0:
            break
    return root, ran


def test_the_readme_has_examples() -> None:
    blocks = readme_blocks()
    assert len(blocks) >= 6
    assert any("edgesynth izer" in b for b in blocks)
    assert any(_is_demo(b) for b in blocks)


@pytest.mark.slow
def test_readme_blocks_run_in_order_and_end_in_the_repository(readme_run) -> None:
    root, ran = readme_run
    for r in ran:
        output = f"{r.run.stdout}\n{r.run.stderr}"
        assert r.run.returncode == 0, f"README block failed:\n{r.block}\n{output}"
        assert "Traceback" not in r.run.stderr, r.block
        assert r.ended == root, f"README block ends in {r.ended}, not the repository:\n{r.block}"
    skipped = sum(1 for b in readme_blocks() if _skip_reason(b))
    assert len(ran) + skipped == len(readme_blocks())


@pytest.mark.slow
def test_readme_commands_write_what_they_say(readme_run) -> None:
    root, _ = readme_run
    project = root / "my-project"
    kat = np.load(project / "out" / "mnist" / "kat.npy")
    expected = np.load(SHARED / "corpus" / "cases" / "MAX78000" / "mnist" / "expected_output.npy")
    np.testing.assert_array_equal(kat, expected)
    np.testing.assert_array_equal(np.load(project / "kat.npy"), expected)
    assert len(list((project / "layers").glob("layer*.npy"))) == 5
    assert "processors" in (project / "networks" / "mnist-planned.yaml").read_text()
    assert (project / "out" / "auto" / "cnn.c").is_file()
    assert (root / "digits-out.npy").is_file() and (root / "mnist.yaml").is_file()
    assert (root / "logs" / "mnist" / "qat_best-q.pth.tar").is_file()
    for outputs in ("gati-y.npy", "xdnn-y.npy"):  # 297 held-out digits, 10 classes
        assert np.load(root / outputs).shape == (297, 10)
    assert (root / "pulp-c.npz").is_file()


@pytest.mark.slow
def test_readme_demo_proves_the_known_answer(readme_run) -> None:
    root, ran = readme_run
    (demo,) = [r for r in ran if _is_demo(r.block)]
    assert "equals the 8-bit training model's output value for value" in demo.run.stdout
    assert "identical outputs 100.00%" in demo.run.stdout  # simulator vs 8-bit model, 297 images
    demo_run = root / "out" / "demo" / "run"
    kat = np.load(demo_run / "kat" / "output.npy")
    assert kat.shape == (10, 1, 1) and kat.dtype == np.int64
    np.testing.assert_array_equal(kat, np.load(demo_run / "evaluate.npy"))
    assert not list((root / "out").rglob(".edgesynth-staging-*"))


@pytest.mark.slow
def test_readme_leaves_only_files_gitignore_covers(readme_run) -> None:
    root, _ = readme_run
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == "", f"following the README leaves files .gitignore does not cover:\n{status}"


@pytest.mark.slow
def test_readme_demo_again_is_refused(readme_run) -> None:
    root, _ = readme_run
    (block,) = [b for b in readme_blocks() if _is_demo(b)]
    again, _ = _run_block(block, root, root)
    assert again.returncode == 1 and "pass --overwrite" in again.stderr


def test_skips_are_only_for_missing_user_files() -> None:
    for block in readme_blocks():
        reason = _skip_reason(block)
        if reason is None:
            continue
        missing = [w for w in ("data/cifar100",) if w in block]
        assert missing and not any((REPO / w).exists() for w in missing), block
