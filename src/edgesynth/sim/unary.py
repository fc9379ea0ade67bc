"""The float definitions of the element-wise activations a float graph may hold (ONNX's
definitions), one place for the graph simulator and the tables that stand in for them."""

from __future__ import annotations

import numpy as np

UNARY = ("sigmoid", "tanh", "hardsigmoid", "hardswish", "swish", "mish", "softplus")
BOUNDED = ("sigmoid", "tanh", "hardsigmoid")  # results within [-1, 1]
HARDSWISH = (1.0 / 6, 0.5)  # the hardsigmoid (alpha, beta) in hardswish


def hardsigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(alpha * x + beta, 0.0, 1.0)


def unary(kind: str, x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    """`kind` of `UNARY` on float `x` (`alpha`, `beta`: hardsigmoid's)."""
    if kind == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if kind == "tanh":
        return np.tanh(x)
    if kind == "hardsigmoid":
        return hardsigmoid(x, alpha, beta)
    if kind == "hardswish":
        return x * hardsigmoid(x, *HARDSWISH)
    if kind == "swish":
        return x * (1.0 / (1.0 + np.exp(-x)))
    if kind == "softplus":
        return np.logaddexp(0.0, x)
    if kind == "mish":
        return x * np.tanh(np.logaddexp(0.0, x))
    raise ValueError(f"no element-wise function {kind!r}")
