"""QAT overhead: one training step of a QAT model vs the same architecture in plain PyTorch.

The MNIST demo network (ai85net5) is built twice: from edgesynth.nn with quantization-aware
training switched on, and from torch.nn (Conv2d/MaxPool2d/AvgPool2d/ReLU/Linear). Both train
on the same random batch; steps are interleaved so machine load affects both alike. The last
line reads `qat_step_ms=<ms> float_step_ms=<ms> overhead=<ratio>` (target: below 1.5).

    python benchmarks/qat_overhead.py [--batch 64] [--steps 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from edgesynth.nn.qat import QatPolicy, enable_qat
from edgesynth.train.models import create_model


class PlainNet5(nn.Module):
    """ai85net5's layers in plain PyTorch (no clamping, no quantization)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 60, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(60, 60, 3, padding=2, bias=False)
        self.conv3 = nn.Conv2d(60, 56, 3, padding=1, bias=False)
        self.conv4 = nn.Conv2d(56, 12, 3, padding=1, bias=False)
        self.fc = nn.Linear(192, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(F.max_pool2d(x, 2)))
        x = F.relu(self.conv3(F.max_pool2d(x, 2)))
        x = F.relu(self.conv4(F.avg_pool2d(x, 2)))
        return self.fc(x.flatten(1))


def _stepper(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], float]:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> float:
        start = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return time.perf_counter() - start

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.floor(torch.rand(args.batch, 1, 28, 28) * 256 - 128) / 128
    y = torch.randint(0, 10, (args.batch,))
    qat = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    enable_qat(qat, QatPolicy(start_epoch=0, weight_bits=8))
    plain = PlainNet5()
    steps = {"qat": _stepper(qat, x, y), "float": _stepper(plain, x, y)}
    times: dict[str, list[float]] = {"qat": [], "float": []}
    for _ in range(3):  # warm-up
        for step in steps.values():
            step()
    for _ in range(args.steps):
        for name, step in steps.items():
            times[name].append(step())
    q = statistics.median(times["qat"]) * 1000
    f = statistics.median(times["float"]) * 1000
    print(f"batch {args.batch}, {args.steps} steps each, {args.threads} threads (median)")
    print(f"qat_step_ms={q:.1f} float_step_ms={f:.1f} overhead={q / f:.2f}")


if __name__ == "__main__":
    main()
