"""Every file edgesynth writes goes through here: nothing a user has is lost, nothing is left
half-written.

Folders of results (`output_folder`)::

    plan = output_folder(args.save, overwrite=args.overwrite, inputs=[yaml, checkpoint],
                         option="--save")      # the rules are checked now, before any work
    ...                                        # the long computation
    with plan as out:                          # staging starts
        out.write_npy("layer00.npy", array)    # .npy added when missing, like np.save
        out.write_text("report.json", text)
        out.write_bytes("program.bin", blob)
        torch.save(obj, out.staged("ck.pth.tar"))  # any writer that wants a path
        out.staging                            # the staging folder itself, for a tool that
                                               # writes a whole tree (every file is kept)
    # Leaving the block moves every staged file into place (os.replace, one file at a time,
    # subfolders created as needed). An exception or Ctrl-C instead removes the staging area
    # and every folder the run created; the destination is left as it was.

The rules for an output folder (EdgesynthError naming the option and the folder otherwise):

- it is not an existing file;
- it is not the working directory or a folder that contains it, the home folder or `/`;
- it does not contain, at any depth, one of the run's `inputs`;
- an existing non-empty folder is refused unless `overwrite=True`; with `overwrite` only the
  files the command writes are replaced and nothing else in the folder is touched. With
  `empty_ok=False` any existing folder needs `overwrite` (the vendor izer's rule);
- a file the command writes never replaces a folder (checked before anything is moved).

Single files (`write_file_atomic`, `save_npy_atomic`): written to a hidden staging name in the
destination's folder, then renamed to exactly the name given (no suffix added). An existing
file is refused unless `overwrite=True` (the command's `--overwrite`); a folder, or a file that
is one of the run's `inputs`, is always refused. Folders created for the file are removed again
if the write fails. `check_output_file` / `output_folder` check the rules before a long
computation starts. A read-only file system is one message naming the folder.

Files and folders get the permissions the user's umask gives (0644 / 0755 under umask 022),
never tempfile's private 0600 / 0700.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

from edgesynth.errors import EdgesynthError

STAGING_PREFIX = ".edgesynth-staging-"
Writer = Callable[[BinaryIO], None]
PathLike = str | os.PathLike[str]


def _token() -> str:
    """Eight random hex digits for a staging name (os.urandom: `secrets` costs 10 ms to import)."""
    return os.urandom(4).hex()


def npy_path(path: PathLike) -> Path:
    """np.save's naming: a `.npy` suffix is added when missing; an existing folder is left
    as it is (so the rules refuse it instead of writing `FOLDER.npy` beside it)."""
    path = Path(path)
    if path.suffix == ".npy" or not path.name or path.is_dir():
        return path
    return path.with_name(path.name + ".npy")


def _error(message: str, option: str | None) -> EdgesynthError:
    return EdgesynthError(message, key=option)


def _os_error(action: str, path: Path, err: OSError, option: str | None) -> EdgesynthError:
    if err.errno == errno.EROFS:
        return _error(
            f"cannot write into {path.parent}: it is on a read-only file system; "
            "name a folder you can write to.",
            option,
        )
    return _error(f"cannot {action} {path}: {err.strerror or err}.", option)


def _discard(path: Path) -> None:
    """Remove a staging file if it is there; a clean-up never raises (a read-only file
    system refuses even the removal of a file that was never made)."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def _resolved(paths: Iterable[PathLike | None]) -> list[Path]:
    return [Path(p).resolve() for p in paths if p is not None and str(p) != ""]


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and its ancestors that do not exist yet, outermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def _make_folders(folder: Path, option: str | None) -> list[Path]:
    """Create `folder` and its missing ancestors (umask permissions); returns those created."""
    created: list[Path] = []
    for missing in _missing_folders(folder):
        try:
            os.mkdir(missing)
        except FileExistsError:
            continue
        except OSError as err:
            _remove_empty(created)
            raise _os_error("create", missing, err, option) from None
        created.append(missing)
    if not folder.is_dir():
        _remove_empty(created)
        raise _error(f"cannot create {folder}: a file is in the way.", option)
    return created


def _remove_empty(folders: Sequence[Path]) -> None:
    """Remove `folders` (created by this run) deepest first, each only if it is empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


def _create_exclusive(path: Path, writer: Writer) -> None:
    """Write a new file with the umask's permissions (O_EXCL: never an existing file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "wb") as handle:
        writer(handle)


def _text_writer(text: str) -> Writer:
    return lambda handle: handle.write(text.encode("utf-8"))


def _bytes_writer(data: bytes) -> Writer:
    return lambda handle: handle.write(data)


def _npy_writer(array: np.ndarray) -> Writer:
    return lambda handle: np.save(handle, array, allow_pickle=False)


# ------------------------------------------------------------------------------------------
# The rules.


