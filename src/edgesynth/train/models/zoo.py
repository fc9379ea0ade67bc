"""More of the vendor's model zoo, rebuilt from edgesynth.nn: SimpleNet and its residual
variant (CIFAR-100 by default), keyword spotting v2 and the cats-vs-dogs network.

Layer names, shapes and order are the vendor's (ai8x-training's `ai85simplenet`,
`ai85ressimplenet`, `ai85kws20netv2`, `ai85cdnet`), so their checkpoints load here.
"""

from __future__ import annotations

import torch
from torch import nn

import edgesynth.nn as enn
from edgesynth.train.models.common import kaiming_init, second_layer_padding


class AI85SimpleNet(nn.Module):
    """SimpleNet v1 with batchnorm: thirteen 3x3/1x1 convolutions and a wide 1x1 classifier."""

    # (input channels, output channels, kernel, max pooling before the convolution)
    PLAN = (
        (None, 16, 3, False),
        (16, 20, 3, False),
        (20, 20, 3, False),
        (20, 20, 3, False),
        (20, 20, 3, True),
        (20, 20, 3, False),
        (20, 44, 3, False),
        (44, 48, 3, True),
        (48, 48, 3, False),
        (48, 96, 3, True),
        (96, 512, 1, True),
        (512, 128, 1, False),
        (128, 128, 3, True),
    )
    batchnorm: str | None = "affine"

    def __init__(
        self,
        num_classes: int = 100,
        num_channels: int = 3,
        dimensions: tuple[int, int] = (32, 32),
        bias: bool = True,  # the vendor trains it with --use-bias: folded batchnorm needs one
    ) -> None:
        super().__init__()
        del dimensions
        for i, (cin, cout, k, pool) in enumerate(self.PLAN, start=1):
            setattr(self, f"conv{i}", self._conv(cin or num_channels, cout, k, pool, bias))
        self.conv14 = enn.Conv2d(128, num_classes, 1, padding=0, bias=bias, wide=True)

    def _conv(self, cin: int, cout: int, k: int, pool: bool, bias: bool) -> nn.Module:
        bn = {"batchnorm": self.batchnorm} if self.batchnorm else {}
        kinds = {
            (False, True): enn.FusedConv2dBNReLU,
            (True, True): enn.FusedMaxPoolConv2dBNReLU,
            (False, False): enn.FusedConv2dReLU,
            (True, False): enn.FusedMaxPoolConv2dReLU,
        }
        layer = kinds[(pool, bool(self.batchnorm))]
        pooling = {"pool_size": 2, "pool_stride": 2} if pool else {}
        return layer(cin, cout, k, padding=k // 2, bias=bias, **pooling, **bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, 15):
            x = getattr(self, f"conv{i}")(x)
        return x.flatten(1)


class AI85ResidualSimpleNet(AI85SimpleNet):
    """SimpleNet v1 without batchnorm and with three residual additions."""

    batchnorm = None

    def __init__(
        self,
        num_classes: int = 100,
        num_channels: int = 3,
        dimensions: tuple[int, int] = (32, 32),
        bias: bool = False,
    ) -> None:
        super().__init__(num_classes, num_channels, dimensions, bias)
        self.resid1 = enn.Add()
        self.resid2 = enn.Add()
        self.resid3 = enn.Add()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        res = self.conv2(x)
        x = self.conv4(self.resid1(self.conv3(res), res))
        res = self.conv5(x)
        x = self.conv7(self.resid2(self.conv6(res), res))
        res = self.conv8(x)
        x = self.resid3(self.conv9(res), res)
        for i in range(10, 15):
            x = getattr(self, f"conv{i}")(x)
        return x.flatten(1)


class AI85KWS20Netv2(nn.Module):
    """Keyword spotting v2: eight 1D convolutions over 128 steps of 128 features."""

    def __init__(
        self,
        num_classes: int = 21,
        num_channels: int = 128,
        dimensions: tuple[int, int] = (128, 1),
        bias: bool = False,
    ) -> None:
        super().__init__()
        del dimensions
        self.conv1 = enn.FusedConv1dReLU(num_channels, 100, 1, padding=0, bias=bias)
        self.conv2 = enn.FusedConv1dReLU(100, 48, 3, padding=0, bias=bias)
        self.conv3 = enn.FusedMaxPoolConv1dReLU(48, 96, 3, padding=1, bias=bias)
        self.conv4 = enn.FusedConv1dReLU(96, 128, 3, padding=0, bias=bias)
        self.conv5 = enn.FusedMaxPoolConv1dReLU(128, 160, 3, padding=1, bias=bias)
        self.conv6 = enn.FusedConv1dReLU(160, 192, 3, padding=0, bias=bias)
        self.conv7 = enn.FusedAvgPoolConv1dReLU(192, 192, 3, padding=1, bias=bias)
        self.conv8 = enn.FusedConv1dReLU(192, 32, 3, padding=0, bias=bias)
        self.fc = enn.Linear(32 * 12, num_classes, bias=bias, wide=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, 9):
            x = getattr(self, f"conv{i}")(x)
        return self.fc(x.flatten(1))


class AI85CatsDogsNet(nn.Module):
    """Cats vs dogs: six 3x3 convolutions, four of them after max pooling, and a classifier."""

    def __init__(
        self,
        num_classes: int = 2,
        num_channels: int = 3,
        dimensions: tuple[int, int] = (64, 64),
        fc_inputs: int = 30,
        bias: bool = False,
    ) -> None:
        super().__init__()
        dim = dimensions[0]
        pool = {"pool_size": 2, "pool_stride": 2}
        self.conv1 = enn.FusedConv2dReLU(num_channels, 15, 3, padding=1, bias=bias)
        pad, dim = second_layer_padding(dim)
        self.conv2 = enn.FusedMaxPoolConv2dReLU(15, 30, 3, padding=pad, bias=bias, **pool)
        self.conv3 = enn.FusedMaxPoolConv2dReLU(30, 60, 3, padding=1, bias=bias, **pool)
        self.conv4 = enn.FusedMaxPoolConv2dReLU(60, 30, 3, padding=1, bias=bias, **pool)
        self.conv5 = enn.FusedMaxPoolConv2dReLU(30, 30, 3, padding=1, bias=bias, **pool)
        dim //= 8
        self.conv6 = enn.FusedConv2dReLU(30, fc_inputs, 3, padding=1, bias=bias)
        self.fc = enn.Linear(fc_inputs * dim * dim, num_classes, bias=True)
        kaiming_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, 7):
            x = getattr(self, f"conv{i}")(x)
        return self.fc(x.flatten(1))


