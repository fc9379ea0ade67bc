"""Image datasets from their standard on-disk formats: CIFAR-10/100 (the python pickle batches),
SVHN (the cropped-digit .mat files) and a folder of the user's own images.

Each loader reads the files from `--data` (a missing file is downloaded into that folder only
with `--download`; offline, one line names the URL and the files to place there) and
normalizes pixels the chip's way (`datasets.normalize`), as the vendor's training does.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.error
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from edgesynth.errors import EdgesynthError
from edgesynth.train.datasets import Dataset, Split, download, normalize

CIFAR = {
    10: ("cifar-10-batches-py", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
    100: ("cifar-100-python", "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"),
}
SVHN_URL = "http://ufldl.stanford.edu/housenumbers/"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm")


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles a CIFAR batch (dicts, lists, bytes and NumPy arrays) and nothing else: a
    pickle naming any other class is refused instead of running its code."""

    ALLOWED: ClassVar[set[tuple[str, str]]] = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # bytes in protocol-2 pickles written by Python 3
    }

    def find_class(self, module: str, name: str):  # type: ignore[no-untyped-def]
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_batch(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            batch = _BatchUnpickler(f, encoding="bytes").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError) as err:
        raise EdgesynthError(f"not a CIFAR python batch ({err}).", file=str(path)) from None
    if not isinstance(batch, dict) or b"data" not in batch:
        raise EdgesynthError("not a CIFAR python batch (no `data` entry).", file=str(path))
    return batch


def _cifar_split(paths: list[Path], label_key: bytes) -> Split:
    images, labels = [], []
    for path in paths:
        batch = _read_batch(path)
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or label_key not in batch:
            raise EdgesynthError(
                f"not a CIFAR batch: `data` must be N x 3072 and `{label_key.decode()}` given.",
                file=str(path),
            )
        images.append(data.reshape(-1, 3, 32, 32))
        labels.append(np.asarray(batch[label_key], dtype=np.int64))
    x = np.concatenate(images)
    y = np.concatenate(labels)
    if len(x) != len(y):
        raise EdgesynthError("CIFAR images and labels differ in count.", file=str(paths[0]))
    return Split(normalize(x / 255.0), torch.from_numpy(y))


def _download(url: str, target: Path, hint: str) -> None:
    """`datasets.download` with one clear error naming the URL when it fails (offline)."""
    try:
        download(url, target)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise EdgesynthError(
            f"cannot download {url} ({getattr(err, 'reason', err)}); offline? {hint}",
            file=str(target.parent),
        ) from None


def fetch_archive(url: str, folder: Path, inner: str, *, rooted: bool = True) -> None:
    """Download a .tar.gz and put its folder `inner/` (regular files only) into `folder`;
    an archive that is not `rooted` in one folder is unpacked into a new `inner/`.

    The archive is unpacked in a staging folder beside it and `inner/` is moved into place
    whole, so a failed or interrupted run leaves `folder` as it was."""
    hint = (
        f"Download it yourself and extract it here (it holds the folder `{inner}`)."
        if rooted
        else f"Download it yourself and extract it into `{folder / inner}`."
    )
    staging = Path(tempfile.mkdtemp(prefix=".edgesynth-staging-", dir=folder))
    try:
        archive = staging / url.rsplit("/", 1)[-1]
        _download(url, archive, hint)
        try:
            with tarfile.open(archive, "r:gz") as tar:
                members = [
                    m
                    for m in tar.getmembers()
                    if m.isfile()
                    and (not rooted or Path(m.name).parts[:1] == (inner,))
                    and ".." not in Path(m.name).parts
                    and not Path(m.name).is_absolute()
                ]
                tar.extractall(staging if rooted else staging / inner, members=members)
        except (tarfile.TarError, OSError) as err:
            raise EdgesynthError(f"cannot extract {url} ({err}).", file=str(folder)) from None
        if (folder / inner).exists():
            raise EdgesynthError(
                f"`{inner}` already exists; it is left as it is.", file=str(folder)
            )
        os.replace(staging / inner, folder / inner)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_cifar(classes: int, data: Path | None, allow_download: bool) -> Dataset:
    inner, url = CIFAR[classes]
    folder = Path(data) if data is not None else Path("data") / f"cifar{classes}"
    root = folder / inner if (folder / inner).is_dir() else folder
    if classes == 10:
        train_files = [root / f"data_batch_{i}" for i in range(1, 6)]
        test_files = [root / "test_batch"]
        key = b"labels"
    else:
        train_files, test_files, key = [root / "train"], [root / "test"], b"fine_labels"
    missing = [p.name for p in train_files + test_files if not p.is_file()]
    if missing and allow_download:
        created = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fetch_archive(url, folder, inner)
        except BaseException:
            if created:
                shutil.rmtree(folder, ignore_errors=True)
            raise
        return load_cifar(classes, folder, False)
    if missing:
        raise EdgesynthError(
            f"CIFAR-{classes} file(s) missing: {', '.join(missing)}. Place the python batches "
            f"(the folder `{inner}` of {url}) here, or pass --download to fetch them.",
            file=str(folder),
        )
    names = [str(i) for i in range(classes)]
    meta = root / ("batches.meta" if classes == 10 else "meta")
    if meta.is_file():
        info = _read_batch_meta(meta)
        names = info or names
    return Dataset(
        f"CIFAR-{classes}",
        _cifar_split(train_files, key),
        _cifar_split(test_files, key),
        classes,
        names,
        augment=True,
    )