def _forbidden_reason(folder: Path) -> str | None:
    """Why `folder` (resolved) can never be an output folder, or None."""
    if folder == Path(folder.anchor):
        return "it is the root of the file system"
    home = Path.home().resolve()
    if folder == home:
        return "it is your home folder"
    cwd = Path.cwd().resolve()
    if folder == cwd:
        return "it is the working directory"
    if cwd.is_relative_to(folder):
        return "it contains the working directory"
    return None


def check_output_folder(
    path: PathLike,
    *,
    overwrite: bool = False,
    inputs: Iterable[PathLike | None] = (),
    option: str | None = None,
    empty_ok: bool = True,
) -> Path:
    """Apply the output-folder rules (module docstring) to `path`; returns it as a Path."""
    folder = Path(path)
    if str(path) == "":
        raise _error("needs a folder name, got an empty string.", option)
    # The checks look at the resolved path: `out/../s1` with no `out` yet is `s1`, which the
    # write reaches once `out` is made.
    where = folder.resolve()
    if where.exists() and not where.is_dir():
        raise _error(f"{folder} is a file, not a folder; name a folder for the output.", option)
    reason = _forbidden_reason(where)
    if reason:
        raise _error(f"refusing to write into {folder}: {reason}. Name a new folder.", option)
    for source in _resolved(inputs):
        if source == where or source.is_relative_to(where):
            raise _error(
                f"refusing to write into {folder}: it holds {source}, an input of this run. "
                "Name a folder that holds no input.",
                option,
            )
    if where.is_dir() and not overwrite:
        try:
            non_empty = any(where.iterdir())
        except OSError as err:
            raise _os_error("read", folder, err, option) from None
        if non_empty or not empty_ok:
            state = "is not empty" if non_empty else "exists"
            flag = "--overwrite"
            raise _error(
                f"the output folder {folder} {state}; pass {flag} to replace the files this "
                f"command writes there (nothing else is touched), or name a new folder.",
                option,
            )
    return folder


def check_output_file(
    path: PathLike,
    *,
    overwrite: bool = False,
    inputs: Iterable[PathLike | None] = (),
    option: str | None = None,
) -> Path:
    """The rules for a single output file: not a folder, not one of the run's `inputs`, not
    an existing file unless `overwrite`."""
    if str(path) == "":
        raise _error("needs a file name, got an empty string.", option)
    target = Path(path)
    where = target.resolve()  # `out/../f` with no `out` yet is `f`, which the write reaches
    if where.is_dir():
        raise _error(f"{target} is a folder; name a file for the output.", option)
    for source in _resolved(inputs):
        if source == where:
            raise _error(f"{target} is an input of this run; name another output file.", option)
    if (where.exists() or target.is_symlink()) and not overwrite:
        raise _error(
            f"{target} exists; pass --overwrite to replace it, or name a new file.", option
        )
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise _error(f"cannot write {target}: {parent} is a file, not a folder.", option)
            _check_writable(parent, option)
            break
    return target


def _check_writable(folder: Path, option: str | None) -> None:
    """A file can be made in `folder` (checked by making and removing one): a read-only or
    forbidden place is refused before the run's work, not after it."""
    probe = folder / f".edgesynth-probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    except OSError as err:
        if err.errno == errno.EROFS:
            raise _os_error("write into", probe, err, option) from None
        raise _error(f"cannot write into {folder}: {err.strerror or err}.", option) from None
    _discard(probe)


# ------------------------------------------------------------------------------------------
# Single files.


def write_file_atomic(
    path: PathLike,
    data: bytes | str | None = None,
    *,
    writer: Writer | None = None,
    overwrite: bool = False,
    inputs: Iterable[PathLike | None] = (),
    option: str | None = None,
) -> Path:
    """Write `data` (bytes or UTF-8 text) or whatever `writer(handle)` writes to `path`.

    The file appears complete or not at all, under exactly the name given; an existing file at
    `path` is refused unless `overwrite`, a folder or an input of the run always. Returns `path`.
    """
    if (data is None) == (writer is None):
        raise TypeError("give either data or writer")
    if writer is None:
        writer = _text_writer(data) if isinstance(data, str) else _bytes_writer(data)  # type: ignore[arg-type]
    target = check_output_file(path, overwrite=overwrite, inputs=inputs, option=option)
    created = _make_folders(target.parent, option)
    staging = target.with_name(f".{target.name}.{STAGING_PREFIX[1:]}{_token()}")
    try:
        _create_exclusive(staging, writer)
        # Checked again: the file may have appeared during the computation.
        check_output_file(target, overwrite=overwrite, inputs=inputs, option=option)
        os.replace(staging, target)
    except BaseException as err:
        _discard(staging)
        _remove_empty(created)
        if isinstance(err, OSError):
            raise _os_error("write", target, err, option) from None
        raise
    return target