class AI85FaceIDNet(nn.Module):
    """FaceID: eight convolutions from a 3x160x120 face to a 512-value embedding (the vendor
    trains it to match a larger network's embeddings: a regression, not classes)."""

    def __init__(
        self,
        num_classes: int | None = None,
        num_channels: int = 3,
        dimensions: tuple[int, int] = (160, 120),
        bias: bool = True,
    ) -> None:
        super().__init__()
        del num_classes
        pool = {"pool_size": 2, "pool_stride": 2}
        self.conv1 = enn.FusedConv2dReLU(num_channels, 16, 3, padding=1, bias=False)
        self.conv2 = enn.FusedMaxPoolConv2dReLU(16, 32, 3, padding=1, bias=False, **pool)
        self.conv3 = enn.FusedMaxPoolConv2dReLU(32, 32, 3, padding=1, bias=bias, **pool)
        self.conv4 = enn.FusedMaxPoolConv2dReLU(32, 64, 3, padding=1, bias=bias, **pool)
        self.conv5 = enn.FusedMaxPoolConv2dReLU(64, 64, 3, padding=1, bias=bias, **pool)
        self.conv6 = enn.FusedConv2dReLU(64, 64, 3, padding=1, bias=bias)
        self.conv7 = enn.FusedConv2dReLU(64, 64, 3, padding=1, bias=bias)
        self.conv8 = enn.FusedMaxPoolConv2d(64, 512, 1, padding=0, bias=False, **pool)
        h, w = dimensions[0] // 32, dimensions[1] // 32
        self.avgpool = enn.AvgPool2d((h, w), stride=1)  # one window: the map is h x w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, 9):
            x = getattr(self, f"conv{i}")(x)
        return self.avgpool(x)