def _read_batch_meta(path: Path) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            meta = _BatchUnpickler(f, encoding="bytes").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError):
        return None
    for key in (b"label_names", b"fine_label_names"):
        if isinstance(meta, dict) and key in meta:
            return [n.decode() if isinstance(n, bytes) else str(n) for n in meta[key]]
    return None


def load_cifar10(data: Path | None, allow_download: bool = False) -> Dataset:
    return load_cifar(10, data, allow_download)


def load_cifar100(data: Path | None, allow_download: bool = False) -> Dataset:
    return load_cifar(100, data, allow_download)


# --- SVHN ----------------------------------------------------------------------------------


def _svhn_split(path: Path) -> Split:
    from scipy.io import loadmat

    try:
        mat = loadmat(path)
    except (OSError, ValueError, NotImplementedError) as err:
        raise EdgesynthError(f"not an SVHN .mat file ({err}).", file=str(path)) from None
    if "X" not in mat or "y" not in mat or mat["X"].ndim != 4:
        raise EdgesynthError("not an SVHN .mat file (needs X: 32x32x3xN, y: N).", file=str(path))
    x = np.transpose(mat["X"], (3, 2, 0, 1)).astype(np.uint8)  # N, C, H, W
    y = mat["y"].reshape(-1).astype(np.int64) % 10  # the files label the digit 0 as 10
    return Split(normalize(x / 255.0), torch.from_numpy(y))


def load_svhn(data: Path | None, allow_download: bool = False) -> Dataset:
    folder = Path(data) if data is not None else Path("data") / "svhn"
    files = {"train": folder / "train_32x32.mat", "test": folder / "test_32x32.mat"}
    for name, path in files.items():
        if path.is_file():
            continue
        if not allow_download:
            raise EdgesynthError(
                f"SVHN file {path.name} is missing; place train_32x32.mat and test_32x32.mat "
                f"({SVHN_URL}) here, or pass --download to fetch them.",
                file=str(folder),
            )
        _download(SVHN_URL + path.name, path, f"Place the {name} file here yourself.")
    return Dataset(
        "SVHN",
        _svhn_split(files["train"]),
        _svhn_split(files["test"]),
        10,
        [str(i) for i in range(10)],
    )


# --- the user's own images -------------------------------------------------------------------


def _read_image(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, UnidentifiedImageError) as err:
        raise EdgesynthError(f"cannot read the image ({err}).", file=str(path)) from None


def _folder_split(folder: Path, classes: list[str]) -> Split:
    images, labels = [], []
    shape = None
    for label, name in enumerate(classes):
        files = (
            sorted(p for p in (folder / name).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if (folder / name).is_dir()
            else []
        )
        for path in files:
            pixels = _read_image(path)
            if shape is None:
                shape = pixels.shape
            elif pixels.shape != shape:
                raise EdgesynthError(
                    f"the image is {pixels.shape[1]}x{pixels.shape[0]}, the others "
                    f"{shape[1]}x{shape[0]}; resize all images to one size.",
                    file=str(path),
                )
            images.append(pixels.transpose(2, 0, 1))
            labels.append(label)
    if not images:
        raise EdgesynthError(
            f"no images ({', '.join(IMAGE_SUFFIXES)}) in the class folders.", file=str(folder)
        )
    x = np.stack(images)
    return Split(normalize(x / 255.0), torch.tensor(labels, dtype=torch.int64))


def load_image_folder(data: Path | None, allow_download: bool = False) -> Dataset:
    """`--data` holds `train/<class>/*.png` and `test/<class>/*.png` (any of IMAGE_SUFFIXES);
    the classes are the folder names of `train/`, sorted; every image has the same size."""
    if data is None:
        raise EdgesynthError("--dataset imagefolder needs --data FOLDER (train/ and test/).")
    folder = Path(data)
    for part in ("train", "test"):
        if not (folder / part).is_dir():
            raise EdgesynthError(
                f"the image folder needs `{part}/<class>/` sub-folders.", file=str(folder)
            )
    classes = sorted(p.name for p in (folder / "train").iterdir() if p.is_dir())
    if len(classes) < 2:
        raise EdgesynthError("`train/` needs at least two class folders.", file=str(folder))
    train = _folder_split(folder / "train", classes)
    test = _folder_split(folder / "test", classes)
    if train.x.shape[1:] != test.x.shape[1:]:
        raise EdgesynthError("train and test images differ in size.", file=str(folder))
    return Dataset(folder.name, train, test, len(classes), classes, augment=True)


__all__ = [
    "load_cifar10",
    "load_cifar100",
    "load_image_folder",
    "load_svhn",
]
