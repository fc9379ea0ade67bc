"""Quantized checkpoints: the weight-bearing layers, in the vendor synthesizer's terms.

How the vendor tool (ai8x-synthesis `izer/checkpoint.py`) reads a checkpoint - every rule here
is implemented below or left, explicitly, to the network builder:

* The file is a dict with `state_dict` (required), `arch` (only a warning when missing; when
  present it must equal the YAML `arch` case-insensitively, see `check_arch`), `epoch`,
  `extras`, and optimizer/compression-scheduler entries nobody uses.
* State-dict keys are walked in order. A key counts only when its last dotted part is `weight`
  and it has at least two parts: `<layer>.<op>.weight` (QAT checkpoints: `conv1.op.weight`;
  older tests: `conv1.conv2d.weight`, `fc.linear.weight`) or `<layer>.weight` (`fc.weight`).
  Anything else (`.output_shift`, `.weight_bits`, biases, `avgpool.*` with no weight) is only
  looked up from a weight key. A `module.` prefix (DataParallel) is part of the layer name for
  these look-ups; we strip it only from `CheckpointLayer.name`.
* Layer i of the list is matched to the i-th YAML layer that takes weights (not operator
  `none`, not `bypass`, no `weight_source`). Extra checkpoint layers beyond the YAML's are
  ignored, without an error; `--skip-checkpoint-layers N` drops the first N. The MAX78000
  `kws20_v3` demo checkpoint relies on this: its state dict holds every layer twice (first as
  `module.*` without biases, then again unprefixed with biases) and the vendor uses the first
  nine - so that network runs with no biases at all.
* Weights: the float tensor cast to int64 (truncation toward zero; quantized checkpoints hold
  integers). Linear (out, in), conv1d (out, in, k), conv2d (out, in/groups, kh, kw) and
  ConvTranspose2d as stored, (in, out/groups, kh, kw): the builder swaps the first two axes
  and flips the kernel in both spatial axes.
* `weight_bits`: `<layer>.weight_bits`, 8 when absent, and 0 also means 8. The vendor's
  weight width is the YAML `quantization` when given (the weights must then fit it); otherwise
  -1 (binary, +/-1) when the device supports binary weights and every weight is +/-1, 1 when
  all weights are zero, else `weight_bits`. See `resolve_quantization`.
* Bias: `<layer>.<op>.bias` (or `<layer>.bias`), unless the layer is listed in `--no-bias`.
  Hardware bias = floor(bias / 2**(weight_bits - 1)) with `weight_bits` from the checkpoint
  (default 8, never the YAML value); QAT checkpoints store the bias pre-multiplied, so the
  division is exact for them (e.g. MNIST's fc bias -4417 -> floor(-34.5) = -35). The result
  must fit 8 bits (`bias_bits` in the checkpoint is ignored; the YAML `bias_quantization` must
  be 8).
* `output_shift`: `<layer>.output_shift` (one value, truncated to int), used only when the
  YAML gives none for the layer; 0 when neither does. The builder then adds
  8 - |weight bits| (binary weights count as 1 bit).
* `quantize_activation`, `adjust_output_shift`, `shift_quantile` and `bias_bits` are training
  parameters: the synthesizer ignores them. We keep them in `CheckpointLayer.params`.
* A 1-dimensional weight is refused: for `<layer>.bn.weight` ("fold the BatchNorm layers";
  skipped instead with `ignore_bn`), and for anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.intrange import int_range
from edgesynth.lean_dataclass import dataclass

__all__ = [
    "Checkpoint",
    "CheckpointLayer",
    "check_arch",
    "check_weight_range",
    "guess_kind",
    "load_checkpoint",
    "resolve_quantization",
]

_TRAINING_PARAMS = (
    "weight_bits",
    "bias_bits",
    "output_shift",
    "quantize_activation",
    "adjust_output_shift",
    "shift_quantile",
)

_TRANSPOSE_HINTS = ("convtranspose", "conv_transpose", "transpose", "tconv", "deconv", "upconv")


@dataclass
class CheckpointLayer:
    """One weight-bearing layer, from a checkpoint or from synthetic weight files."""

    name: str  # layer prefix, `module.` stripped (e.g. `conv1`, `fire1.squeeze_layer`)
    weight: np.ndarray  # int64, as stored (see the module docstring for the axis order)
    bias: np.ndarray | None  # int64 per output channel, hardware bias units
    weight_bits: int  # checkpoint `weight_bits` (8 when absent or 0); synthetic: configured
    bias_bits: int = 8
    output_shift: int | None = None  # checkpoint `output_shift`; None when absent
    kind: str = "unknown"  # conv1d | conv2d | linear | convtranspose2d | unknown
    key: str = ""  # the state-dict key (or `file[index]`) the weights came from
    bias_key: str | None = None
    binary: bool = False  # synthetic weights configured as +/-1 (quantization -1)
    synthetic: bool = False  # from a weights .npy: ConvTranspose2d already swapped/flipped
    params: dict[str, float] = field(default_factory=dict)  # the layer's training parameters
    # Weights that are no hardware values (not integers, NaN), with `defer_float`: raised by
    # the caller only when a layer the run uses takes them (the weight then holds zeros).
    problem: EdgesynthError | None = None

    @property
    def weight_range(self) -> tuple[int, int]:
        return (int(self.weight.min()), int(self.weight.max())) if self.weight.size else (0, 0)


@dataclass
class Checkpoint:
    """A vendor checkpoint as read: architecture, epoch, state dict, weight-bearing layers."""

    path: Path
    arch: str | None
    epoch: int | None
    state_dict: dict[str, np.ndarray]  # raw, as stored (floats)
    layers: list[CheckpointLayer]  # weight-bearing layers in state-dict order
    extras: dict[str, Any] = field(default_factory=dict)  # the checkpoint's `extras` entry
    other: dict[str, Any] = field(default_factory=dict)  # every other top-level entry
    warnings: list[str] = field(default_factory=list)


def guess_kind(key: str, ndim: int) -> str:
    """The layer type suggested by the weight's key and dimensions (the YAML decides)."""
    if ndim == 2:
        return "linear"
    if ndim == 3:
        return "conv1d"
    if ndim == 4:
        lowered = key.lower()
        if any(hint in lowered for hint in _TRANSPOSE_HINTS):
            return "convtranspose2d"
        return "conv2d"
    return "unknown"


