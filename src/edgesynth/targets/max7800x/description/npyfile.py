"""The vendor's synthetic weights and biases and where its sample inputs live.

Synthetic weights (YAML `arch: test`, no checkpoint), as the vendor's `izer/sampleweight.py`
reads them:

* Weights come from `tests/<weights>.npy` when the YAML has a `weights:` key, else from
  `tests/weights_<dataset>.npy` (dataset lowercased). The file holds one or several
  consecutive `np.save` arrays, read until the end of the file (an empty file holds none:
  the MAX78002 all-`bypass` tests ship 0-byte weight files).
* Several arrays: one array per weight-bearing layer, in order. Exactly one array: it is a
  stack, and layer i takes `array[i]` (e.g. shape (1, 33, 2, 1) is one conv1d layer with
  weights (33, 2, 1); (1, 100, 768, 1, 1) one 1x1 layer). Each layer's array is laid out
  like a checkpoint's: conv2d (out, in/groups, kh, kw) - linear layers too, as 1x1 kernels -
  and conv1d (out, in, k).
* ConvTranspose2d: unlike a checkpoint's, a synthetic array is already in the hardware's
  orientation, (out/groups, in, kh, kw), and is used as is - no axis swap, no kernel flip
  (MAX78000 `test-upscale`: arrays (64, 3, 3, 3), (4, 64, 3, 3), (3, 4, 3, 3) for layers
  3 -> 64 -> 4 -> 3 channels; MAX78002 `test-depthwiset2d`: (1, 2, 3, 3) with groups 2).
* Weight-bearing layers are the YAML layers whose operator is not `none` and that are not
  `bypass`; the i-th of them takes array i. Arrays beyond the last such layer are ignored;
  too few arrays is an error.
* Quantization: the YAML `quantization` of the layer (default 8) is applied to the integers
  in the file. The file's values may need at most 8 signed bits (else an error). When they
  need more bits than the layer's quantization, they are shifted right arithmetically by the
  difference (floor division by a power of two: these are random numbers, no rounding); a
  quantization of -1 (binary) maps w >= 0 to +1 and w < 0 to -1. The output shift is the
  YAML `output_shift` (default 0) plus 8 - |quantization| (binary counts as 1 bit), exactly
  as for checkpoints; the file carries no shift, so `output_shift` is None here.
* Biases come from `tests/bias_<bias>.npy` only when the YAML has a `bias:` key: one array
  per weight-bearing layer, read in the same order; a layer listed in `--no-bias` still
  consumes its array but gets no bias; when the file runs out the remaining layers get
  none. Bias values are used as stored: they already are hardware (8-bit) bias units - no
  division, unlike checkpoint biases.
* Sample inputs: `tests/sample_<dataset>.npy` (dataset lowercased) unless `--sample-input`
  names another file; one int64 array, C x H x W or C x L, every value within -128..127.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.npy import integer_array, load_npy_arrays
from edgesynth.targets.max7800x.description.checkpoint import CheckpointLayer

__all__ = [
    "load_synthetic_bias",
    "load_synthetic_layers",
    "requantize_synthetic",
    "sample_path",
    "synthetic_bias_path",
    "synthetic_weights_path",
]


def sample_path(base: str | PathLike[str], dataset: str) -> Path:
    """Where the vendor looks for the sample input by default: tests/sample_<dataset>.npy."""
    return Path(base) / "tests" / f"sample_{dataset.lower()}.npy"


def synthetic_weights_path(
    base: str | PathLike[str], dataset: str, weights: str | None = None
) -> Path:
    """tests/<weights>.npy when the YAML names `weights:`, else tests/weights_<dataset>.npy."""
    name = f"{weights}.npy" if weights is not None else f"weights_{dataset.lower()}.npy"
    return Path(base) / "tests" / name


def synthetic_bias_path(base: str | PathLike[str], bias: str) -> Path:
    """tests/bias_<bias>.npy, for the YAML's `bias:` key."""
    return Path(base) / "tests" / f"bias_{bias}.npy"


def _bits_needed(weight: np.ndarray) -> int:
    """Signed bits the values need, computed the vendor's way (all zeros: 1 bit)."""
    if weight.size == 0:
        return 1
    hi, lo = int(weight.max()), int(weight.min())
    hi = hi + 1 if hi < 0 else hi
    lo = lo + 1 if lo < 0 else lo
    return max(abs(lo).bit_length(), abs(hi).bit_length()) + 1


