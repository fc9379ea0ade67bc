"""Dataset registry: what `edgesynth train --dataset NAME` trains on.

Every dataset yields uint8-range images normalized the chip's way: x = round((p - 0.5) * 256)
clipped to [-128, 127], divided by 128 for training (so inputs sit on the chip's 1/128 grid).

- `mnist`: the standard IDX files (train-images-idx3-ubyte[.gz], ... t10k-labels-idx1-ubyte[.gz])
  in --data; missing files are downloaded there only when asked (`--download`), otherwise a
  clear error names the missing files.
- `mnist-test-split`: only the t10k files: the first 8,000 images train, the last 2,000 test.
- `digits`: scikit-learn's bundled 8x8 digits upsampled to 16x16 (1,797 images; no files, no
  network): the default.
- `synthetic`: generated 1x12x12 patterns of 4 classes, for fast tests.
- `fashionmnist`: Fashion-MNIST, the same IDX file names as MNIST, in its own --data folder.
- `cifar10`, `cifar100`, `svhn`, `imagefolder`: see `image_datasets`.
"""

from __future__ import annotations

import gzip
import struct
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.train import catalog

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
FASHION_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
FASHION_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip


@dataclass
class Split:
    """Images as normalized training floats (N, C, H, W) or (N, C, L), labels (N,)."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])


@dataclass
class Dataset:
    name: str
    train: Split
    test: Split
    num_classes: int
    classes: list[str]
    augment: bool = False  # random changes help: shifts/rotations of images, shift+noise of audio
    kind: str = "image"  # image | audio: which augmentation applies
    class_weights: list[float] | None = None  # the loss's weight per class (None: equal)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.train.x.shape[1:])

    @property
    def regression(self) -> bool:
        """The targets are vectors (N x D floats; D outputs), not class numbers."""
        return self.train.y.is_floating_point()


def normalize(pixels: np.ndarray) -> torch.Tensor:
    """Pixels in [0, 1] -> training floats on the chip's grid: round((p - .5) * 256) / 128."""
    q = np.clip(np.floor((pixels.astype(np.float64) - 0.5) * 256.0 + 0.5), -128, 127)
    return torch.from_numpy(q / 128.0).float()


def to_chip(x: torch.Tensor) -> np.ndarray:
    """Training floats -> the int64 sample the synthesizer takes."""
    return np.clip(np.round(x.detach().double().numpy() * 128.0), -128, 127).astype(np.int64)


# --- MNIST --------------------------------------------------------------------------------


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _read_idx(path: Path, magic: int) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:
        raise EdgesynthError(f"cannot read IDX file ({err}).", file=str(path)) from None
    if len(data) < 8 or struct.unpack(">I", data[:4])[0] != magic:
        raise EdgesynthError("not an MNIST IDX file (wrong magic number).", file=str(path))
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise EdgesynthError("truncated IDX file.", file=str(path))
    return body.reshape(dims)


def download(url: str, target: Path, timeout: float = 30.0) -> None:
    """Fetch `url` to `target` through a staging file (no half-written file on failure);
    nothing is created unless the server answers."""
    from edgesynth.outputs import write_file_atomic

    with urllib.request.urlopen(url, timeout=timeout) as resp:

        def copy(out) -> None:  # type: ignore[no-untyped-def]
            while chunk := resp.read(1 << 16):
                out.write(chunk)

        write_file_atomic(target, writer=copy)


def _check_present(folder: Path, which: tuple[str, ...], allow_download: bool) -> None:
    """Without --download, every missing IDX file is named in one message."""
    if allow_download:
        return
    missing = [
        MNIST_FILES[f"{w}_{part}"]
        for w in which
        for part in ("images", "labels")
        if _find(folder, MNIST_FILES[f"{w}_{part}"]) is None
    ]
    if not missing:
        return
    have_test = all(_find(folder, MNIST_FILES[f"test_{p}"]) for p in ("images", "labels"))
    hint = (
        "; or train on the t10k files alone with --dataset mnist-test-split"
        if have_test and "train" in which
        else ""
    )
    raise EdgesynthError(
        f"MNIST file(s) missing: {', '.join(f'{m}[.gz]' for m in missing)}. Place them in this "
        f"folder, or pass --download to fetch them into it{hint}.",
        file=str(folder),
    )


def _mnist_file(
    folder: Path, key: str, allow_download: bool, mirrors: tuple[str, ...] | None = None
) -> Path:
    stem = MNIST_FILES[key]
    found = _find(folder, stem)
    if found is not None:
        return found
    if not allow_download:
        raise EdgesynthError(f"MNIST file `{stem}[.gz]` is missing.", file=str(folder))
    errors = []
    for mirror in mirrors or MNIST_MIRRORS:
        try:
            target = folder / (stem + ".gz")
            download(mirror + stem + ".gz", target)
            return target
        except (urllib.error.URLError, OSError, TimeoutError, EdgesynthError) as err:
            errors.append(f"{mirror}: {getattr(err, 'reason', err)}")
    raise EdgesynthError(
        f"MNIST file `{stem}.gz` is not in the folder and could not be downloaded "
        f"(offline?): {'; '.join(errors)}. Place the four IDX files (train-images-idx3-ubyte, "
        "train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, optionally "
        ".gz) in this folder.",
        file=str(folder),
    )


