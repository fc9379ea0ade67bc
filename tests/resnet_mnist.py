"""A ResNet-style CNN for MNIST written for this check: two basic blocks
`relu(x + conv(relu(conv(x))))`, a ReLU after each addition (the second block reads the first's
activated sum), trained briefly (one epoch on 8,000 real images) and exported by torch.onnx
(cached by source and torch version)."""

from __future__ import annotations

from pathlib import Path

import needs
from mnist_lenet import trained_onnx

torch = needs.module("torch")
nn = torch.nn
F = torch.nn.functional


class ResNetBlocks(nn.Module):
    """conv 1->8 + pool; two basic blocks relu(x + conv(relu(conv(x)))); conv 8->16 + pool;
    linear 784->10."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1)
        self.a1 = nn.Conv2d(8, 8, 3, padding=1)
        self.b1 = nn.Conv2d(8, 8, 3, padding=1)
        self.a2 = nn.Conv2d(8, 8, 3, padding=1)
        self.b2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):  # type: ignore[no-untyped-def]
        x = F.max_pool2d(F.relu(self.stem(x)), 2)  # 8x14x14
        x = F.relu(x + self.b1(F.relu(self.a1(x))))  # block 1: ReLU after the addition
        x = F.relu(x + self.b2(F.relu(self.a2(x))))  # block 2 reads block 1's activated sum
        x = F.max_pool2d(F.relu(self.head(x)), 2)  # 16x7x7
        return self.fc(torch.flatten(x, 1))


def resnet_onnx() -> Path:
    """The trained network as ONNX (opset 13, the TorchScript exporter), cached."""
    return trained_onnx(ResNetBlocks, "resnet")