def _scalar(value: Any) -> float:
    arr = np.asarray(value)
    if arr.size != 1:
        raise ValueError(f"expected one value, found {arr.size}")
    value = float(arr.reshape(-1)[0])
    if not np.isfinite(value):
        raise ValueError(f"not a finite number ({value})")
    return value


def _where(name: str, layer: int | None) -> dict[str, Any]:
    """How an error names its layer: by YAML layer index when known, else by name or key."""
    return {"layer": layer, "layer_name": name} if layer is not None else {"key": name}


def check_weight_range(
    weight: np.ndarray,
    bits: int,
    *,
    name: str,
    file: str | None = None,
    layer: int | None = None,
    binary: bool = False,
) -> None:
    """Raise EdgesynthError unless every weight fits `bits` signed bits (or is +/-1)."""
    if weight.size == 0:
        return
    lo, hi = int(weight.min()), int(weight.max())
    if binary:
        if not np.all(np.abs(weight) == 1):
            raise EdgesynthError(
                f"binary weights must all be -1 or +1, found values from {lo} to {hi}",
                file=file,
                **_where(name, layer),
            )
        return
    low, high = int_range(bits, True)
    if lo < low or hi > high:
        raise EdgesynthError(
            f"weights range from {lo} to {hi}, which does not fit {bits}-bit weights "
            f"(allowed {low} to {high})",
            file=file,
            **_where(name, layer),
        )


def resolve_quantization(
    layer: CheckpointLayer,
    configured: int | None,
    *,
    binary_weights_supported: bool,
    file: str | None = None,
    index: int | None = None,
) -> tuple[int, bool]:
    """The vendor's weight width for a checkpoint layer: (bits, binary), range-checked.

    `configured` is the YAML `quantization` (None when absent; -1 or "binary" means +/-1).
    Binary weights are reported as (1, True): they count as 1 bit for the output shift.
    """
    w = layer.weight
    if configured is not None:
        if configured == -1:
            check_weight_range(w, 1, name=layer.name, file=file, layer=index, binary=True)
            return 1, True
        if configured not in (1, 2, 4, 8):
            raise EdgesynthError(
                f"weight quantization must be 1, 2, 4 or 8 bits (or binary), not {configured}",
                file=file,
                **_where(layer.name, index),
            )
        check_weight_range(w, configured, name=layer.name, file=file, layer=index)
        return configured, False
    absw = np.abs(w)
    if binary_weights_supported and w.size and absw.min() == absw.max() == 1:
        return 1, True
    bits = 1 if not np.any(w) else layer.weight_bits
    if bits not in (1, 2, 4, 8):
        raise EdgesynthError(
            f"checkpoint `weight_bits` is {bits}; it must be 1, 2, 4 or 8",
            file=file,
            **_where(layer.name, index),
        )
    check_weight_range(w, bits, name=layer.name, file=file, layer=index)
    return bits, False


