"""The one output mechanism (`edgesynth.outputs`): nothing a user has is lost, nothing is left
half-written, permissions come from the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import (
    STAGING_PREFIX,
    check_output_file,
    check_output_folder,
    output_folder,
    save_npy_atomic,
    write_file_atomic,
)
from readonly_fs import read_only


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its content (relative names)."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory and a home folder that are not `tmp_path`."""
    work = tmp_path / "work"
    home = tmp_path / "home"
    work.mkdir()
    home.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "space"
    root.mkdir()
    return root


def test_new_folder_gets_the_files_with_umask_permissions(elsewhere: Path, umask022) -> None:
    dest = elsewhere / "a" / "b"
    with output_folder(dest) as out:
        assert out.write_npy("x", np.arange(3)) == dest / "x.npy"
        out.write_text("sub/r.json", "{}\n")
        out.write_bytes("p.bin", b"\x01\x02")
        (out.staged("by-path.txt")).write_text("path writer")
        assert not (dest / "x.npy").exists()  # nothing in place before the block ends
    assert sorted(tree(dest)) == ["by-path.txt", "p.bin", "sub/r.json", "x.npy"]
    assert np.load(dest / "x.npy").tolist() == [0, 1, 2]
    for path in (dest / "x.npy", dest / "p.bin", dest / "sub" / "r.json"):
        assert mode(path) == 0o644, path
    for folder in (elsewhere / "a", dest, dest / "sub"):
        assert mode(folder) == 0o755, folder


def test_single_file_permissions_and_no_leftovers(elsewhere: Path, umask022) -> None:
    target = elsewhere / "new" / "y"
    assert save_npy_atomic(target, np.ones(2)) == target  # exactly the name given
    assert np.load(target).tolist() == [1.0, 1.0]
    assert mode(target) == 0o644 and mode(target.parent) == 0o755
    write_file_atomic(target, b"replaced", overwrite=True)
    assert target.read_bytes() == b"replaced"
    assert [p.name for p in target.parent.iterdir()] == ["y"]


