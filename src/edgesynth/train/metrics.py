"""Classification metrics: top-k accuracy, confusion matrix, and their text rendering."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class RegressionScores:
    """How close a regression model's output vectors come to the targets."""

    mse: float  # mean squared error per value
    mae: float  # mean absolute error per value
    cosine: float  # mean cosine similarity of output and target vectors

    def describe(self) -> str:
        return f"mse {self.mse:.4g} mae {self.mae:.4g} cosine {self.cosine:.4f}"


@dataclass
class Metrics:
    loss: float
    top1: float  # percent (nan for regression)
    top5: float  # percent (equals top1 with fewer than 5 classes... or 100 when k >= classes)
    confusion: np.ndarray  # (true, predicted) counts
    predictions: np.ndarray  # predicted class per sample
    regression: RegressionScores | None = None  # a regression model's scores instead of top-k
    items: int | None = None  # the number of items, where there is no confusion matrix

    @property
    def count(self) -> int:
        return self.items if self.items is not None else int(self.confusion.sum())

    @property
    def score(self) -> float:
        """Higher is better: top-1, or for regression the negative loss."""
        return -self.loss if self.regression is not None else self.top1

    def describe(self) -> str:
        """`top1 x% top5 y%`, or the regression scores."""
        if self.regression is not None:
            return self.regression.describe()
        return f"top1 {self.top1:.2f}% top5 {self.top5:.2f}%"


class MetricAccumulator:
    def __init__(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.loss_sum = 0.0
        self.correct1 = 0
        self.correct5 = 0
        self.n = 0
        self.confusion = np.zeros((num_classes, num_classes), dtype=np.int64)
        self.predictions: list[np.ndarray] = []

    def add(self, logits: torch.Tensor, labels: torch.Tensor, loss: float | None = None) -> None:
        logits = logits.detach().float()
        k = min(5, logits.shape[1])
        top = logits.topk(k, dim=1).indices
        pred = top[:, 0]
        self.correct1 += int((pred == labels).sum())
        self.correct5 += int((top == labels[:, None]).any(dim=1).sum())
        self.n += int(labels.shape[0])
        if loss is not None:
            self.loss_sum += loss * int(labels.shape[0])
        np.add.at(self.confusion, (labels.numpy(), pred.numpy()), 1)
        self.predictions.append(pred.numpy())

    def result(self) -> Metrics:
        n = max(self.n, 1)
        preds = np.concatenate(self.predictions) if self.predictions else np.zeros(0, np.int64)
        return Metrics(
            self.loss_sum / n,
            100.0 * self.correct1 / n,
            100.0 * self.correct5 / n,
            self.confusion,
            preds,
        )


def format_confusion(confusion: np.ndarray, classes: list[str]) -> str:
    """The confusion matrix as text: rows are true classes, columns predictions."""
    width = max(4, len(str(int(confusion.max(initial=0)))) + 1, *(len(c) + 1 for c in classes))
    head = " " * width + "".join(f"{c:>{width}}" for c in classes)
    rows = [
        f"{classes[i]:>{width}}" + "".join(f"{int(v):>{width}}" for v in row)
        for i, row in enumerate(confusion)
    ]
    return "\n".join([head, *rows])