def check_arch(checkpoint: Checkpoint, yaml_arch: str | None) -> None:
    """The vendor refuses a checkpoint whose `arch` differs from the YAML's (ignoring case)."""
    if not yaml_arch or checkpoint.arch is None:
        return
    if checkpoint.arch.lower() != yaml_arch.lower():
        raise EdgesynthError(
            f"network architecture of the configuration file ({yaml_arch}) does not match the "
            f"architecture in the checkpoint file ({checkpoint.arch})",
            file=str(checkpoint.path),
        )


def _strip_module(name: str) -> str:
    while name.startswith("module."):
        name = name[len("module.") :]
    return name


def _float_problem(key: str, tensor: np.ndarray, path: Path) -> EdgesynthError | None:
    """Why float weights are no hardware values (NaN, or not integers: an unquantized
    checkpoint), or None."""
    if tensor.dtype.kind != "f":
        return None
    if not np.all(np.isfinite(tensor)):
        return EdgesynthError(f"`{key}` holds NaN or infinite weights", file=str(path))
    values = np.trunc(tensor)
    if np.array_equal(values, tensor):
        return None
    example = float(tensor.reshape(-1)[np.argmax(values.reshape(-1) != tensor.reshape(-1))])
    return EdgesynthError(
        f"`{key}` holds weights that are not integers (e.g. {example:.6g}): this is an "
        "unquantized (float) checkpoint, and the chip takes integer weights. Quantize it "
        f"first: `edgesynth quantize {path.name} {path.name.removesuffix('.pth.tar')}-q.pth.tar`.",
        file=str(path),
    )


def load_checkpoint(
    path: str | PathLike[str],
    *,
    ignore_bn: bool = False,
    no_bias: Sequence[int] = (),
    defer_float: bool = False,
) -> Checkpoint:
    """Read a quantized checkpoint into its weight-bearing layers (see the module docstring).

    `no_bias` lists layer positions (in the returned list) whose bias the vendor's `--no-bias`
    drops. Raises EdgesynthError for unreadable files and for weights or biases that cannot be
    hardware values (more than 8 bits, 1-dimensional weights, not integers, NaN); with
    `defer_float` a layer whose weights are not integers or not finite is returned with its
    `problem` set instead (a network may leave that layer out of its run).
    """
    from edgesynth.frontends.torchfile import read_torch_file  # (zipfile) only with a file

    path = Path(path)
    data = read_torch_file(path)
    warnings: list[str] = []
    state = _state_dict(data, str(path))
    arch = data.get("arch")
    if arch is None:
        warnings.append("no `arch` in the checkpoint file")
    elif not isinstance(arch, str):
        arch = str(arch)
    epoch = data.get("epoch")
    if epoch is None:
        warnings.append("no `epoch` in the checkpoint file")
    extras = data.get("extras")
    other = {k: v for k, v in data.items() if k not in ("state_dict", "arch", "epoch", "extras")}
    reader = _LayerReader(path, state, ignore_bn, no_bias, defer_float, warnings)
    layers: list[CheckpointLayer] = []
    for key, tensor in state.items():
        layer = reader.layer(key, tensor, len(layers))
        if layer is not None:
            layers.append(layer)
    return Checkpoint(
        path=path,
        arch=arch,
        epoch=int(epoch) if isinstance(epoch, int | np.integer) else None,
        state_dict=dict(state),
        layers=layers,
        extras=dict(extras) if isinstance(extras, dict) else {},
        other=other,
        warnings=warnings,
    )


def _state_dict(data: dict[str, Any], file: str) -> dict[str, np.ndarray]:
    """The checkpoint's `state_dict`, every entry a named tensor."""
    state = data.get("state_dict")
    if not isinstance(state, dict):
        found = ", ".join(f"`{k}`" for k in list(data)[:8]) or "nothing"
        raise EdgesynthError(
            f"no `state_dict` in the checkpoint (top-level entries: {found})", file=file
        )
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, np.ndarray):
            raise EdgesynthError(
                f"state_dict entry {key!r} is not a tensor ({type(value).__name__})", file=file
            )
    return state