@pytest.mark.parametrize("write", ["text", "npy", "check"])
def test_an_existing_file_needs_overwrite(elsewhere: Path, write: str) -> None:
    target = elsewhere / "notes.txt"
    target.write_text("the user's notes")
    with pytest.raises(EdgesynthError, match=r"notes\.txt exists; pass --overwrite") as info:
        if write == "text":
            write_file_atomic(target, "replaced", option="-o")
        elif write == "npy":
            save_npy_atomic(target, np.ones(2), option="-o")
        else:
            check_output_file(target, option="-o")
    assert "`-o`" in str(info.value)
    assert target.read_text() == "the user's notes"
    assert [p.name for p in elsewhere.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("where", ["file", "new-folder", "folder"])
def test_a_read_only_file_system_is_one_message(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The clean-up after a refused write must not fail in turn (a read-only file system
    refuses even the removal of a staging file that was never made)."""
    (elsewhere / "ro").mkdir()
    before = tree(elsewhere)
    with read_only(elsewhere / "ro", monkeypatch), pytest.raises(EdgesynthError) as info:
        if where == "file":
            write_file_atomic(elsewhere / "ro" / "y.npy", b"x", option="--output")
        elif where == "new-folder":
            write_file_atomic(elsewhere / "ro" / "a" / "y.npy", b"x", option="--output")
        else:
            with output_folder(elsewhere / "ro", option="-o") as out:
                out.write_text("r.txt", "x")
    message = str(info.value)
    assert f"cannot write into {elsewhere / 'ro'}: it is on a read-only file system" in message
    assert message.startswith("`")  # the option is named
    assert tree(elsewhere) == before


def test_failure_leaves_no_staging_and_no_created_folders(elsewhere: Path) -> None:
    dest = elsewhere / "made" / "by" / "run"
    with pytest.raises(RuntimeError), output_folder(dest) as out:
        out.write_text("half.txt", "x")
        raise RuntimeError("boom")
    assert list(elsewhere.iterdir()) == []


def test_interrupt_in_an_existing_folder_changes_nothing(elsewhere: Path) -> None:
    dest = elsewhere / "results"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    before = tree(dest)
    with pytest.raises(KeyboardInterrupt), output_folder(dest, overwrite=True) as out:
        out.write_text("keep.txt", "theirs")
        raise KeyboardInterrupt
    assert tree(dest) == before
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


def test_single_file_failure_keeps_the_old_file(elsewhere: Path) -> None:
    target = elsewhere / "k.npy"
    target.write_bytes(b"old")

    def writer(handle) -> None:
        handle.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file_atomic(target, writer=writer, overwrite=True)
    assert target.read_bytes() == b"old"
    assert [p.name for p in elsewhere.iterdir()] == ["k.npy"]


def test_non_empty_folder_needs_overwrite_and_then_keeps_other_files(elsewhere: Path) -> None:
    dest = elsewhere / "out"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    (dest / "a.bin").write_bytes(b"old")
    with pytest.raises(EdgesynthError, match=r"`--out`: the output folder .* is not empty"):
        output_folder(dest, option="--out")
    with output_folder(dest, overwrite=True) as out:
        out.write_bytes("a.bin", b"new")
    assert tree(dest) == {"a.bin": b"new", "notes.txt": b"mine"}


def test_empty_folder_is_fine_unless_empty_ok_is_false(elsewhere: Path) -> None:
    dest = elsewhere / "empty"
    dest.mkdir()
    with output_folder(dest) as out:
        out.write_bytes("f", b"1")
    (dest / "f").unlink()
    with pytest.raises(EdgesynthError, match="exists; pass --overwrite"):
        output_folder(dest, empty_ok=False)
    assert dest.is_dir()  # never removed


@pytest.mark.parametrize("where", ["cwd", "parent-of-cwd", "home", "root", "input-folder"])
def test_forbidden_folders(elsewhere: Path, where: str) -> None:
    data = elsewhere / "project" / "networks"
    data.mkdir(parents=True)
    (data / "net.yaml").write_text("arch: x\n")
    folder = {
        "cwd": Path("."),
        "parent-of-cwd": Path.cwd().parent,
        "home": Path.home(),
        "root": Path("/"),
        "input-folder": elsewhere / "project",
    }[where]
    before = tree(elsewhere)
    with pytest.raises(EdgesynthError, match="refusing to write into"):
        output_folder(folder, overwrite=True, inputs=[data / "net.yaml"], option="--save")
    assert tree(elsewhere) == before


def test_file_rules(elsewhere: Path) -> None:
    (elsewhere / "in.npy").write_bytes(b"input")
    with pytest.raises(EdgesynthError, match="is an input of this run"):
        check_output_file(elsewhere / "in.npy", inputs=[elsewhere / "in.npy"])
    with pytest.raises(EdgesynthError, match="is a folder"):
        write_file_atomic(elsewhere, b"x")
    with pytest.raises(EdgesynthError, match="is a file, not a folder"):
        write_file_atomic(elsewhere / "in.npy" / "x.npy", b"x")
    with pytest.raises(EdgesynthError, match="is a file, not a folder"):
        output_folder(elsewhere / "in.npy")
    assert (elsewhere / "in.npy").read_bytes() == b"input"


def test_a_file_never_replaces_a_folder(elsewhere: Path) -> None:
    dest = elsewhere / "out"
    (dest / "a.npy").mkdir(parents=True)
    (dest / "a.npy" / "inside").write_text("keep")
    in_the_way = pytest.raises(EdgesynthError, match="a folder of that name is in the way")
    with in_the_way, output_folder(dest, overwrite=True) as out:
        out.write_bytes("b.bin", b"1")
        out.write_npy("a", np.zeros(1))
    assert tree(dest) == {"a.npy/inside": b"keep"}  # nothing moved, b.bin included


names = st.lists(
    st.text(alphabet="abcXYZ019_-", min_size=1, max_size=8).map(lambda s: s + ".bin"),
    min_size=1,
    max_size=6,
    unique=True,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    existing=st.dictionaries(
        st.text(alphabet="abcXYZ019", min_size=1, max_size=6), st.binary(max_size=8), max_size=5
    ),
    written=names,
    fail=st.booleans(),
)
def test_overwrite_touches_exactly_the_written_files(
    elsewhere: Path, existing: dict[str, bytes], written: list[str], fail: bool
) -> None:
    """Property: with --overwrite, after success the folder holds the old files with the
    written names replaced; after a failure it is exactly as before; never a staging file."""
    dest = elsewhere / "prop"
    dest.mkdir(exist_ok=True)
    for old in dest.iterdir():
        old.unlink()
    for name, data in existing.items():
        (dest / name).write_bytes(data)
    before = tree(dest)
    try:
        with output_folder(dest, overwrite=True) as out:
            for i, name in enumerate(written):
                out.write_bytes(name, bytes([i]))
            if fail:
                raise ValueError("fails")
    except ValueError:
        assert tree(dest) == before
    else:
        assert tree(dest) == {**before, **{n: bytes([i]) for i, n in enumerate(written)}}
    assert not any(p.name.startswith(STAGING_PREFIX) for p in dest.iterdir())


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=200), st.booleans())
def test_write_file_atomic_all_or_nothing(elsewhere: Path, data: bytes, fail: bool) -> None:
    target = elsewhere / "f.bin"
    target.write_bytes(b"previous")

    def writer(handle) -> None:
        handle.write(data)
        if fail:
            raise OSError(28, "No space left on device")

    if fail:
        with pytest.raises(EdgesynthError, match="No space left on device"):
            write_file_atomic(target, writer=writer, overwrite=True, option="--output")
        assert target.read_bytes() == b"previous"
    else:
        write_file_atomic(target, writer=writer, overwrite=True)
        assert target.read_bytes() == data
    assert [p.name for p in elsewhere.iterdir()] == ["f.bin"]


def test_a_path_through_a_missing_folder_is_checked_where_it_lands(tmp_path: Path) -> None:
    """`out/../s1` with no `out` yet writes into `s1`: its files are the user's."""
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / "keep.txt").write_text("mine")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(EdgesynthError, match="is not empty"):
        check_output_folder(tmp_path / "out" / ".." / "s1")
    with pytest.raises(EdgesynthError, match="exists"):
        check_output_file(tmp_path / "out" / ".." / "notes.txt")
    assert not (tmp_path / "out").exists()
