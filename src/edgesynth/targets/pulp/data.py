"""Reading inputs and writing results in the corpus's layout.

Inputs (`--input DATA.npz` or `.npy`): per graph input, an array that is either
- flattened in H, W, C order for one sample (the corpus's `input`), or
- (C, H, W) for one sample, or (N, C, H, W) for a batch (Deeploy's `inputs.npz`);
keys are the graph's input names, `input`, or `input_0`, `input_1`, ... A network with one input
reads every `input_<k>` as sample k (the corpus's multi-sample cases); one with several inputs
reads `input_<k>` as its k-th input.

Results (`--output OUT.npz`): `out_layerK` (one sample) or `out_<i>_layerK` (sample i), each
layer's output flattened in H, W, C order (or C, H, W with `layout="chw"`); `run` adds
`checksum_layerK` / `checksum_<i>_layerK` (the sum of the output's bytes as stored), `simulate`
adds every tensor of the graph as `tensor.<name>` with shape (N, C, H, W).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.pulp.packing import to_hwc

LAYOUTS = ("hwc", "chw")
_SAMPLE = re.compile(r"^input_(\d+)$")


def _read(path: Path) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.is_file():
        raise EdgesynthError("no such file", file=str(path), key="--input")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise EdgesynthError(f"not a NumPy .npy/.npz file ({err})", file=str(path)) from None
    if isinstance(loaded, np.ndarray):
        return {"input": loaded}
    with loaded:
        return {k: loaded[k] for k in loaded.files}


def _as_batch(a: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    size = int(np.prod(shape))
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.array_equal(a, np.round(a)):
            a = a.astype(np.int64)
        else:
            raise EdgesynthError(f"{where}: expected integers, got {a.dtype} values")
    if a.ndim == 1 and a.size == size:  # one sample, flattened H, W, C
        if len(shape) == 3:
            c, h, w = shape
            return a.reshape(h, w, c).transpose(2, 0, 1)[None].astype(np.int64)
        if len(shape) == 2:
            c, length = shape
            return a.reshape(length, c).transpose(1, 0)[None].astype(np.int64)
        return a.reshape(1, *shape).astype(np.int64)
    if tuple(a.shape) == tuple(shape):
        return a[None].astype(np.int64)
    if a.ndim == len(shape) + 1 and tuple(a.shape[1:]) == tuple(shape):
        return a.astype(np.int64)
    if a.ndim >= 2 and int(np.prod(a.shape[1:])) == size and a.shape[0] >= 1:
        return a.reshape(a.shape[0], *shape).astype(np.int64)
    raise EdgesynthError(
        f"{where}: shape {a.shape} is none of: {size} values (one sample, H, W, C order), "
        f"{tuple(shape)} (C, H, W), (N, {', '.join(map(str, shape))})"
    )


def load_inputs(path: Path, names: list[str], shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """One (N, *shape) int64 batch per graph input."""
    arrays = _read(path)
    where = str(path)
    if len(names) == 1:
        if names[0] in arrays:
            return [_as_batch(arrays[names[0]], shapes[0], f"{where}: {names[0]}")]
        samples = sorted(
            ((int(m.group(1)), k) for k in arrays if (m := _SAMPLE.match(k))), key=lambda t: t[0]
        )
        if samples:
            parts = [_as_batch(arrays[k], shapes[0], f"{where}: {k}") for _, k in samples]
            return [np.concatenate(parts)]
        if "input" in arrays:
            return [_as_batch(arrays["input"], shapes[0], f"{where}: input")]
        if len(arrays) == 1:
            ((key, value),) = arrays.items()
            return [_as_batch(value, shapes[0], f"{where}: {key}")]
    out = []
    for k, (name, shape) in enumerate(zip(names, shapes, strict=True)):
        key = name if name in arrays else f"input_{k}"
        if key not in arrays:
            raise EdgesynthError(
                f"no array for input `{name}`; name it `{name}` or `input_{k}` "
                f"(the file has {', '.join(sorted(arrays)) or 'nothing'})",
                file=where,
            )
        out.append(_as_batch(arrays[key], shape, f"{where}: {key}"))
    if len({b.shape[0] for b in out}) != 1:
        raise EdgesynthError("the inputs hold different numbers of samples", file=where)
    return out


def layer_key(layer: int, sample: int, samples: int, prefix: str = "out") -> str:
    return f"{prefix}_layer{layer}" if samples == 1 else f"{prefix}_{sample}_layer{layer}"


def flatten(x: np.ndarray, layout: str) -> np.ndarray:
    return to_hwc(x) if layout == "hwc" else x.reshape(-1)


def save_npz(
    path: Path,
    arrays: dict[str, np.ndarray],
    *,
    overwrite: bool = False,
    inputs: tuple[Path, ...] = (),
) -> Path:
    """Write `arrays` in .npz format to exactly `path` through the project's atomic file rule:
    complete or not at all, never over an existing file without `overwrite`, one of the run's
    `inputs` or a folder."""
    from edgesynth.outputs import write_file_atomic

    return write_file_atomic(
        path,
        writer=lambda handle: np.savez(handle, **arrays),
        overwrite=overwrite,
        inputs=inputs,
        option="--output",
    )