def requantize_synthetic(
    weight: np.ndarray, quantization: int | None, *, name: str, file: str | None = None
) -> tuple[np.ndarray, int, bool]:
    """Fit synthetic weights to a layer's quantization: (weights, bits, binary).

    `quantization` is the YAML value (None -> 8; -1 -> binary, reported as 1 bit).
    """
    bits = 8 if quantization is None else quantization
    if bits not in (-1, 1, 2, 4, 8):
        raise EdgesynthError(
            f"weight quantization must be 1, 2, 4 or 8 bits (or binary), not {bits}",
            file=file,
            key=name,
        )
    w = np.array(weight, dtype=np.int64, copy=True)
    needed = _bits_needed(w)
    if needed > 8:
        raise EdgesynthError(
            f"weights range from {int(w.min())} to {int(w.max())}: more than 8 bits "
            "(allowed -128 to 127)",
            file=file,
            key=name,
        )
    if bits == -1:
        return np.where(w >= 0, 1, -1).astype(np.int64), 1, True
    if needed > bits:
        w >>= needed - bits
    return w, bits, False


def load_synthetic_bias(
    path: str | PathLike[str], count: int, *, no_bias: Sequence[int] = ()
) -> list[np.ndarray | None]:
    """The per-layer biases of a bias file, for `count` weight-bearing layers.

    Layer i takes array i; layers in `no_bias` (weight-layer positions) consume their array
    but get None; layers past the end of the file get None.
    """
    path = Path(path)
    arrays = load_npy_arrays(path, what="bias")
    out: list[np.ndarray | None] = []
    for i in range(count):
        if i >= len(arrays) or i in no_bias:
            out.append(None)
            continue
        bias = integer_array(arrays[i], what=f"bias array {i}", file=str(path)).reshape(-1)
        if bias.size and (bias.min() < -128 or bias.max() > 127):
            raise EdgesynthError(
                f"bias array {i} ranges from {int(bias.min())} to {int(bias.max())}, which "
                "does not fit 8 bits (allowed -128 to 127)",
                file=str(path),
            )
        out.append(bias)
    return out


_KINDS = {2: "linear", 3: "conv1d", 4: "conv2d"}  # by dimensions only (the YAML decides)


def load_synthetic_layers(
    weights_path: str | PathLike[str],
    bias_path: str | PathLike[str] | None = None,
    *,
    quantization: Sequence[int | None] | None = None,
    no_bias: Sequence[int] = (),
) -> list[CheckpointLayer]:
    """Synthetic weights (and biases) as per-layer `CheckpointLayer`s, like a checkpoint's.

    `quantization` holds the YAML `quantization` of each weight-bearing layer in order (None
    entries mean the default 8); its length is the number of layers built, and the file must
    hold that many. Without it, one layer per array is built at the default 8 bits.
    `no_bias` lists weight-layer positions whose bias is dropped (`--no-bias`).
    """
    weights_path = Path(weights_path)
    file = str(weights_path)
    arrays = load_npy_arrays(weights_path, what="weights")
    if len(arrays) == 1 and arrays[0].ndim < 3:
        raise EdgesynthError(
            "a single weights array must stack the layers' weights along its first axis; "
            f"found shape {list(arrays[0].shape)}",
            file=file,
        )
    per_layer: list[np.ndarray] = list(arrays[0]) if len(arrays) == 1 else arrays
    count = len(per_layer) if quantization is None else len(quantization)
    if count > len(per_layer):
        raise EdgesynthError(
            f"the configuration has {count} layers with weights, but the weights file holds "
            f"{len(per_layer)}" + (" (one stacked array)" if len(arrays) == 1 else " arrays"),
            file=file,
        )
    biases = (
        load_synthetic_bias(bias_path, count, no_bias=no_bias)
        if bias_path is not None
        else [None] * count
    )
    stem = weights_path.stem
    layers: list[CheckpointLayer] = []
    for i in range(count):
        name = f"{stem}[{i}]"
        raw = integer_array(np.asarray(per_layer[i]), what=f"weights array {i}", file=file)
        bits_cfg = None if quantization is None else quantization[i]
        weight, bits, binary = requantize_synthetic(raw, bits_cfg, name=name, file=file)
        layers.append(
            CheckpointLayer(
                name=name,
                weight=weight,
                bias=biases[i],
                weight_bits=bits,
                bias_bits=8,
                output_shift=None,
                kind=_KINDS.get(weight.ndim, "unknown"),
                key=name,
                bias_key=None if biases[i] is None or bias_path is None else f"{bias_path}[{i}]",
                binary=binary,
                synthetic=True,
            )
        )
    return layers
