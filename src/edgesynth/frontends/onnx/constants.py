"""Host-side evaluation of the constant and shape arithmetic exporters write.

`x.view(x.size(0), -1)` exports as Shape -> Gather -> Unsqueeze -> Concat -> Reshape: every
value in that chain is known once the activation shapes are, except the batch size, which stays
symbolic (`BATCH`). `fold` evaluates such a node when all its inputs are known and returns the
value; the converter then treats the output as an initializer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

BATCH = -(1 << 40)  # the symbolic batch dimension inside host-evaluated shape tensors

SHAPE_OPS = ("Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice")
ARITHMETIC_OPS = ("Identity", "Reshape", "Mul", "Div", "Sub", "Add")

# ONNX TensorProto element types NumPy casts to (Cast `to`)
_CAST = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64}


class FoldError(Exception):
    """A constant node the folder cannot evaluate; the message says why."""


def constant_value(attrs: dict[str, Any]) -> np.ndarray:
    """The value of a Constant node (any of its attribute forms)."""
    from edgesynth.frontends.onnxproto import to_array

    if "value" in attrs:
        return to_array(attrs["value"])
    for key, dtype in (
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if key in attrs:
            return np.array(attrs[key], dtype=dtype)
    raise FoldError(f"Constant with attributes {sorted(attrs)} is not supported")


def _slice(v: list[np.ndarray], a: dict[str, Any]) -> np.ndarray:
    if len(v) > 1:
        starts, ends = v[1].tolist(), v[2].tolist()
        axes = v[3].tolist() if len(v) > 3 else list(range(len(starts)))
        steps = v[4].tolist() if len(v) > 4 else [1] * len(starts)
    else:
        starts, ends = a["starts"], a["ends"]
        axes = a.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    index = [slice(None)] * v[0].ndim
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        index[ax] = slice(s, e, st)
    return v[0][tuple(index)]


def _unsqueeze(v: list[np.ndarray], a: dict[str, Any]) -> np.ndarray:
    axes = a["axes"] if "axes" in a else v[1].tolist()
    out = v[0]
    for ax in sorted(int(x) % (out.ndim + len(axes)) for x in axes):
        out = np.expand_dims(out, ax)
    return out


def _squeeze(v: list[np.ndarray], a: dict[str, Any]) -> np.ndarray:
    axes = a.get("axes", v[1].tolist() if len(v) > 1 else None)
    return np.squeeze(v[0], axis=tuple(axes) if axes is not None else None)


def _cast(v: list[np.ndarray], a: dict[str, Any]) -> np.ndarray:
    to = a.get("to")
    if to not in _CAST:
        raise FoldError(f"Cast to ONNX type {to} is not supported")
    return v[0].astype(_CAST[to])


def _arithmetic(op: str) -> Callable[[list[np.ndarray], dict[str, Any]], np.ndarray]:
    fn = {"Mul": np.multiply, "Div": np.divide, "Sub": np.subtract, "Add": np.add}[op]

    def apply(v: list[np.ndarray], a: dict[str, Any]) -> np.ndarray:
        if (v[0] == BATCH).any() or (v[1] == BATCH).any():
            raise FoldError("arithmetic on the batch dimension is not supported")
        if op == "Div" and np.issubdtype(v[0].dtype, np.integer):
            return np.asarray(np.trunc(v[0] / v[1])).astype(v[0].dtype)  # ONNX: integer Div
        return fn(v[0], v[1])

    return apply


_FOLD: dict[str, Callable[[list[np.ndarray], dict[str, Any]], np.ndarray]] = {
    "Gather": lambda v, a: np.take(v[0], v[1], axis=a.get("axis", 0)),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda v, a: np.concatenate([np.atleast_1d(x) for x in v], axis=a.get("axis", 0)),
    "Cast": _cast,
    "Slice": _slice,
    "Identity": lambda v, a: v[0],
    "Reshape": lambda v, a: v[0].reshape(v[1].tolist()),
    **{op: _arithmetic(op) for op in ("Mul", "Div", "Sub", "Add")},
}


def fold(op: str, values: list[np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """Evaluate `op` on constant inputs (raises FoldError)."""
    try:
        return np.asarray(_FOLD[op](values, attrs))
    except (IndexError, ValueError, KeyError, TypeError) as err:
        raise FoldError(f"cannot evaluate {op} on constants: {err}") from None
