"""A folder that behaves as if it were on a read-only file system, inside this process.

Tests run as root in CI, where `chmod` does not stop a write, and mounting a read-only file
system needs privileges; so the operating-system calls that change a file system fail with
EROFS for every path inside the folder, as a read-only mount makes them fail. Note that a
read-only file system refuses even the removal of a file that does not exist: that is the case
the clean-up code must survive.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

_WRITE_MODES = set("wax+")


def _inside(path: Any, folder: Path) -> bool:
    if isinstance(path, int):
        return False
    try:
        return Path(os.path.abspath(os.fspath(path))).is_relative_to(folder)
    except TypeError:
        return False


def _refuse(path: Any) -> OSError:
    return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))


@contextmanager
def read_only(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every write, creation, removal or rename inside `folder` fails with EROFS."""
    folder = Path(os.path.abspath(folder))

    def guard_paths(original: Callable[..., Any], count: int) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if any(_inside(p, folder) for p in args[:count]):
                raise _refuse(args[0])
            return original(*args, **kwargs)

        return guarded

    def guard_open(original: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if _inside(file, folder) and _WRITE_MODES & set(mode):
                raise _refuse(file)
            return original(file, mode, *args, **kwargs)

        return guarded

    def guard_os_open(original: Callable[..., Any]) -> Callable[..., Any]:
        writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def guarded(path: Any, flags: int, *args: Any, **kwargs: Any) -> Any:
            if _inside(path, folder) and flags & writes:
                raise _refuse(path)
            return original(path, flags, *args, **kwargs)

        return guarded

    with monkeypatch.context() as patch:
        for name, count in (
            ("mkdir", 1),
            ("makedirs", 1),
            ("rmdir", 1),
            ("unlink", 1),
            ("remove", 1),
            ("replace", 2),
            ("rename", 2),
            ("link", 2),
            ("symlink", 2),
        ):
            patch.setattr(os, name, guard_paths(getattr(os, name), count))
        patch.setattr(os, "open", guard_os_open(os.open))
        patch.setattr(builtins, "open", guard_open(builtins.open))
        patch.setattr(io, "open", guard_open(io.open))
        yield