def _mnist_pair(
    folder: Path, which: str, allow_download: bool, mirrors: tuple[str, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    images = _read_idx(_mnist_file(folder, f"{which}_images", allow_download, mirrors), 2051)
    labels = _read_idx(_mnist_file(folder, f"{which}_labels", allow_download, mirrors), 2049)
    if images.shape[0] != labels.shape[0]:
        raise EdgesynthError(f"MNIST {which} images and labels differ in count.", file=str(folder))
    return images, labels


def _mnist_split(images: np.ndarray, labels: np.ndarray) -> Split:
    x = normalize(images[:, None, :, :] / 255.0)
    return Split(x, torch.from_numpy(labels.astype(np.int64)))


def load_mnist(data: Path | None, allow_download: bool = False) -> Dataset:
    folder = _data_folder(data, "mnist")
    _check_present(folder, ("train", "test"), allow_download)
    train = _mnist_split(*_mnist_pair(folder, "train", allow_download))
    test = _mnist_split(*_mnist_pair(folder, "test", allow_download))
    return Dataset("MNIST", train, test, 10, [str(i) for i in range(10)], augment=True)


def load_mnist_test_split(data: Path | None, allow_download: bool = False) -> Dataset:
    folder = _data_folder(data, "mnist")
    _check_present(folder, ("test",), allow_download)
    images, labels = _mnist_pair(folder, "test", allow_download)
    if images.shape[0] < 10000:
        raise EdgesynthError(
            f"the MNIST test set holds {images.shape[0]} images; the split needs 10,000.",
            file=str(folder),
        )
    train = _mnist_split(images[:8000], labels[:8000])
    test = _mnist_split(images[-2000:], labels[-2000:])
    return Dataset("MNIST", train, test, 10, [str(i) for i in range(10)], augment=True)


def load_fashion_mnist(data: Path | None, allow_download: bool = False) -> Dataset:
    """Fashion-MNIST: the same four IDX file names as MNIST, its own images (28x28, 10 kinds
    of clothing)."""
    folder = _data_folder(data, "fashionmnist")
    _check_present(folder, ("train", "test"), allow_download)
    train = _mnist_split(*_mnist_pair(folder, "train", allow_download, FASHION_MIRRORS))
    test = _mnist_split(*_mnist_pair(folder, "test", allow_download, FASHION_MIRRORS))
    return Dataset("FashionMNIST", train, test, 10, list(FASHION_CLASSES), augment=True)


def _data_folder(data: Path | None, default: str) -> Path:
    folder = Path(data) if data is not None else Path("data") / default
    if folder.exists() and not folder.is_dir():
        raise EdgesynthError("--data must be a folder.", file=str(folder))
    return folder


# --- built-in -----------------------------------------------------------------------------


def load_digits(data: Path | None = None, allow_download: bool = False) -> Dataset:
    """scikit-learn's 8x8 digits, upsampled to 16x16: 1,797 images, the last 297 held out."""
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    images = torch.from_numpy(bunch.images[:, None, :, :] / 16.0)
    images = F.interpolate(images, scale_factor=2, mode="bilinear", align_corners=False)
    labels = bunch.target.astype(np.int64)
    x = normalize(images.numpy())
    y = torch.from_numpy(labels)
    cut = 1500
    return Dataset(
        "digits",
        Split(x[:cut], y[:cut]),
        Split(x[cut:], y[cut:]),
        10,
        [str(i) for i in range(10)],
        augment=True,
    )


def load_synthetic(
    data: Path | None = None, allow_download: bool = False, n_train: int = 1024, n_test: int = 128
) -> Dataset:
    """Four classes of 12x12 images: a bright bar in one of four places, plus noise."""
    gen = np.random.default_rng(1234)

    def make(n: int) -> Split:
        labels = gen.integers(0, 4, size=n)
        img = gen.uniform(0.0, 0.3, size=(n, 1, 12, 12))
        for i, c in enumerate(labels):
            rows = slice(0, 6) if c < 2 else slice(6, 12)
            cols = slice(0, 6) if c % 2 == 0 else slice(6, 12)
            img[i, 0, rows, cols] += 0.6
        return Split(normalize(np.clip(img, 0, 1)), torch.from_numpy(labels.astype(np.int64)))

    return Dataset("synthetic", make(n_train), make(n_test), 4, ["tl", "tr", "bl", "br"])


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    loader: Callable[..., Dataset]
    description: str
    default_model: str


def _lazy(module: str, name: str) -> Callable[..., Dataset]:
    """Loader `name` of `edgesynth.train.<module>`, imported when used."""

    def load(data: Path | None, allow_download: bool = False) -> Dataset:
        import importlib

        loader = getattr(importlib.import_module(f"edgesynth.train.{module}"), name)
        return loader(data, allow_download)

    return load


def _image_dataset(name: str) -> Callable[..., Dataset]:
    return _lazy("image_datasets", name)


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "digits": load_digits,
    "mnist": load_mnist,
    "mnist-test-split": load_mnist_test_split,
    "synthetic": load_synthetic,
    "fashionmnist": load_fashion_mnist,
    "cifar10": _image_dataset("load_cifar10"),
    "cifar100": _image_dataset("load_cifar100"),
    "svhn": _image_dataset("load_svhn"),
    "imagefolder": _image_dataset("load_image_folder"),
    "kws20": _lazy("audio_datasets", "load_kws20"),
}
# the descriptions and default models are in `catalog` (read by `edgesynth train --help`)
DATASETS: dict[str, DatasetInfo] = {
    name: DatasetInfo(name, _LOADERS[name], description, model)
    for name, (description, model) in catalog.DATASETS.items()
}


def get_dataset_info(name: str) -> DatasetInfo:
    info = DATASETS.get(name.lower())
    if info is None:
        raise EdgesynthError(
            f"unknown dataset `{name}`; available: {', '.join(DATASETS)}."
            + did_you_mean(name.lower(), DATASETS)
        )
    return info


def load_dataset(name: str, data: Path | None = None, allow_download: bool = False) -> Dataset:
    return get_dataset_info(name).loader(data, allow_download)