def save_npy_atomic(
    path: PathLike,
    array: np.ndarray,
    *,
    overwrite: bool = False,
    inputs: Iterable[PathLike | None] = (),
    option: str | None = None,
) -> Path:
    """Save `array` in .npy format to exactly `path` (no suffix added), atomically."""
    return write_file_atomic(
        path, writer=_npy_writer(array), overwrite=overwrite, inputs=inputs, option=option
    )


# ------------------------------------------------------------------------------------------
# Folders.


class OutputFolder:
    """A folder of results written through a staging area (see the module docstring).

    Create it with `output_folder(...)` (which checks the rules at once); use it as a context
    manager to stage and commit the files.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        overwrite: bool = False,
        inputs: Iterable[PathLike | None] = (),
        option: str | None = None,
        empty_ok: bool = True,
    ) -> None:
        self.option = option
        self.overwrite = overwrite
        self._inputs = list(inputs)
        self._empty_ok = empty_ok
        self.path = check_output_folder(
            path, overwrite=overwrite, inputs=self._inputs, option=option, empty_ok=empty_ok
        )
        self._staging: Path | None = None
        self._created: list[Path] = []

    # --- staging ------------------------------------------------------------------------

    @property
    def staging(self) -> Path:
        """The staging folder (inside the destination) while the block runs."""
        if self._staging is None:
            raise RuntimeError("OutputFolder used outside its `with` block")
        return self._staging

    def __enter__(self) -> OutputFolder:
        # Checked again: the folder may have changed during the computation.
        check_output_folder(
            self.path,
            overwrite=self.overwrite,
            inputs=self._inputs,
            option=self.option,
            empty_ok=self._empty_ok,
        )
        self._created = _make_folders(self.path, self.option)
        staging = self.path / f"{STAGING_PREFIX}{_token()}"
        try:
            os.mkdir(staging)
        except OSError as err:
            _remove_empty(self._created)
            raise _os_error("create", staging, err, self.option) from None
        self._staging = staging
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self._commit()
            except BaseException:
                self._abandon()
                raise
        else:
            self._abandon()

    def _abandon(self) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        _remove_empty(self._created)

    def staged(self, name: str | os.PathLike[str]) -> Path:
        """The staging path for `name` (relative, may have subfolders), for writers that take
        a path; its folder exists. The file lands at `self.path / name` on success."""
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts or str(relative) in ("", "."):
            raise ValueError(f"output name must be a relative path inside the folder: {name}")
        target = self.staging / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def _write(self, name: str | os.PathLike[str], writer: Writer) -> Path:
        staged = self.staged(name)
        try:
            _create_exclusive(staged, writer)
        except FileExistsError:
            raise ValueError(f"{name} is written twice in one output folder") from None
        except OSError as err:
            raise _os_error("write", self.path / name, err, self.option) from None
        return self.path / name

    def write_bytes(self, name: str | os.PathLike[str], data: bytes) -> Path:
        """Stage `data` as `name`; returns the final path."""
        return self._write(name, _bytes_writer(data))

    def write_text(self, name: str | os.PathLike[str], text: str) -> Path:
        """Stage `text` (UTF-8) as `name`; returns the final path."""
        return self._write(name, _text_writer(text))

    def write_npy(self, name: str | os.PathLike[str], array: np.ndarray) -> Path:
        """Stage `array` as `name` (`.npy` added when missing); returns the final path."""
        return self._write(npy_path(name), _npy_writer(array))

    # --- commit -------------------------------------------------------------------------

    def _staged_files(self) -> list[Path]:
        files = [
            Path(root, name).relative_to(self.staging)
            for root, _dirs, names in os.walk(self.staging)
            for name in names
        ]
        return sorted(files)

    def _check_conflicts(self, files: list[Path]) -> None:
        for relative in files:
            target = self.path / relative
            if target.is_dir() and not target.is_symlink():
                raise _error(
                    f"cannot write {target}: a folder of that name is in the way.", self.option
                )
            for parent in list(relative.parents)[:-1]:
                existing = self.path / parent
                if existing.exists() and not existing.is_dir():
                    raise _error(
                        f"cannot write {target}: {existing} is a file, not a folder.", self.option
                    )

    def _commit(self) -> None:
        files = self._staged_files()
        self._check_conflicts(files)
        for relative in files:
            target = self.path / relative
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.staging / relative, target)
            except OSError as err:
                raise _os_error("write", target, err, self.option) from None
        shutil.rmtree(self.staging, ignore_errors=True)
        self._staging = None


def output_folder(
    path: PathLike,
    *,
    overwrite: bool = False,
    inputs: Iterable[PathLike | None] = (),
    option: str | None = None,
    empty_ok: bool = True,
) -> OutputFolder:
    """Check the rules for output folder `path` now; use the result in a `with` block to
    write the files (see the module docstring)."""
    return OutputFolder(path, overwrite=overwrite, inputs=inputs, option=option, empty_ok=empty_ok)
