"""The user's own data (`--dataset-file FILE.py:FUNCTION`).

The function takes no argument, or one: the `--data` folder (None when not given). It returns
`(train, test)`, `(train, test, classes)`, `(train, test, classes, class_weights)`, or a dict
with the keys `train`, `test` and optionally `classes`, `class_weights`, `name`, `augment`.
`train` and `test` are map-style datasets (`len()` and `[i]` giving `(x, label)`, e.g. a
torch TensorDataset) or `(X, labels)` pairs of arrays/tensors. `x` is C x H x W (or C x L) in
the chip's input range [-1, 1): pixels p in [0, 1] as p - 0.5 times 2 (edgesynth rounds them
to the chip's 1/128 steps); labels are class numbers 0..N-1.

For regression (an embedding, any vector output), the targets are float vectors instead of
labels: `(X, Y)` with Y of shape N x D, or items `(x, vector)`; the model then has D outputs
(its `num_classes` is D) and trains with --loss mse (default), l1, smoothl1 or cosine.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edgesynth.errors import EdgesynthError
from edgesynth.train.datasets import Dataset, Split
from edgesynth.train.userfile import (
    UserRef,
    definition_line,
    describe_user_failure,
    lookup,
    parse_ref,
)

_KEYS = ("train", "test", "classes", "class_weights", "name", "augment")


def load_user_dataset(spec: str, data: Path | None) -> Dataset:
    ref = parse_ref(spec, "--dataset-file")
    fn = lookup(ref, "dataset function")
    where = {"file": str(ref.path), "line": definition_line(fn)}
    if not callable(fn):
        raise EdgesynthError(f"`{ref.name}` is a {type(fn).__name__}, not a function.", **where)
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(params) > 1:
        raise EdgesynthError(
            f"{ref.name}() takes {len(params)} arguments; edgesynth calls it with none, or "
            "with one (the --data folder).",
            **where,
        )
    try:
        result = fn(data) if params else fn()
    except EdgesynthError:
        raise
    except Exception as err:
        raise describe_user_failure(err, ref.path, f"{ref.name}()") from None
    return to_dataset(result, ref)


def to_dataset(result: Any, ref: UserRef) -> Dataset:
    parts = _parts(result, ref)
    classes = parts.get("classes")
    train = to_split(parts["train"], "train", ref)
    test = to_split(parts["test"], "test", ref)
    if train.x.shape[1:] != test.x.shape[1:]:
        raise _bad(f"train items are {_shape(train.x)}, test items {_shape(test.x)}.", ref)
    if train.y.is_floating_point() or test.y.is_floating_point():
        return _regression_dataset(parts, train, test, ref)
    labels = int(max(train.y.max(), test.y.max())) + 1 if len(train) and len(test) else 0
    n = len(classes) if classes is not None else labels
    for split, name in ((train, "train"), (test, "test")):
        if len(split) == 0:
            raise _bad(f"the {name} set is empty.", ref)
        low, high = int(split.y.min()), int(split.y.max())
        if low < 0 or high >= n:
            raise _bad(
                f"{name} labels span {low}..{high}; with {n} classes they must be 0..{n - 1}.",
                ref,
            )
    weights = _class_weights(parts.get("class_weights"), n, ref)
    return Dataset(
        str(parts.get("name") or ref.path.stem),
        train,
        test,
        n,
        [str(c) for c in classes] if classes is not None else [str(i) for i in range(n)],
        augment=bool(parts.get("augment", False)),
        kind="image" if train.x.dim() == 4 else "audio",
        class_weights=weights,
    )


def _regression_dataset(parts: dict[str, Any], train: Split, test: Split, ref: UserRef) -> Dataset:
    """Targets that are vectors: both splits alike, no classes or class weights."""
    if train.y.shape[1:] != test.y.shape[1:] or not test.y.is_floating_point():
        raise _bad(
            f"train targets are {_shape(train.y)}, test targets {_shape(test.y)}: both must be "
            "vectors of one length (regression) or both class numbers.",
            ref,
        )
    for key in ("classes", "class_weights"):
        if parts.get(key) is not None:
            raise _bad(f"`{key}` names classes; this dataset's targets are vectors.", ref)
    for split, name in ((train, "train"), (test, "test")):
        if len(split) == 0:
            raise _bad(f"the {name} set is empty.", ref)
        if not torch.isfinite(split.y).all():
            raise _bad(f"{name} targets hold NaN or infinite values.", ref)
    return Dataset(
        str(parts.get("name") or ref.path.stem),
        train,
        test,
        int(train.y.shape[1]),
        [],
        augment=bool(parts.get("augment", False)),
        kind="image" if train.x.dim() == 4 else "audio",
    )


def _parts(result: Any, ref: UserRef) -> dict[str, Any]:
    if isinstance(result, dict):
        unknown = [k for k in result if k not in _KEYS]
        if unknown or "train" not in result or "test" not in result:
            raise _bad(
                f"the returned dict has keys {sorted(map(str, result))}; it needs `train` and "
                f"`test`, and may have {', '.join(_KEYS[2:])}.",
                ref,
            )
        return dict(result)
    if isinstance(result, tuple) and 2 <= len(result) <= 4:
        return dict(zip(_KEYS, result, strict=False))
    raise _bad(
        f"returned {type(result).__name__}; return (train, test[, classes[, class_weights]]) "
        "or a dict with `train` and `test`.",
        ref,
    )


def to_split(data: Any, name: str, ref: UserRef) -> Split:
    """A dataset or an (X, labels) pair -> a Split on the chip's 1/128 grid."""
    tensors = getattr(data, "tensors", None)  # torch TensorDataset: no per-item loop
    if isinstance(data, tuple) and len(data) == 2:
        tensors = data
    if tensors is not None and len(tensors) == 2:
        x, y = (torch.as_tensor(np.asarray(t)) for t in tensors)
        if x.dim() not in (3, 4):
            raise _bad(f"{name} items are {_shape(x)}; they must be C x H x W or C x L.", ref)
    else:
        x, y = _stack_items(data, name, ref)
    if y.is_floating_point() and y.dim() == 2 and y.shape[0] == x.shape[0]:
        return Split(_on_grid(x, name, ref), y.float())  # regression: a vector per item
    if y.dim() != 1 or y.shape[0] != x.shape[0] or y.is_floating_point():
        raise _bad(
            f"{name} labels must be one class number per item (or, for regression, one "
            "float vector per item: N x D).",
            ref,
        )
    return Split(_on_grid(x, name, ref), y.long())


