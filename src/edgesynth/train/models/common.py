"""What several of the vendor's model definitions share."""

from __future__ import annotations

from torch import nn


def second_layer_padding(dim: int) -> tuple[int, int]:
    """The vendor's demos pad their second, pooled convolution by 2 for a 28x28 input (14 grows
    to 16, which halves evenly later) and by 1 otherwise: (padding, size after that layer)."""
    pad = 2 if dim == 28 else 1
    return pad, dim // 2 + (2 if pad == 2 else 0)


def kaiming_init(model: nn.Module) -> None:
    """The vendor's initialization of these models' 2D convolutions (fan-out, ReLU gain)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
