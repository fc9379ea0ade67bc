"""My MNIST loader: the t10k IDX files, 8,000 to train, 2,000 to test."""

import gzip
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset


def _idx(path: Path) -> np.ndarray:
    with gzip.open(path) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def make_datasets(folder):
    images = _idx(Path(folder) / "t10k-images-idx3-ubyte.gz")
    labels = _idx(Path(folder) / "t10k-labels-idx1-ubyte.gz")
    x = torch.from_numpy((images[:, None] / 255.0 - 0.5) * 2).float()
    y = torch.from_numpy(labels.astype(np.int64))
    train = TensorDataset(x[:8000], y[:8000])
    test = TensorDataset(x[8000:], y[8000:])
    return train, test, [str(d) for d in range(10)]
