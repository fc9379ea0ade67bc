"""Reading PyTorch checkpoints without torch: the vendor's files, all dtypes, and bad files."""

from __future__ import annotations

import collections
import os
import pickle
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.frontends.torchfile import (
    Placeholder,
    read_torch_file,
    read_torch_object,
    write_torch_file,
)

CORPUS = Path(__file__).parents[2].parent / "shared" / "corpus"
CHECKPOINTS = sorted(
    [*CORPUS.glob("cases/*/*/trained/*.pth.tar"), *CORPUS.glob("cases/*/*/tests/*.pth.tar")]
)
SRC = Path(__file__).parents[2] / "src"


def _corpus_params(paths: list[Path]) -> list:
    return needs.corpus_params(paths, CORPUS / "cases")


def _need_corpus() -> None:
    assert CHECKPOINTS, needs.in_corpus(CORPUS / "cases")


def _is_legacy(path: Path) -> bool:
    return not zipfile.is_zipfile(path)


def _corpus_pick(name: str) -> Path:
    for path in CHECKPOINTS:
        if str(path).endswith(name):
            return path
    return needs.in_corpus(CORPUS / "cases" / name)


# ------------------------------------------------------------------------------------------
# the vendor's checkpoints


@pytest.mark.parametrize("path", _corpus_params(CHECKPOINTS))
def test_every_corpus_checkpoint_loads(path: Path) -> None:
    data = read_torch_file(path)
    assert isinstance(data["arch"], str) and data["arch"]
    state = data["state_dict"]
    assert state, "empty state_dict"
    for key, value in state.items():
        assert isinstance(key, str)
        assert isinstance(value, np.ndarray), key
        assert value.dtype in (np.float32, np.int64), (key, value.dtype)


def test_corpus_has_both_formats() -> None:
    _need_corpus()
    assert any(_is_legacy(p) for p in CHECKPOINTS)
    assert any(not _is_legacy(p) for p in CHECKPOINTS)


def test_vendor_objects_become_placeholders() -> None:
    data = read_torch_file(_corpus_pick("MAX78000/mnist/trained/ai85-mnist-qat8-q.pth.tar"))
    opt = data["optimizer_type"]
    assert isinstance(opt, type) and issubclass(opt, Placeholder)
    assert (opt.module, opt.qualname) == ("torch.optim.sgd", "SGD")
    assert data["epoch"] == 194
    assert data["extras"]["best_top1"] == pytest.approx(99.3)
    # the optimizer state is kept (tensors as arrays), not dropped
    assert isinstance(data["optimizer_state_dict"], dict)


def test_legacy_corpus_checkpoint_values() -> None:
    path = _corpus_pick("MAX78000/test-cifar10-hwc/tests/test-cifar10-bias.pth.tar")
    assert _is_legacy(path)
    state = read_torch_file(path)["state_dict"]
    assert list(state)[:2] == ["conv1.conv2d.weight", "conv1.conv2d.bias"]
    assert state["conv1.conv2d.weight"].shape == (60, 3, 3, 3)
    assert state["fc.weight"].shape == (10, 192)


