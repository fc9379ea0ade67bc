"""What `edgesynth train` offers, as plain data: each dataset with one line and its default
model, each model with one line. The registries (`datasets.DATASETS`, `models.MODELS`) attach
the loaders and classes to these entries; `edgesynth train --help` lists them from here, without
loading PyTorch."""

from __future__ import annotations

# name -> (description, default model)
DATASETS: dict[str, tuple[str, str]] = {
    "digits": ("scikit-learn 8x8 digits (built in)", "ai85net5"),
    "mnist": ("MNIST from IDX files in --data", "ai85net5"),
    "mnist-test-split": ("MNIST t10k only: first 8,000 train, last 2,000 test", "ai85net5"),
    "synthetic": ("generated 12x12 patterns, 4 classes", "ai85netextrasmall"),
    "fashionmnist": ("Fashion-MNIST from IDX files in --data", "ai85net5"),
    "cifar10": ("CIFAR-10 python batches in --data", "ai85nascifarnet"),
    "cifar100": ("CIFAR-100 python batches in --data", "ai85nascifarnet"),
    "svhn": ("SVHN .mat files in --data", "ai85nascifarnet"),
    "imagefolder": (
        "your images: --data/train/<class>/*.png, --data/test/<class>/*.png",
        "ai85nascifarnet",
    ),
    "kws20": (
        "Speech Commands v2 wav folders in --data: 20 keywords + unknown, 128x128",
        "ai85kws20netv3",
    ),
}

# name -> description
MODELS: dict[str, str] = {
    "ai85net5": "MNIST/CIFAR-10 5-layer CNN (vendor demo)",
    "ai85netextrasmall": "minimal MNIST CNN",
    "ai85nascifarnet": "CIFAR-10 NAS network (vendor demo)",
    "ai85kws20netv3": "keyword spotting v3, MAX78000",
    "ai87kws20netv3": "keyword spotting v3, MAX78002",
    "ai85kws20netv2": "keyword spotting v2",
    "ai85simplenet": "CIFAR-100 SimpleNet v1, batchnorm",
    "ai85ressimplenet": "CIFAR-100 SimpleNet v1, residual",
    "ai85cdnet": "cats vs dogs, 3x64x64",
    "ai85faceidnet": "FaceID: 3x160x120 face -> 512 embedding",
}