def _stack_items(data: Any, name: str, ref: UserRef) -> tuple[torch.Tensor, torch.Tensor]:
    if not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
        raise _bad(f"{name} is a {type(data).__name__}; it needs len() and [i].", ref)
    xs: list[torch.Tensor] = []
    ys: list[Any] = []
    for i in range(len(data)):
        try:
            item = data[i]
        except Exception as err:
            raise describe_user_failure(err, ref.path, f"{name}[{i}]") from None
        if not (isinstance(item, Sequence) and len(item) == 2):
            raise _bad(f"{name}[{i}] is not an (x, label) pair.", ref)
        x = torch.as_tensor(np.asarray(item[0]))
        if x.dim() not in (2, 3) or (xs and x.shape != xs[0].shape):
            first = f"; item 0 is {_dims(xs[0])}" if xs else ""
            raise _bad(
                f"{name}[{i}] is {_dims(x)}{first}: items must be C x H x W or C x L, all alike.",
                ref,
            )
        xs.append(x)
        ys.append(_target(item[1], f"{name}[{i}]", ref))
    if not xs:
        raise _bad(f"the {name} set is empty.", ref)
    if isinstance(ys[0], torch.Tensor):
        if any(not isinstance(v, torch.Tensor) or v.shape != ys[0].shape for v in ys):
            raise _bad(f"{name} targets differ in kind or length: give all vectors alike.", ref)
        return torch.stack(xs), torch.stack(ys)
    if any(isinstance(v, torch.Tensor) for v in ys):
        raise _bad(f"{name} mixes class numbers and vectors as targets.", ref)
    return torch.stack(xs), torch.tensor(ys)


def _target(value: Any, where: str, ref: UserRef) -> int | torch.Tensor:
    """A class number, or (regression) a float vector."""
    arr = np.asarray(value)
    if arr.ndim == 1 and arr.dtype.kind == "f":
        return torch.from_numpy(arr.astype(np.float32))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(
            f"{where}'s target is {arr.dtype} {tuple(arr.shape)}: give a class number or a "
            "float vector.",
            ref,
        ) from None


def _on_grid(x: torch.Tensor, name: str, ref: UserRef) -> torch.Tensor:
    if not x.is_floating_point():
        raise _bad(
            f"{name} items are {x.dtype}; give floats in [-1, 1) (pixels p in [0, 1] as "
            "(p - 0.5) * 2).",
            ref,
        )
    low, high = float(x.min()), float(x.max())
    if low < -1.0 - 1e-6 or high > 1.0 + 1e-6:
        raise _bad(
            f"{name} values span [{low:.3g}, {high:.3g}]; the chip's inputs lie in [-1, 1) "
            "(pixels p in [0, 1] as (p - 0.5) * 2).",
            ref,
        )
    return (torch.clamp(torch.floor(x.double() * 128 + 0.5), -128, 127) / 128).float()


def _class_weights(weights: Any, n: int, ref: UserRef) -> list[float] | None:
    if weights is None:
        return None
    values = [float(w) for w in np.asarray(weights, dtype=np.float64).reshape(-1)]
    if len(values) != n or any(w < 0 for w in values):
        raise _bad(f"class_weights must be {n} numbers of 0 or more, got {len(values)}.", ref)
    return values


def _shape(batch: torch.Tensor) -> str:
    """The item shape of a batch."""
    return _dims(batch[0]) if batch.dim() > 0 and len(batch) else "empty"


def _dims(x: torch.Tensor) -> str:
    return "x".join(map(str, x.shape)) or "a scalar"


def _bad(message: str, ref: UserRef) -> EdgesynthError:
    return EdgesynthError(message, file=str(ref.path))
