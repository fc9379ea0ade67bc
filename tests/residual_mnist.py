"""A residual, concatenating CNN for MNIST written for this check (two skip additions, one
channel concatenation of a block's input with its output: the block's input is read alone, as
an addition's operand and inside the concatenation), trained briefly (one epoch on 8,000 real
images) and exported by torch.onnx (cached by source and torch version)."""

from __future__ import annotations

from pathlib import Path

import needs
from mnist_lenet import trained_onnx

torch = needs.module("torch")
nn = torch.nn
F = torch.nn.functional


class ResidualConcat(nn.Module):
    """conv 1->8 + pool; two residual blocks (x + relu(conv(x))); the second block's input
    and output concatenated (16 channels); conv 16->16 + pool; linear 784->10."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, padding=1)
        self.block1 = nn.Conv2d(8, 8, 3, padding=1)
        self.block2 = nn.Conv2d(8, 8, 3, padding=1)
        self.mix = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):  # type: ignore[no-untyped-def]
        x = F.max_pool2d(F.relu(self.stem(x)), 2)  # 8x14x14
        a = x + F.relu(self.block1(x))  # skip addition 1
        b = a + F.relu(self.block2(a))  # skip addition 2
        x = torch.cat([a, b], dim=1)  # a: read alone, added and concatenated
        x = F.max_pool2d(F.relu(self.mix(x)), 2)  # 16x7x7
        return self.fc(torch.flatten(x, 1))


def residual_onnx() -> Path:
    """The trained network as ONNX (opset 13, the TorchScript exporter), cached."""
    return trained_onnx(ResidualConcat, "residual")
