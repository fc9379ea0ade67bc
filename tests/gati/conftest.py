"""Fixtures for the Gati tests: real MNIST, trained CNNs (cached), their ONNX exports."""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import gati_mnist_models as mm

CACHE = Path(tempfile.gettempdir()) / "edgesynth-test-cache"
EPOCHS = {"lenet": 4, "vgg": 3, "example": 3}
BUILDERS = {"lenet": mm.lenet, "vgg": mm.vgg, "example": mm.example_net}


@pytest.fixture(scope="session")
def mnist() -> tuple[np.ndarray, np.ndarray]:
    return mm.load_mnist()


@pytest.fixture(scope="session")
def calibration(mnist: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """A few hundred training images."""
    return mnist[0][:300]


@pytest.fixture(scope="session")
def eval_set(mnist: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """1,000 images the networks were not trained on, with labels."""
    x, y = mnist
    return x[mm.EVAL], y[mm.EVAL]


def _trained(name: str, mnist: tuple[np.ndarray, np.ndarray]):  # type: ignore[no-untyped-def]
    """Train once; the weights are cached (keyed by the training code) in the temp dir."""
    import torch

    builder = BUILDERS[name]
    key_src = "".join(
        [inspect.getsource(builder), inspect.getsource(mm.train), name, str(EPOCHS[name])]
    )
    key_src += torch.__version__
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    path = CACHE / f"gati-{name}-{key}.pt"
    model = builder()
    if path.is_file():
        model.load_state_dict(torch.load(path, weights_only=True))
        model.eval()
        return model
    x, y = mnist
    mm.train(model, x[: mm.N_TRAIN], y[: mm.N_TRAIN], EPOCHS[name], batch=64)
    CACHE.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=CACHE, suffix=".pt")
    os.close(fd)
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    return model


@pytest.fixture(scope="session")
def lenet_model(mnist):  # type: ignore[no-untyped-def]
    return _trained("lenet", mnist)


@pytest.fixture(scope="session")
def vgg_model(mnist):  # type: ignore[no-untyped-def]
    return _trained("vgg", mnist)


@pytest.fixture(scope="session")
def example_model(mnist):  # type: ignore[no-untyped-def]
    return _trained("example", mnist)


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gati_onnx")


@pytest.fixture(scope="session")
def lenet_onnx(lenet_model, onnx_dir: Path) -> Path:  # type: ignore[no-untyped-def]
    return mm.export(lenet_model, onnx_dir / "lenet.onnx", opset=13, dynamic=True)


@pytest.fixture(scope="session")
def vgg_onnx(vgg_model, onnx_dir: Path) -> Path:  # type: ignore[no-untyped-def]
    return mm.export(vgg_model, onnx_dir / "vgg.onnx", opset=13, dynamic=True, fold=False)
