"""Regression and embedding training: datasets whose targets are vectors, not class numbers.

The vendor trains FaceID this way (`--regression`): the network's output vector learns a
target vector per item (a teacher's face embedding) under a squared error. Here:

- a dataset is a regression dataset when its targets are float vectors (N x D; the model's
  output size is D), e.g. a `--dataset-file` returning `(X, Y)` with Y of shape N x D;
- `--loss` chooses the loss: `ce` (cross-entropy, classification: the default for labels),
  `mse` (the default for vectors, the vendor's), `l1`, `smoothl1`, or `cosine` (1 - cosine
  similarity, for embeddings compared by angle);
- the metrics replace top-1: mean squared error, mean absolute error and mean cosine
  similarity of outputs to targets; the best checkpoint is the one with the lowest test loss.

In 8-bit mode the outputs are the chip's integers; `OutputUnit` finds the scale back to
training values from the layer that produced them (a 32-bit output counts in units of
2^-(weight bits + 6), an 8-bit output in 1/128).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.train.defaults import (
    CLASSIFICATION_LOSS,
    DEFAULT_REGRESSION_LOSS,
    LOSSES,
    REGRESSION_LOSSES,
)
from edgesynth.train.metrics import Metrics, RegressionScores


def is_regression(loss: str) -> bool:
    return loss in REGRESSION_LOSSES


def choose_loss(requested: str | None, regression_flag: bool, vectors: bool) -> str:
    """The loss for a dataset: `requested`, or the default for its targets; checked."""
    if requested is not None and requested not in LOSSES:
        raise EdgesynthError(
            f"unknown loss `{requested}`; choose {', '.join(LOSSES)}."
            + did_you_mean(requested, LOSSES),
            key="--loss",
        )
    default = DEFAULT_REGRESSION_LOSS if vectors or regression_flag else CLASSIFICATION_LOSS
    loss = requested or default
    if is_regression(loss) and not vectors:
        raise EdgesynthError(
            f"--loss {loss} (regression) needs a dataset whose targets are vectors; this one "
            "has class labels.",
            key="--regression" if requested is None else "--loss",
        )
    if not is_regression(loss) and vectors:
        raise EdgesynthError(
            "the dataset's targets are vectors (regression): choose --loss "
            + ", ".join(REGRESSION_LOSSES)
            + ", not ce.",
            key="--loss",
        )
    return loss


def regression_loss(name: str, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean loss of `outputs` against `targets` (both N x D)."""
    outputs, targets = outputs.reshape(len(outputs), -1), targets.reshape(len(targets), -1)
    if name == "mse":
        return F.mse_loss(outputs, targets)
    if name == "l1":
        return F.l1_loss(outputs, targets)
    if name == "smoothl1":
        return F.smooth_l1_loss(outputs, targets)
    if name == "cosine":
        return (1 - F.cosine_similarity(outputs, targets, dim=1, eps=1e-8)).mean()
    raise EdgesynthError(f"unknown regression loss `{name}`.")


class RegressionAccumulator:
    """Sums of squared and absolute errors and of cosine similarities, over batches; the
    same attributes the classification accumulator offers to the training loop."""

    def __init__(self) -> None:
        self.loss_sum = 0.0
        self.correct1 = 0  # no classes: the loop's top-1 sum stays 0
        self.n = 0
        self.sq = 0.0
        self.abs = 0.0
        self.cos = 0.0
        self.values = 0

    def add(self, outputs: torch.Tensor, targets: torch.Tensor, loss: float | None = None) -> None:
        out = outputs.detach().double().reshape(len(outputs), -1)
        tgt = targets.detach().double().reshape(len(targets), -1).to(out.device)
        n = int(out.shape[0])
        self.n += n
        self.values += int(out.numel())
        self.sq += float(((out - tgt) ** 2).sum())
        self.abs += float((out - tgt).abs().sum())
        self.cos += float(F.cosine_similarity(out, tgt, dim=1, eps=1e-8).sum())
        if loss is not None:
            self.loss_sum += loss * n

    def result(self) -> Metrics:
        n, values = max(self.n, 1), max(self.values, 1)
        scores = RegressionScores(self.sq / values, self.abs / values, self.cos / n)
        return Metrics(
            self.loss_sum / n,
            float("nan"),
            float("nan"),
            np.zeros((0, 0), dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            regression=scores,
            items=self.n,
        )


class OutputUnit:
    """Notes which edgesynth.nn layer ran last in a forward pass (the one whose output the
    model returns) and gives the size of one training unit in its 8-bit-mode integers."""

    def __init__(self, model: nn.Module) -> None:
        from edgesynth.nn.base import HardwareLayer

        self.last: Any = None
        self._hooks = [
            m.register_forward_hook(self._seen)
            for m in model.modules()
            if isinstance(m, HardwareLayer)
        ]

    def _seen(self, module: nn.Module, args: Any, output: Any) -> None:
        self.last = module

    def unit(self) -> float:
        from edgesynth.nn import functional as hw

        for hook in self._hooks:
            hook.remove()
        layer = self.last
        if layer is None or not layer.wide or layer.op is None:
            return float(hw.ACT_SCALE)
        return 2.0 ** (hw.hardware_bits(layer.bits) + hw.ACT_BITS - 2)