class _LayerReader:
    """Turns each `<prefix>[.<op>].weight` entry of a state_dict into a CheckpointLayer, with
    the training parameters and bias stored beside it."""

    def __init__(
        self,
        path: Path,
        state: dict[str, np.ndarray],
        ignore_bn: bool,
        no_bias: Sequence[int],
        defer_float: bool,
        warnings: list[str],
    ) -> None:
        self.path = path
        self.file = str(path)
        self.state = state
        self.ignore_bn = ignore_bn
        self.no_bias = no_bias
        self.defer_float = defer_float
        self.warnings = warnings

    def layer(self, key: str, tensor: np.ndarray, index: int) -> CheckpointLayer | None:
        """The layer of `key` at position `index`; None for an entry that is no layer's
        weights (or skipped BatchNorm weights)."""
        parts = key.rsplit(".", 2)
        if len(parts) < 2 or parts[-1] != "weight":
            return None
        prefix, op = (parts[0], parts[1]) if len(parts) == 3 else (parts[0], None)
        if tensor.ndim <= 1:
            if op == "bn" and self.ignore_bn:
                self.warnings.append(f"`{key}`: unfolded BatchNorm weights skipped")
                return None
            raise self._one_dimensional(key, tensor, op)
        if tensor.dtype.kind not in "fiub":
            raise EdgesynthError(f"`{key}` holds {tensor.dtype} weights", file=self.file)
        problem = _float_problem(key, tensor, self.path)
        if problem is not None and not self.defer_float:
            raise problem
        values = tensor if problem is None else np.zeros(tensor.shape, dtype=np.int64)
        check_weight_range(values, 8, name=key, file=self.file)  # before the cast to int64
        weight = values.astype(np.int64)
        if weight.size and not np.any(weight) and problem is None:
            self.warnings.append(f"all weights for `{key}` are zero")
        params = self._training_params(prefix)
        weight_bits = int(params.get("weight_bits", 8)) or 8
        if not 1 <= weight_bits <= 8:
            raise EdgesynthError(
                f"`{prefix}.weight_bits` is {weight_bits}; weights have 1 to 8 bits",
                file=self.file,
            )
        output_shift = int(params["output_shift"]) if "output_shift" in params else None
        bias_key: str | None = f"{prefix}.{op}.bias" if op is not None else f"{prefix}.bias"
        bias = None
        if bias_key in self.state and index not in self.no_bias:
            bias = self._bias(bias_key, weight_bits)
        else:
            bias_key = None
        return CheckpointLayer(
            name=_strip_module(prefix),
            weight=weight,
            bias=bias,
            weight_bits=weight_bits,
            bias_bits=8,
            output_shift=output_shift,
            kind=guess_kind(key, weight.ndim),
            key=key,
            bias_key=bias_key,
            params=params,
            problem=problem,
        )

    def _one_dimensional(self, key: str, tensor: np.ndarray, op: str | None) -> EdgesynthError:
        if op == "bn":
            return EdgesynthError(
                f"`{key}` holds 1-dimensional weights {list(tensor.shape)}: the BatchNorm "
                "layers have not been folded into the convolutions",
                file=self.file,
            )
        return EdgesynthError(
            f"`{key}` holds 1-dimensional weights {list(tensor.shape)}, not a "
            "convolution or linear layer",
            file=self.file,
        )

    def _training_params(self, prefix: str) -> dict[str, float]:
        """The scalars the training stored beside the weights (`_TRAINING_PARAMS`)."""
        params: dict[str, float] = {}
        for param in _TRAINING_PARAMS:
            value = self.state.get(f"{prefix}.{param}")
            if value is not None:
                try:
                    params[param] = _scalar(value)
                except ValueError as exc:
                    raise EdgesynthError(f"`{prefix}.{param}`: {exc}", file=self.file) from None
        return params

    def _bias(self, bias_key: str, weight_bits: int) -> np.ndarray:
        """The 8-bit bias: the stored value over 2**(weight_bits - 1), rounded down."""
        raw = np.asarray(self.state[bias_key], dtype=np.float64)
        if not np.all(np.isfinite(raw)):
            raise EdgesynthError(f"`{bias_key}` holds NaN or infinite values", file=self.file)
        scaled = np.floor(raw / float(2 ** (weight_bits - 1)))
        if scaled.size and (scaled.min() < -128 or scaled.max() > 127):
            raise EdgesynthError(
                f"bias `{bias_key}` ranges from {int(scaled.min())} to {int(scaled.max())} "
                f"after division by 2**{weight_bits - 1}, which does not fit 8 bits "
                "(allowed -128 to 127)",
                file=self.file,
            )
        bias = scaled.astype(np.int64)
        if bias.size and not np.any(bias):
            self.warnings.append(f"all bias values for `{bias_key}` are zero")
        return bias
