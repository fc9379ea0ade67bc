"""Python files the user names on the command line (`--model-file FILE.py:NAME`,
`--dataset-file FILE.py:NAME`): imported, the name looked up, and every failure turned into one
EdgesynthError naming the file and line.

Where the user's own code raised, the message ends with the frames of that traceback that lie
in the user's file, under a line that says so; failures inside edgesynth or PyTorch are never
shown as a traceback.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from edgesynth.errors import EdgesynthError, did_you_mean

USER_TRACEBACK = "traceback of your code (most recent call last):"


@dataclass(frozen=True)
class UserRef:
    """`FILE.py:NAME` from the command line."""

    path: Path
    name: str
    option: str  # the option that named it, for messages

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"


def parse_ref(text: str, option: str) -> UserRef:
    """`my_models.py:MyNet` -> UserRef; a missing `:NAME` or file is one message."""
    path, sep, name = str(text).rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise EdgesynthError(
            f"expected FILE.py:NAME (e.g. my_models.py:MyNet), got `{text}`.", key=option
        )
    file = Path(path)
    if not file.is_file():
        raise EdgesynthError("no such file.", file=path, key=option)
    if file.suffix != ".py":
        raise EdgesynthError("expected a Python file (.py).", file=path, key=option)
    return UserRef(file, name, option)


def user_frames(tb: TracebackType | None, path: Path) -> list[traceback.FrameSummary]:
    """The frames of `tb` that run code of the user's file."""
    where = str(path.resolve())
    return [f for f in traceback.extract_tb(tb) if str(Path(f.filename).resolve()) == where]


def describe_user_failure(err: BaseException, path: Path, what: str) -> EdgesynthError:
    """`what` failed because the user's code raised `err`: one message at the user's deepest
    line, followed by that code's traceback, marked as such."""
    frames = user_frames(err.__traceback__, path)
    line = frames[-1].lineno if frames else None
    lines = [f"{what} failed: {type(err).__name__}: {err}"]
    if frames:
        lines.append(f"  {USER_TRACEBACK}")
        for f in frames:
            lines.append(f"    {Path(f.filename).name}:{f.lineno} in {f.name}: {f.line}")
    return EdgesynthError("\n".join(lines), file=str(path), line=line)


def import_file(path: Path) -> ModuleType:
    """Import the user's file as a module of its own (named after its absolute path, so each
    process of a data-parallel run imports the same file under the same name)."""
    where = path.resolve()
    digest = hashlib.sha1(str(where).encode()).hexdigest()[:12]
    name = f"edgesynth_user_{where.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, where)
    if spec is None or spec.loader is None:
        raise EdgesynthError("cannot be imported as a Python module.", file=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(where.parent)
    added = folder not in sys.path
    if added:  # the file's own helpers beside it import as they would for `python FILE.py`
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        del sys.modules[name]
        raise EdgesynthError(f"syntax error: {err.msg}.", file=str(path), line=err.lineno) from None
    except EdgesynthError:
        del sys.modules[name]
        raise
    except Exception as err:
        del sys.modules[name]
        raise describe_user_failure(err, path, "importing the file") from None
    finally:
        if added:
            sys.path.remove(folder)
    return module


def lookup(ref: UserRef, kind: str) -> Any:
    """`ref.name` in `ref.path`; a missing name lists what the file defines of that `kind`."""
    module = import_file(ref.path)
    if hasattr(module, ref.name):
        return getattr(module, ref.name)
    defined = sorted(
        k
        for k, v in vars(module).items()
        if not k.startswith("_") and getattr(v, "__module__", None) == module.__name__
    )
    listed = f"; it defines {', '.join(defined)}" if defined else ""
    raise EdgesynthError(
        f"no {kind} `{ref.name}` in this file{listed}." + did_you_mean(ref.name, defined),
        file=str(ref.path),
        key=ref.option,
    )


def definition_line(obj: Any) -> int | None:
    """The line where a class or function is defined (None when unknown)."""
    code = getattr(obj, "__code__", None)
    if code is not None:
        return int(code.co_firstlineno)
    import inspect

    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None
