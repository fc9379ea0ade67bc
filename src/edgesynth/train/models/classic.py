"""The vendor's classic demo architectures, rebuilt from edgesynth.nn.

Layer names, shapes and order match ai8x-training's models, so its checkpoints load here and
ours load there. Each factory takes the vendor's keyword arguments (`num_classes`,
`num_channels`, `dimensions`, `bias`).
"""

from __future__ import annotations

import torch
from torch import nn

import edgesynth.nn as enn
from edgesynth.train.models.common import kaiming_init, second_layer_padding


class AI85Net5(nn.Module):
    """MNIST/CIFAR demo: four 3x3 convolutions (with max/avg pooling) and a wide classifier."""

    def __init__(
        self,
        num_classes: int = 10,
        num_channels: int = 1,
        dimensions: tuple[int, int] = (28, 28),
        planes: int = 60,
        pool: int = 2,
        fc_inputs: int = 12,
        bias: bool = False,
    ) -> None:
        super().__init__()
        dim = dimensions[0]
        self.conv1 = enn.FusedConv2dReLU(num_channels, planes, 3, padding=1, bias=bias)
        pad, dim = second_layer_padding(dim)
        self.conv2 = enn.FusedMaxPoolConv2dReLU(
            planes, planes, 3, pool_size=2, pool_stride=2, padding=pad, bias=bias
        )
        self.conv3 = enn.FusedMaxPoolConv2dReLU(
            planes, 128 - planes - fc_inputs, 3, pool_size=2, pool_stride=2, padding=1, bias=bias
        )
        dim //= 2
        self.conv4 = enn.FusedAvgPoolConv2dReLU(
            128 - planes - fc_inputs,
            fc_inputs,
            3,
            pool_size=pool,
            pool_stride=2,
            padding=1,
            bias=bias,
        )
        dim //= pool
        self.fc = enn.Linear(fc_inputs * dim * dim, num_classes, bias=True, wide=True)
        kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv4(self.conv3(self.conv2(self.conv1(x))))
        return self.fc(x.flatten(1))


class AI85NetExtraSmall(nn.Module):
    """Minimal MNIST network: three convolutions and a wide classifier."""

    def __init__(
        self,
        num_classes: int = 10,
        num_channels: int = 1,
        dimensions: tuple[int, int] = (28, 28),
        fc_inputs: int = 8,
        bias: bool = False,
    ) -> None:
        super().__init__()
        dim = dimensions[0]
        self.conv1 = enn.FusedConv2dReLU(num_channels, 8, 3, padding=1, bias=bias)
        pad, dim = second_layer_padding(dim)
        self.conv2 = enn.FusedMaxPoolConv2dReLU(
            8, 8, 3, pool_size=2, pool_stride=2, padding=pad, bias=bias
        )
        self.conv3 = enn.FusedMaxPoolConv2dReLU(
            8, fc_inputs, 3, pool_size=4, pool_stride=4, padding=1, bias=bias
        )
        dim //= 4
        self.fc = enn.Linear(fc_inputs * dim * dim, num_classes, bias=True, wide=True)
        kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv3(self.conv2(self.conv1(x)))
        return self.fc(x.flatten(1))


class AI85NASCifarNet(nn.Module):
    """CIFAR-10 demo found by neural architecture search: ten conv+batchnorm layers."""

    def __init__(
        self,
        num_classes: int = 10,
        num_channels: int = 3,
        dimensions: tuple[int, int] = (32, 32),
        bias: bool = True,
    ) -> None:
        super().__init__()
        del dimensions
        bn = {"bias": bias, "batchnorm": "noaffine"}
        self.conv1_1 = enn.FusedConv2dBNReLU(num_channels, 64, 3, padding=1, **bn)
        self.conv1_2 = enn.FusedConv2dBNReLU(64, 32, 1, padding=0, **bn)
        self.conv1_3 = enn.FusedConv2dBNReLU(32, 64, 3, padding=1, **bn)
        self.conv2_1 = enn.FusedMaxPoolConv2dBNReLU(64, 32, 3, padding=1, **bn)
        self.conv2_2 = enn.FusedConv2dBNReLU(32, 64, 1, padding=0, **bn)
        self.conv3_1 = enn.FusedMaxPoolConv2dBNReLU(64, 128, 3, padding=1, **bn)
        self.conv3_2 = enn.FusedConv2dBNReLU(128, 128, 1, padding=0, **bn)
        self.conv4_1 = enn.FusedMaxPoolConv2dBNReLU(128, 64, 3, padding=1, **bn)
        self.conv4_2 = enn.FusedConv2dBNReLU(64, 128, 3, padding=1, **bn)
        self.conv5_1 = enn.FusedMaxPoolConv2dBNReLU(128, 128, 1, padding=0, **bn)
        self.fc = enn.Linear(512, num_classes, bias=bias, wide=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in (
            self.conv1_1,
            self.conv1_2,
            self.conv1_3,
            self.conv2_1,
            self.conv2_2,
            self.conv3_1,
            self.conv3_2,
            self.conv4_1,
            self.conv4_2,
            self.conv5_1,
        ):
            x = layer(x)
        return self.fc(x.flatten(1))


class _KWS20v3(nn.Module):
    """Keyword spotting v3: eight 1D convolutions over 128 time steps of 128 features."""

    last_kernel = 6
    pad = 1
    fc_inputs = 256

    def __init__(
        self,
        num_classes: int = 21,
        num_channels: int = 128,
        dimensions: tuple[int, int] = (128, 1),
        bias: bool = False,
    ) -> None:
        super().__init__()
        del dimensions
        p = self.pad
        self.drop = nn.Dropout(p=0.2)
        self.voice_conv1 = enn.FusedConv1dReLU(num_channels, 100, 1, padding=0, bias=bias)
        self.voice_conv2 = enn.FusedConv1dReLU(100, 96, 3, padding=0, bias=bias)
        self.voice_conv3 = enn.FusedMaxPoolConv1dReLU(96, 64, 3, padding=p, bias=bias)
        self.voice_conv4 = enn.FusedConv1dReLU(64, 48, 3, padding=0, bias=bias)
        self.kws_conv1 = enn.FusedMaxPoolConv1dReLU(48, 64, 3, padding=p, bias=bias)
        self.kws_conv2 = enn.FusedConv1dReLU(64, 96, 3, padding=0, bias=bias)
        self.kws_conv3 = enn.FusedAvgPoolConv1dReLU(96, 100, 3, padding=p, bias=bias)
        self.kws_conv4 = enn.FusedMaxPoolConv1dReLU(100, 64, self.last_kernel, padding=p, bias=bias)
        self.fc = enn.Linear(self.fc_inputs, num_classes, bias=bias, wide=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.voice_conv2(self.voice_conv1(x)))
        x = self.drop(self.voice_conv4(self.voice_conv3(x)))
        x = self.drop(self.kws_conv2(self.kws_conv1(x)))
        x = self.kws_conv4(self.kws_conv3(x))
        return self.fc(x.flatten(1))


class AI85KWS20Netv3(_KWS20v3):
    """KWS20 v3 for MAX78000 (padded convolutions, 6-tap last layer)."""


class AI87KWS20Netv3(_KWS20v3):
    """KWS20 v3 for MAX78002 (unpadded convolutions, 3-tap last layer)."""

    last_kernel = 3
    pad = 0
    fc_inputs = 192