def test_largest_checkpoint_does_not_import_torch() -> None:
    _need_corpus()
    largest = max(CHECKPOINTS, key=lambda p: p.stat().st_size)
    legacy = next(p for p in CHECKPOINTS if _is_legacy(p))
    code = (
        "import sys\n"
        "from edgesynth.frontends.torchfile import read_torch_file\n"
        "from edgesynth.targets.max7800x.description.checkpoint import load_checkpoint\n"
        "for p in sys.argv[1:]:\n"
        "    read_torch_file(p)\n"
        "    load_checkpoint(p)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", code, str(largest), str(legacy)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# ------------------------------------------------------------------------------------------
# round trips through our own writer (no torch needed)


def test_round_trip_all_dtypes(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    arrays = {
        "f32": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "f64": rng.standard_normal(5),
        "f16": rng.standard_normal((3, 2)).astype(np.float16),
        "i8": rng.integers(-128, 128, (4, 4), dtype=np.int8),
        "u8": rng.integers(0, 256, 7, dtype=np.uint8),
        "i16": rng.integers(-(2**15), 2**15, 6, dtype=np.int16),
        "i32": rng.integers(-(2**31), 2**31, 6, dtype=np.int32),
        "i64": rng.integers(-(2**62), 2**62, (2, 2, 2), dtype=np.int64),
        "bool": np.array([True, False, True]),
        "scalar": np.array(-3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.int8),
        "noncontig": np.arange(24, dtype=np.int64).reshape(4, 6)[:, ::2],
    }
    path = tmp_path / "all.pth.tar"
    write_torch_file(path, {"state_dict": collections.OrderedDict(arrays), "epoch": 1})
    back = read_torch_file(path)
    assert back["epoch"] == 1
    assert isinstance(back["state_dict"], collections.OrderedDict)
    assert list(back["state_dict"]) == list(arrays)
    for key, want in arrays.items():
        got = back["state_dict"][key]
        assert got.dtype == want.dtype, key
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got, want)


def test_big_endian_archive(tmp_path: Path) -> None:
    values = np.arange(-3, 9, dtype=np.int32).reshape(3, 4)
    floats = np.linspace(-1, 1, 5, dtype=np.float32)
    little = tmp_path / "little.pt"
    write_torch_file(little, {"a": values, "b": floats})
    big = tmp_path / "big.pt"
    with zipfile.ZipFile(little) as src, zipfile.ZipFile(big, "w") as dst:
        for name in src.namelist():
            raw = src.read(name)
            if name.endswith("/byteorder"):
                raw = b"big"
            elif name.endswith("/data/0"):
                raw = values.astype(">i4").tobytes()
            elif name.endswith("/data/1"):
                raw = floats.astype(">f4").tobytes()
            dst.writestr(name, raw)
    back = read_torch_file(big)
    np.testing.assert_array_equal(back["a"], values)
    np.testing.assert_array_equal(back["b"], floats)
    assert back["a"].dtype.isnative


def _zip_with_pickle(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/version", "3\n")
    return path


def test_unknown_classes_are_inert_placeholders(tmp_path: Path) -> None:
    module = types.ModuleType("fake_distiller_scheduler")

    class CompressionScheduler:
        def __init__(self) -> None:
            self.policies = {"epoch": [1, 2]}
            self.masks = collections.OrderedDict(a=1)

    CompressionScheduler.__module__ = module.__name__
    CompressionScheduler.__qualname__ = "CompressionScheduler"
    module.CompressionScheduler = CompressionScheduler
    sys.modules[module.__name__] = module
    try:
        payload = pickle.dumps(
            {
                "sched": CompressionScheduler(),
                "kind": CompressionScheduler,
                "args": __import__("argparse").Namespace(lr=0.1, arch="x"),
                "state_dict": {},
            },
            protocol=2,
        )
    finally:
        del sys.modules[module.__name__]
    data = read_torch_file(_zip_with_pickle(tmp_path / "sched.pth.tar", payload))
    sched = data["sched"]
    assert isinstance(sched, Placeholder)
    assert type(sched).module == "fake_distiller_scheduler"
    assert type(sched).qualname == "CompressionScheduler"
    assert sched.state["policies"] == {"epoch": [1, 2]}
    assert issubclass(data["kind"], Placeholder)
    assert type(data["args"]).qualname == "Namespace"
    assert data["args"].state == {"lr": 0.1, "arch": "x"}
    assert "fake_distiller_scheduler" not in sys.modules


def test_nothing_in_the_file_is_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps({"state_dict": {}, "x": Evil()}, protocol=2)
    data = read_torch_file(_zip_with_pickle(tmp_path / "evil.pth.tar", payload))
    assert not marker.exists()
    assert isinstance(data["x"], Placeholder)
    assert type(data["x"]).qualname == "system"


# ------------------------------------------------------------------------------------------
# bad files


def _expect_error(path: Path, *words: str) -> EdgesynthError:
    with pytest.raises(EdgesynthError) as info:
        read_torch_file(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message
    assert "Traceback" not in message
    return info.value


def test_missing_file(tmp_path: Path) -> None:
    _expect_error(tmp_path / "nope.pth.tar", "does not exist")


def test_directory(tmp_path: Path) -> None:
    _expect_error(tmp_path, "directory")


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.pth.tar"
    path.write_text("this is not a checkpoint\n")
    _expect_error(path, "not a PyTorch checkpoint")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.pth.tar"
    path.write_bytes(b"")
    _expect_error(path, "empty")


def test_truncated_zip(tmp_path: Path) -> None:
    whole = tmp_path / "whole.pth.tar"
    write_torch_file(whole, {"state_dict": {"w": np.ones((64, 64), dtype=np.float32)}})
    raw = whole.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 10, 100):
        path = tmp_path / f"cut{cut}.pth.tar"
        path.write_bytes(raw[:cut])
        _expect_error(path)


def test_truncated_corpus_files(tmp_path: Path) -> None:
    _need_corpus()
    zipped = next(p for p in CHECKPOINTS if not _is_legacy(p))
    legacy = next(p for p in CHECKPOINTS if _is_legacy(p))
    for source in (zipped, legacy):
        raw = source.read_bytes()
        for cut in (len(raw) // 2, len(raw) - 3):
            path = tmp_path / f"{source.stem}-{cut}.tar"
            path.write_bytes(raw[:cut])
            _expect_error(path)


def test_zip_without_pickle(tmp_path: Path) -> None:
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    _expect_error(path, "data.pkl")


def test_torchscript_archive(tmp_path: Path) -> None:
    path = tmp_path / "script.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("script/constants.pkl", b"")
        archive.writestr("script/code/__torch__.py", "")
    _expect_error(path, "TorchScript")


def test_storage_shorter_than_tensor(tmp_path: Path) -> None:
    good = tmp_path / "good.pt"
    write_torch_file(good, {"w": np.arange(100, dtype=np.float32)})
    bad = tmp_path / "bad.pt"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            raw = src.read(name)
            dst.writestr(name, raw[:40] if name.endswith("/data/0") else raw)
    _expect_error(bad, "corrupt")


def test_corrupt_pickle(tmp_path: Path) -> None:
    _expect_error(_zip_with_pickle(tmp_path / "junk.pt", b"\x80\x02garbage"), "corrupt")


def test_top_level_must_be_a_dict(tmp_path: Path) -> None:
    path = tmp_path / "list.pt"
    write_torch_file(path, [np.zeros(3)])  # type: ignore[arg-type]
    _expect_error(path, "dict")
    assert isinstance(read_torch_object(path), list)


# ------------------------------------------------------------------------------------------
# against torch itself


def _torch_load(torch, path: Path):
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # vendor classes that cannot be imported here: stub them

        class StubUnpickler(pickle.Unpickler):
            def find_class(self, module, name):
                try:
                    return super().find_class(module, name)
                except (ImportError, AttributeError):
                    return type(name, (), {"__setstate__": lambda self, s: None})

        stub = types.SimpleNamespace(
            Unpickler=StubUnpickler, load=lambda f, **kw: StubUnpickler(f, **kw).load()
        )
        return torch.load(path, map_location="cpu", weights_only=False, pickle_module=stub)


def _compare(torch, ours, theirs, where: str = "") -> int:
    if isinstance(theirs, torch.Tensor):
        want = theirs.detach()
        want = (want.float() if want.dtype == torch.bfloat16 else want).numpy()
        assert isinstance(ours, np.ndarray), where
        assert ours.dtype == want.dtype and ours.shape == want.shape, where
        np.testing.assert_array_equal(ours, want, err_msg=where)
        return 1
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), where
        return sum(_compare(torch, ours[k], theirs[k], f"{where}[{k!r}]") for k in theirs)
    if isinstance(theirs, list | tuple):
        assert len(ours) == len(theirs), where
        return sum(
            _compare(torch, a, b, f"{where}[{i}]")
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
        )
    if isinstance(theirs, int | float | str | bool | type(None)):
        assert ours == theirs, where
    return 0


def test_matches_torch_load_on_corpus() -> None:
    torch = needs.module("torch")
    _need_corpus()
    zipped = [p for p in CHECKPOINTS if not _is_legacy(p)]
    legacy = [p for p in CHECKPOINTS if _is_legacy(p)]
    picks = {max(zipped, key=lambda p: p.stat().st_size), zipped[0], legacy[0], legacy[-1]}
    picks |= {p for p in CHECKPOINTS if "kws20_v3" in str(p)}
    for path in sorted(picks):
        count = _compare(torch, read_torch_file(path), _torch_load(torch, path), str(path))
        assert count > 0, path


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_matches_torch_on_views_and_dtypes(tmp_path: Path, legacy: bool) -> None:
    torch = needs.module("torch")
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    obj = {
        "state_dict": collections.OrderedDict(
            [
                ("view", base[1:5, 2:9:3]),  # storage offset and strides
                ("transposed", base.t()),
                ("row", base[3]),
                ("base", base),
                ("param", torch.nn.Parameter(torch.ones(2, 2))),
                ("bf16", torch.tensor([1.5, -2.25, 3e5], dtype=torch.bfloat16)),
                ("f16", torch.tensor([0.5, -1.0], dtype=torch.float16)),
                ("f64", torch.tensor([1e-300, 2.0], dtype=torch.float64)),
                ("i8", torch.tensor([-128, 127], dtype=torch.int8)),
                ("u8", torch.tensor([0, 255], dtype=torch.uint8)),
                ("i16", torch.tensor([-300, 300], dtype=torch.int16)),
                ("i32", torch.tensor([-(2**31), 2**31 - 1], dtype=torch.int32)),
                ("i64", torch.tensor([-(2**62), 5], dtype=torch.int64)),
                ("bool", torch.tensor([True, False])),
                ("scalar", torch.tensor(7)),
                ("empty", torch.zeros(0, 3)),
            ]
        ),
        "arch": "ai85net5",
        "size": torch.Size([1, 2]),
        "device": torch.device("cpu"),
        "dtype": torch.float32,
    }
    path = tmp_path / "views.pth.tar"
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    assert _is_legacy(path) == legacy
    ours = read_torch_file(path)
    _compare(torch, ours, torch.load(path, weights_only=False))
    assert ours["state_dict"]["bf16"].dtype == np.float32
    np.testing.assert_array_equal(ours["state_dict"]["bf16"], [1.5, -2.25, 299008.0])
    assert ours["size"] == (1, 2)


def test_torch_reads_what_we_write(tmp_path: Path) -> None:
    torch = needs.module("torch")
    state = collections.OrderedDict(
        [
            ("conv1.op.weight", np.arange(-4, 5, dtype=np.float32).reshape(1, 1, 3, 3)),
            ("conv1.weight_bits", np.array([8.0], dtype=np.float32)),
            ("flags", np.array([True, False])),
            ("count", np.array(3, dtype=np.int64)),
        ]
    )
    path = tmp_path / "ours.pth.tar"
    write_torch_file(path, {"state_dict": state, "arch": "x", "epoch": 2})
    loaded = torch.load(path, weights_only=True)
    assert loaded["arch"] == "x" and loaded["epoch"] == 2
    for key, value in state.items():
        np.testing.assert_array_equal(loaded["state_dict"][key].numpy(), value)
