"""A small residual CNN for MNIST written for the Gati residual tests: two skip additions, a
concatenation of a block's input with its output, and a subtraction (or multiplication) of two
branches, exported by `torch.onnx`."""

from __future__ import annotations


def residual_net(combine: str = "sub"):  # type: ignore[no-untyped-def]
    """conv-relu, a residual block (add) with max pooling after it, a second residual block,
    concat(block input, block output), two convolutions on the concatenation combined by
    `combine` (sub | mul), max pooling, a fully-connected classifier."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
            self.conv4 = nn.Conv2d(8, 16, 3, padding=1)
            self.conv5 = nn.Conv2d(16, 16, 3, padding=1)
            self.conv6 = nn.Conv2d(24, 12, 3, padding=1)
            self.conv7 = nn.Conv2d(24, 12, 1)
            self.fc = nn.Linear(12 * 7 * 7, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = F.relu(self.conv1(x))
            d = F.relu(self.conv3(F.relu(self.conv2(a))) + a)  # skip addition 1
            e = F.max_pool2d(d, 2)
            f = F.relu(self.conv4(e))
            h = F.relu(self.conv5(f) + f)  # skip addition 2
            c = torch.cat([e, h], 1)  # the block's input with its output
            p, q = self.conv6(c), self.conv7(c)
            r = F.relu(p - q if combine == "sub" else p * q)
            return self.fc(torch.flatten(F.max_pool2d(r, 2), 1))

    return Net()
