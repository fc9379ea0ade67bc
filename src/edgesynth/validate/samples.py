"""The samples `edgesynth validate` runs: an .npy array, an .npz archive, or a folder of images,
and the optional labels; each refused with one message naming the file and what fits.

- `.npy`: one array (N, *input shape); float values (quantized with the program's input scale)
  or the program's integer input codes.
- `.npz`: the array named `x` (or the only array); labels from `y` when the archive has one and
  no --labels file is given.
- a folder: image files (PNG, JPEG, BMP, PGM...) directly inside it, in name order, or in one
  subfolder per class (labels: the subfolders' numbers when all are named by numbers, else
  their places in name order, from 0). Pixels become floats in 0..1, then
  (pixel - mean) / std; grey images for a one-channel model, RGB for three.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".gif", ".tif", ".tiff")


@dataclass
class Samples:
    x: np.ndarray  # (N, *input shape)
    labels: np.ndarray | None  # (N,) int64
    source: str
    classes: list[str] | None = None  # an image folder's class names

    def first(self, limit: int | None) -> Samples:
        """The first `limit` samples (and their labels); all of them for None."""
        if limit is None:
            return self
        labels = None if self.labels is None else self.labels[:limit]
        return Samples(self.x[:limit], labels, self.source, self.classes)


def load_samples(
    path: Path,
    shape: tuple[int, ...],
    *,
    mean: float = 0.0,
    std: float = 1.0,
) -> Samples:
    """The samples in `path`, checked against the model's per-sample input `shape`."""
    if path.is_dir():
        samples = _image_folder(path, shape, mean, std)
    elif not path.exists():
        raise EdgesynthError("no such file or folder", file=str(path), key="--data")
    elif path.suffix.lower() == ".npz":
        samples = _npz(path)
    else:
        from edgesynth.flow import load_array

        samples = Samples(load_array(path, "--data", "--data"), None, str(path))
    samples.x = _fit(samples.x, shape, str(path))
    if not len(samples.x):
        raise EdgesynthError("holds no samples", file=str(path), key="--data")
    return samples


def _fit(x: np.ndarray, shape: tuple[int, ...], file: str) -> np.ndarray:
    """(N, *shape) of numbers, or one message naming both shapes."""
    if x.dtype.kind not in "biuf":
        raise EdgesynthError(f"the samples must be numbers, not {x.dtype}", file=file, key="--data")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise EdgesynthError("the samples hold NaN or infinite values", file=file, key="--data")
    if x.ndim == len(shape) and tuple(x.shape) == shape:
        x = x[None]
    if tuple(x.shape[1:]) != tuple(shape):
        want = ", ".join(map(str, shape))
        raise EdgesynthError(
            f"the samples have shape {tuple(x.shape)}; the model takes (N, {want}) "
            f"(or one ({want}) sample)",
            file=file,
            key="--data",
        )
    return x


def _npz(path: Path) -> Samples:
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError) as err:
        raise EdgesynthError(f"not a readable .npz archive ({err})", file=str(path)) from None
    if "x" in arrays:
        x = arrays["x"]
    elif len(arrays) == 1:
        x = next(iter(arrays.values()))
    else:
        raise EdgesynthError(
            f"the archive holds {', '.join(sorted(arrays)) or 'nothing'}; name the samples `x` "
            "(and the labels `y`)",
            file=str(path),
            key="--data",
        )
    labels = None
    if "y" in arrays:
        labels = check_labels(arrays["y"], len(x), f"{path} (y)")
    return Samples(x, labels, str(path))


def load_labels(path: Path, count: int) -> np.ndarray:
    """The --labels file: one integer class per sample of --data (before --limit)."""
    from edgesynth.flow import load_array

    return check_labels(load_array(path, "--labels", "--labels"), count, str(path))


def check_labels(labels: np.ndarray, count: int, file: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise EdgesynthError(
            f"labels must be one integer class per sample, shape (N,); found {labels.dtype} "
            f"{tuple(labels.shape)}",
            file=file,
            key="--labels",
        )
    if len(labels) != count:
        raise EdgesynthError(
            f"{len(labels)} labels for {count} samples; give one label per sample",
            file=file,
            key="--labels",
        )
    if len(labels) and labels.min() < 0:
        raise EdgesynthError(
            f"labels are classes from 0; found {int(labels.min())}", file=file, key="--labels"
        )
    return labels.astype(np.int64)


def _image_folder(folder: Path, shape: tuple[int, ...], mean: float, std: float) -> Samples:
    if len(shape) != 3 or shape[0] not in (1, 3):
        raise EdgesynthError(
            f"an image folder fits models that take 1 or 3 channels x H x W; this one takes "
            f"{shape}: give the samples as an .npy file",
            file=str(folder),
            key="--data",
        )
    classes = _class_folders(folder)
    if classes:
        files = [(_class_number(c, classes), f) for c in classes for f in _images(folder / c)]
    else:
        files = [(-1, f) for f in _images(folder)]
    if not files:
        raise EdgesynthError(
            f"no images ({', '.join(IMAGE_SUFFIXES)}) in the folder or its class subfolders",
            file=str(folder),
            key="--data",
        )
    x = np.stack([_read_image(f, shape) for _, f in files])
    labels = np.array([i for i, _ in files], dtype=np.int64) if classes else None
    return Samples((x - mean) / std, labels, str(folder), classes or None)


def _class_folders(folder: Path) -> list[str]:
    """The class subfolders: numbered ones in number order, others in name order."""
    names = [p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    numbered = all(name.isdigit() for name in names)
    return sorted(names, key=int) if numbered else sorted(names)


def _class_number(name: str, classes: list[str]) -> int:
    """A subfolder named by a number is that class; otherwise its place in name order."""
    return int(name) if all(c.isdigit() for c in classes) else classes.index(name)


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def _read_image(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """One image as (C, H, W) floats in 0..1, checked against the model's input."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("L" if shape[0] == 1 else "RGB"), dtype=np.float64)
    except (OSError, UnidentifiedImageError) as err:
        raise EdgesynthError(f"cannot read the image ({err})", file=str(path)) from None
    if pixels.shape[:2] != shape[1:]:
        raise EdgesynthError(
            f"the image is {pixels.shape[1]}x{pixels.shape[0]} pixels; the model takes "
            f"{shape[2]}x{shape[1]}",
            file=str(path),
            key="--data",
        )
    chw = pixels[None] if pixels.ndim == 2 else pixels.transpose(2, 0, 1)
    return chw / 255.0
