"""How far a deployed network's outputs are from the float model's: the numbers `edgesynth
validate` prints for every output and, with --per-layer, for every layer both share.

Every function takes arrays of one batch, (N, ...) with the samples first; the float model's
values are the reference `ref`, the target's dequantized values `got`. The error is
`got - ref`, in the float model's units.

- rmse, mae: root mean square and mean absolute error over every element;
- l2r: the L2 norm of the error over that of the reference (None when the reference is all
  zero: a relative error of nothing is not a number);
- cosine: the cosine of the angle between the two, flattened (None when either is all zero);
- mean, std: of the error over every element (std with 1/n: rmse^2 = mean^2 + std^2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# `first_jump`: the first layer whose relative error is at least JUMP_FLOOR and at least
# JUMP_RATIO times the largest before it.
JUMP_FLOOR = 0.1
JUMP_RATIO = 3.0


@dataclass(frozen=True)
class ErrorMetrics:
    rmse: float
    mae: float
    l2r: float | None
    cosine: float | None
    mean: float
    std: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ErrorSums:
    """The sums the metrics come from, added batch by batch (a layer's values for 1,000
    samples need not all be held at once)."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = self.m2 = 0.0  # of the error; m2: the sum of squared deviations
        self.err2 = self.abs_err = 0.0
        self.ref2 = self.got2 = self.dot = 0.0

    def add(self, ref: np.ndarray, got: np.ndarray) -> ErrorSums:
        r = np.asarray(ref, dtype=np.float64).ravel()
        q = np.asarray(got, dtype=np.float64).ravel()
        if r.shape != q.shape:
            raise ValueError(f"ErrorSums.add: shapes {np.shape(ref)} and {np.shape(got)}")
        e = q - r
        if not e.size:
            return self
        mean = float(e.mean())
        # Chan et al.'s merge: exact for batches, no cancellation in the variance
        total, delta = self.count + e.size, mean - self.mean
        self.m2 += float(np.sum((e - mean) ** 2)) + delta * delta * self.count * e.size / total
        self.mean += delta * e.size / total
        self.count = total
        self.err2 += float(np.dot(e, e))
        self.abs_err += float(np.abs(e).sum())
        self.ref2 += float(np.dot(r, r))
        self.got2 += float(np.dot(q, q))
        self.dot += float(np.dot(r, q))
        return self

    def result(self) -> ErrorMetrics:
        if not self.count:
            raise ValueError("ErrorSums.result: no values were added")
        n = self.count
        l2r = float(np.sqrt(self.err2 / self.ref2)) if self.ref2 > 0 else None
        cosine = None
        if self.ref2 > 0 and self.got2 > 0:
            norms = np.sqrt(self.ref2) * np.sqrt(self.got2)
            cosine = float(np.clip(self.dot / norms, -1.0, 1.0)) if norms > 0 else None
        return ErrorMetrics(
            rmse=float(np.sqrt(self.err2 / n)),
            mae=self.abs_err / n,
            l2r=l2r,
            cosine=cosine,
            mean=self.mean,
            std=float(np.sqrt(self.m2 / n)),
        )


def error_metrics(ref: np.ndarray, got: np.ndarray) -> ErrorMetrics:
    """The error of `got` against `ref` (same shape, at least one element)."""
    return ErrorSums().add(ref, got).result()


def top1(values: np.ndarray) -> np.ndarray:
    """The index of each sample's largest value (over the flattened sample), first on ties."""
    values = np.asarray(values)
    return values.reshape(len(values), -1).argmax(axis=1)


def agreement(a: np.ndarray, b: np.ndarray) -> float:
    """The share of samples whose classes agree (two 1-D class arrays, same length)."""
    return float(np.mean(np.asarray(a) == np.asarray(b))) if len(a) else 0.0


def confusion(truth: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """(classes, classes) counts: row = the true (or reference) class, column = predicted."""
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (np.asarray(truth, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return matrix


def format_confusion(matrix: np.ndarray) -> list[str]:
    """The matrix as text lines, classes numbered from 0; rows true, columns predicted."""
    width = max(3, len(str(int(matrix.max(initial=0))))) + 1
    head = " " * width + "".join(f"{c:>{width}}" for c in range(len(matrix)))
    rows = [
        f"{i:>{width}}" + "".join(f"{int(v):>{width}}" for v in row) for i, row in enumerate(matrix)
    ]
    return [head, *rows]


def first_jump(errors: list[float | None]) -> int | None:
    """The index of the first layer whose relative error jumps (see JUMP_FLOOR, JUMP_RATIO),
    or None. A layer whose error is undefined (None) neither jumps nor raises the bar."""
    worst = 0.0
    for i, e in enumerate(errors):
        if e is None:
            continue
        if e >= JUMP_FLOOR and e >= JUMP_RATIO * worst:
            return i
        worst = max(worst, e)
    return None
