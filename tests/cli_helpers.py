"""Run the `edgesynth` entry point in-process and capture what a user would see."""

from __future__ import annotations

import contextlib
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CliResult:
    """One `edgesynth` run: exit status, stdout, stderr."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str | Path) -> CliResult:
    """`run_cli("gati", "decode", path)` is `edgesynth gati decode PATH`."""
    from edgesynth.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([str(a) for a in args])
    return CliResult(status, out.getvalue(), err.getvalue())


def snapshot(root: Path) -> dict[str, str]:
    """Every file (with a digest of its content) and folder under `root`: compared before and
    after a command, it shows any user file replaced, lost or left behind."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "folder"
        for p in sorted(root.rglob("*"))
    }
