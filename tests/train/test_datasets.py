"""Datasets: MNIST IDX files (and their download), the built-in digits, the synthetic set."""

from __future__ import annotations

import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch

from edgesynth.errors import EdgesynthError
from edgesynth.train import datasets
from edgesynth.train.datasets import load_dataset, normalize, to_chip

MNIST = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mnist"


def test_normalization_is_the_chips() -> None:
    x = normalize(np.array([0.0, 0.5, 1.0, 0.25]))
    assert x.tolist() == [-1.0, 0.0, 127 / 128, -0.5]
    assert to_chip(x).tolist() == [-128, 0, 127, -64]


def test_mnist_test_split_from_real_files() -> None:
    ds = load_dataset("mnist-test-split", MNIST)
    assert (len(ds.train), len(ds.test), ds.input_shape) == (8000, 2000, (1, 28, 28))
    assert torch.equal(ds.train.x * 128, torch.round(ds.train.x * 128))
    assert ds.train.x.min() == -1.0 and ds.train.x.max() == 127 / 128
    counts = torch.bincount(ds.test.y, minlength=10)
    assert counts.sum() == 2000 and counts.min() > 150
    # the first training image of t10k is a 7
    assert int(ds.train.y[0]) == 7


def _offline(*args, **kwargs):
    raise urllib.error.URLError("network is unreachable")


def test_missing_mnist_files_offline_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(datasets.urllib.request, "urlopen", _offline)
    with pytest.raises(EdgesynthError) as err:
        load_dataset("mnist", tmp_path, allow_download=True)
    message = str(err.value)
    assert str(tmp_path) in message and "train-images-idx3-ubyte" in message
    assert "could not be downloaded (offline?)" in message
    assert list(tmp_path.iterdir()) == []  # nothing half-downloaded
    with pytest.raises(EdgesynthError, match="could not be downloaded"):
        load_dataset("mnist", tmp_path / "new", allow_download=True)
    assert not (tmp_path / "new").exists()  # not even an empty folder


def test_missing_mnist_files_are_named_and_never_downloaded_unasked(
    tmp_path: Path, monkeypatch
) -> None:
    """Without --download nothing is fetched (never into a shared data folder): the message
    names every missing file, and points to mnist-test-split when the t10k files are there."""

    def forbidden(*args, **kwargs):
        raise AssertionError("downloaded without --download")

    monkeypatch.setattr(datasets.urllib.request, "urlopen", forbidden)
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(MNIST / name, tmp_path / name)
    with pytest.raises(EdgesynthError) as err:
        load_dataset("mnist", tmp_path)
    message = str(err.value)
    assert "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]" in message
    assert "t10k" not in message.split("missing:")[1].split(".")[0]
    assert "--download" in message and "--dataset mnist-test-split" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ]


def test_download_fetches_missing_files(tmp_path: Path, monkeypatch) -> None:
    """A mirror serving the IDX files (here a file:// URL) fills the folder."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for stem in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte"):
        shutil.copy(MNIST / "t10k-images-idx3-ubyte.gz", mirror / f"{stem}.gz")
    for stem in ("train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"):
        shutil.copy(MNIST / "t10k-labels-idx1-ubyte.gz", mirror / f"{stem}.gz")
    monkeypatch.setattr(
        datasets, "MNIST_MIRRORS", ("http://offline.invalid/", mirror.as_uri() + "/")
    )
    real_urlopen = datasets.urllib.request.urlopen

    def urlopen(url, timeout=None):
        if url.startswith("http://offline.invalid/"):
            raise urllib.error.URLError("no route")
        return real_urlopen(url, timeout=timeout)

    monkeypatch.setattr(datasets.urllib.request, "urlopen", urlopen)
    data = tmp_path / "data"
    ds = load_dataset("mnist", data, allow_download=True)
    assert len(ds.train) == 10000 and len(ds.test) == 10000
    assert sorted(p.name for p in data.iterdir()) == sorted(
        f"{s}.gz" for s in datasets.MNIST_FILES.values()
    )


def test_corrupt_idx_file(tmp_path: Path) -> None:
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x01" + b"\x00" * 8)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01")
    with pytest.raises(EdgesynthError, match="not an MNIST IDX file"):
        load_dataset("mnist-test-split", tmp_path)


def test_builtin_and_synthetic() -> None:
    digits = load_dataset("digits")
    assert (len(digits.train), len(digits.test), digits.input_shape) == (1500, 297, (1, 16, 16))
    synth = load_dataset("synthetic")
    assert synth.num_classes == 4 and synth.input_shape == (1, 12, 12)
    again = load_dataset("synthetic")
    assert torch.equal(synth.train.x, again.train.x)  # generated the same way every time
    with pytest.raises(EdgesynthError, match=r"unknown dataset `minst`.*Did you mean `mnist`"):
        load_dataset("minst")


@pytest.mark.parametrize(
    ("dataset", "archive"),
    [
        ("cifar10", "cifar-10-python.tar.gz"),
        ("cifar100", "cifar-100-python.tar.gz"),
        ("svhn", "train_32x32.mat"),
        ("kws20", "speech_commands_v0.02.tar.gz"),
    ],
)
def test_offline_download_is_one_clear_error(
    dataset: str, archive: str, tmp_path: Path, monkeypatch
) -> None:
    """With no network, --download ends in one line naming what it needs; the folder it made
    is gone again."""

    def offline(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise urllib.error.URLError("no network")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(EdgesynthError) as err:
        load_dataset(dataset, tmp_path / "new", allow_download=True)
    assert archive in err.value.message and "offline" in err.value.message
    assert not (tmp_path / "new").exists()
