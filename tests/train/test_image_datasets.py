"""The dataset loaders read the standard on-disk formats: files written here in those formats
(CIFAR python pickle batches, SVHN .mat, Fashion-MNIST IDX, PNG folders) come back as the
pixels and labels that were written, normalized the chip's way."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.train.datasets import load_dataset, normalize

needs.module("torch")

RNG = np.random.default_rng(7)


def _chip(pixels: np.ndarray) -> np.ndarray:
    return normalize(pixels / 255.0).numpy()


def _write_pickle(path: Path, obj: object) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def test_cifar10_batches(tmp_path: Path) -> None:
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = RNG.integers(0, 256, size=(3, 3072), dtype=np.uint8)
        labels = RNG.integers(0, 10, size=3).tolist()
        _write_pickle(root / name, {b"batch_label": b"x", b"data": data, b"labels": labels})
        batches[name] = (data, labels)
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer"]
    names += [b"dog", b"frog", b"horse", b"ship", b"truck"]
    _write_pickle(root / "batches.meta", {b"label_names": names})
    ds = load_dataset("cifar10", tmp_path)
    assert len(ds.train) == 15 and len(ds.test) == 3
    assert ds.classes[0] == "airplane" and ds.num_classes == 10
    data, labels = batches["data_batch_2"]
    np.testing.assert_array_equal(ds.train.x[3:6].numpy(), _chip(data.reshape(3, 3, 32, 32)))
    assert ds.train.y[3:6].tolist() == labels
    test_data, test_labels = batches["test_batch"]
    np.testing.assert_array_equal(ds.test.x.numpy(), _chip(test_data.reshape(3, 3, 32, 32)))
    assert ds.test.y.tolist() == test_labels


def test_cifar100_fine_labels(tmp_path: Path) -> None:
    root = tmp_path / "cifar-100-python"
    root.mkdir()
    for name, n in (("train", 4), ("test", 2)):
        data = RNG.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        fine = RNG.integers(0, 100, size=n).tolist()
        coarse = RNG.integers(0, 20, size=n).tolist()
        _write_pickle(root / name, {b"data": data, b"fine_labels": fine, b"coarse_labels": coarse})
        if name == "test":
            expected = (data, fine)
    ds = load_dataset("cifar100", tmp_path)
    assert ds.num_classes == 100 and len(ds.train) == 4
    np.testing.assert_array_equal(ds.test.x.numpy(), _chip(expected[0].reshape(2, 3, 32, 32)))
    assert ds.test.y.tolist() == expected[1]


class _Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (Path("pwned"),))


def test_a_pickle_with_code_is_refused(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        _write_pickle(root / name, {b"data": _Evil(), b"labels": [0]})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EdgesynthError, match="refusing to load"):
        load_dataset("cifar10", tmp_path)
    assert not (tmp_path / "pwned").exists()


def test_missing_cifar_files_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    before = sorted(tmp_path.iterdir())
    with pytest.raises(EdgesynthError) as err:
        load_dataset("cifar10", tmp_path)
    assert "data_batch_1" in err.value.message and "--download" in err.value.message
    assert sorted(tmp_path.iterdir()) == before


def test_svhn_mat_files(tmp_path: Path) -> None:
    from scipy.io import savemat

    for name, n in (("train_32x32.mat", 5), ("test_32x32.mat", 3)):
        x = RNG.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
        y = np.array([[10], [1], [2], [9], [10]][:n], dtype=np.uint8)
        savemat(tmp_path / name, {"X": x, "y": y})
        if name.startswith("test"):
            expected = x
    ds = load_dataset("svhn", tmp_path)
    assert len(ds.train) == 5 and ds.train.y.tolist() == [0, 1, 2, 9, 0]  # 10 is the digit 0
    np.testing.assert_array_equal(ds.test.x.numpy(), _chip(expected.transpose(3, 2, 0, 1)))


def _idx(path: Path, array: np.ndarray, magic: int) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_fashion_mnist_idx(tmp_path: Path) -> None:
    images = RNG.integers(0, 256, size=(4, 28, 28), dtype=np.uint8)
    labels = np.array([9, 0, 3, 8], dtype=np.uint8)
    for part in ("train", "t10k"):
        _idx(tmp_path / f"{part}-images-idx3-ubyte", images, 2051)
        _idx(tmp_path / f"{part}-labels-idx1-ubyte", labels, 2049)
    ds = load_dataset("fashionmnist", tmp_path)
    assert ds.classes[9] == "Ankle boot" and ds.test.y.tolist() == [9, 0, 3, 8]
    np.testing.assert_array_equal(ds.train.x.numpy(), _chip(images[:, None]))


def test_image_folder(tmp_path: Path) -> None:
    from PIL import Image

    written = {}
    for part in ("train", "test"):
        for cls in ("cat", "dog"):
            (tmp_path / part / cls).mkdir(parents=True)
            pixels = RNG.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / part / cls / "a.png")
            written[part, cls] = pixels
    ds = load_dataset("imagefolder", tmp_path)
    assert ds.classes == ["cat", "dog"] and ds.input_shape == (3, 12, 16)
    assert ds.train.y.tolist() == [0, 1]
    np.testing.assert_array_equal(
        ds.test.x[1].numpy(), _chip(written["test", "dog"].transpose(2, 0, 1))
    )
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "train" / "cat" / "b.png")
    with pytest.raises(EdgesynthError, match="resize all images to one size") as err:
        load_dataset("imagefolder", tmp_path)
    assert err.value.file.endswith("b.png")


def test_download_unpacks_only_the_batches_folder(tmp_path: Path, monkeypatch) -> None:
    import io
    import tarfile

    from edgesynth.train import image_datasets

    source = tmp_path / "src" / "cifar-10-batches-py"
    source.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = RNG.integers(0, 256, size=(2, 3072), dtype=np.uint8)
        _write_pickle(source / name, {b"data": data, b"labels": [1, 2]})
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname="cifar-10-batches-py")
        evil = tarfile.TarInfo("../escaped.txt")
        evil.size = 3
        tar.addfile(evil, io.BytesIO(b"bad"))
    monkeypatch.setitem(image_datasets.CIFAR, 10, ("cifar-10-batches-py", archive.as_uri()))
    data = tmp_path / "data"
    ds = load_dataset("cifar10", data, allow_download=True)
    assert len(ds.train) == 10 and ds.train.y.tolist()[:2] == [1, 2]
    assert sorted(p.name for p in data.iterdir()) == ["cifar-10-batches-py"]
    assert not (tmp_path / "escaped.txt").exists()
