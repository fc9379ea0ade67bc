"""The samples `edgesynth validate` reads: a folder of real MNIST images gives the same samples
and labels as the .npy arrays, an .npz archive its `x` and `y`; the progress bar shows only on a
terminal."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.validate.samples import load_samples
from edgesynth.validate.text import progress_bar
from mnist_lenet import MNIST, idx_file

MEAN, STD = 0.1307, 0.3081  # the LeNet's normalization (tests/mnist_lenet.py)


@pytest.fixture(scope="module")
def mnist() -> tuple[np.ndarray, np.ndarray]:
    """The first 30 t10k images (uint8) and labels."""
    images = idx_file(MNIST / "t10k-images-idx3-ubyte.gz")[:30]
    labels = idx_file(MNIST / "t10k-labels-idx1-ubyte.gz")[:30].astype(np.int64)
    return images, labels


def test_an_image_folder_gives_the_samples_and_labels_of_the_arrays(
    mnist: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    from PIL import Image

    images, labels = mnist
    for i, (image, label) in enumerate(zip(images, labels, strict=True)):
        folder = tmp_path / "images" / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{i:03d}.png")
    samples = load_samples(tmp_path / "images", (1, 28, 28), mean=MEAN, std=STD)
    order = np.lexsort((np.arange(len(labels)), labels))  # class folders, then file names
    want = ((images[order] / 255.0 - MEAN) / STD)[:, None]
    assert samples.labels is not None and samples.labels.tolist() == labels[order].tolist()
    assert np.allclose(samples.x, want, atol=1e-12)
    assert samples.classes == sorted({str(c) for c in labels})


def test_an_image_of_another_size_is_refused(tmp_path: Path) -> None:
    from PIL import Image

    (tmp_path / "images").mkdir()
    Image.fromarray(np.zeros((20, 24), np.uint8)).save(tmp_path / "images" / "a.png")
    with pytest.raises(EdgesynthError, match="the image is 24x20 pixels; the model takes 28x28"):
        load_samples(tmp_path / "images", (1, 28, 28))


def test_an_npz_archive_gives_x_and_y(mnist: tuple[np.ndarray, np.ndarray], tmp_path: Path):
    images, labels = mnist
    x = images[:, None].astype(np.float32) / 255
    np.savez(tmp_path / "data.npz", x=x, y=labels)
    samples = load_samples(tmp_path / "data.npz", (1, 28, 28)).first(10)
    assert np.array_equal(samples.x, x[:10]) and samples.labels is not None
    assert samples.labels.tolist() == labels[:10].tolist()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_on_a_terminal_only() -> None:
    assert progress_bar(io.StringIO()) is None
    stream = _Terminal()
    show = progress_bar(stream)
    assert show is not None
    show(100, 1000)
    assert "100/1000" in stream.getvalue()
    show(1000, 1000)
    assert stream.getvalue().endswith("\r")  # the finished bar is wiped
