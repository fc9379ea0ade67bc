"""The user's own files for the tests: a small MNIST network and a loader of the real MNIST
t10k files, written into a test's folder as a user would write them (nothing of edgesynth's
test machinery inside)."""

from __future__ import annotations

from pathlib import Path

MODEL_FILE = '''\
"""A small MNIST network of my own."""
from torch import nn

import edgesynth.nn as enn


class MyNet(nn.Module):
    def __init__(self, num_classes=10, num_channels=1, dimensions=(28, 28), width=16, bias=False):
        super().__init__()
        self.conv1 = enn.FusedConv2dReLU(num_channels, width, 3, padding=1, bias=bias)
        self.conv2 = enn.FusedMaxPoolConv2dReLU(
            width, 2 * width, 3, pool_size=2, pool_stride=2, padding=1, bias=bias
        )
        self.conv3 = enn.FusedMaxPoolConv2dReLU(
            2 * width, width, 3, pool_size=2, pool_stride=2, padding=1, bias=bias
        )
        side = dimensions[0] // 4
        self.fc = enn.Linear(width * side * side, num_classes, bias=True, wide=True)

    def forward(self, x):
        x = self.conv3(self.conv2(self.conv1(x)))
        return self.fc(x.flatten(1))
'''

DATA_FILE = '''\
"""My MNIST loader: the t10k IDX files; a slice to train, a slice to test."""
import gzip
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

TRAIN, TEST = {train}, {test}


def _idx(path):
    data = gzip.open(path).read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def make_datasets(folder):
    images = _idx(Path(folder) / "t10k-images-idx3-ubyte.gz")
    labels = _idx(Path(folder) / "t10k-labels-idx1-ubyte.gz")
    x = torch.from_numpy((images[:, None] / 255.0 - 0.5) * 2).float()
    y = torch.from_numpy(labels.astype(np.int64))
    train = TensorDataset(x[:TRAIN], y[:TRAIN])
    test = TensorDataset(x[-TEST:], y[-TEST:])
    return train, test, [str(d) for d in range(10)]
'''


def write_user_files(folder: Path, train: int = 512, test: int = 1000) -> tuple[Path, Path]:
    """my_models.py and my_data.py in `folder`; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "my_models.py"
    data = folder / "my_data.py"
    model.write_text(MODEL_FILE)
    data.write_text(DATA_FILE.format(train=train, test=test))
    return model, data
