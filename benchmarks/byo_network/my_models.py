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
            2 * width, 2 * width, 3, pool_size=2, pool_stride=2, padding=1, bias=bias
        )
        self.conv4 = enn.FusedMaxPoolConv2dReLU(
            2 * width, width, 3, pool_size=2, pool_stride=2, padding=1, bias=bias
        )
        side = dimensions[0] // 8
        self.fc = enn.Linear(width * side * side, num_classes, bias=True, wide=True)

    def forward(self, x):
        x = self.conv4(self.conv3(self.conv2(self.conv1(x))))
        return self.fc(x.flatten(1))
