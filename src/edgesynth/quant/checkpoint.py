"""Checkpoints in the vendor's layout: read them, load them into edgesynth.nn models, write them.

A checkpoint is a dict with `epoch`, `state_dict`, `arch`, `optimizer_state_dict`,
`optimizer_type`, `compression_sched` and `extras` (ai8x-training's layout, which the vendor's
synthesizer and edgesynth's read). Per layer the state dict holds `output_shift`,
`weight_bits`, `bias_bits`, `quantize_activation`, `adjust_output_shift`, `shift_quantile`,
`op.weight`, `op.bias` and `bn.*`, sometimes behind a `module.` prefix (DataParallel).
"""

from __future__ import annotations

import contextlib
import pickle
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn.layers import HardwareLayer

BUFFERS = (
    "output_shift",
    "weight_bits",
    "bias_bits",
    "quantize_activation",
    "adjust_output_shift",
    "shift_quantile",
)
# Newer ai8x-training buffers edgesynth reads past (activation thresholds are folded into the
# output shift by the vendor's quantizer, which is what a quantized checkpoint holds).
IGNORED_BUFFERS = ("activation_threshold", "final_scale", "clamp_activation")
_SAFE_MODULES = ("torch", "collections", "numpy", "builtins", "_codecs")


class _Stub:
    """Stands in for a class the checkpoint names but edgesynth does not need (Distiller...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] in _SAFE_MODULES:
            with contextlib.suppress(AttributeError, ImportError):
                return super().find_class(module, name)
        return type(name, (_Stub,), {"__module__": "edgesynth.stub." + module})


class _PickleModule:
    Unpickler = _Unpickler
    load = pickle.load
    __name__ = "edgesynth_pickle"


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint dict at `path` (a plain state dict is wrapped as `state_dict`)."""
    p = Path(path)
    if not p.is_file():
        raise EdgesynthError("checkpoint file not found.", file=str(path))
    try:
        data = torch.load(p, map_location="cpu", weights_only=False, pickle_module=_PickleModule)
    except Exception as exc:  # torch raises many types for a damaged file
        from edgesynth.frontends.torchfile import not_a_checkpoint_reason

        reason = not_a_checkpoint_reason(p)
        if reason.startswith("not a PyTorch checkpoint"):
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            reason = f"not a readable PyTorch checkpoint ({detail})"
        raise EdgesynthError(f"{reason}.", file=str(path)) from None
    if (
        isinstance(data, dict)
        and "state_dict" not in data
        and data
        and all(isinstance(v, torch.Tensor) for v in data.values())
    ):
        data = {"state_dict": data}
    if not isinstance(data, dict) or not isinstance(data.get("state_dict"), dict):
        raise EdgesynthError("the checkpoint has no `state_dict`.", file=str(path))
    return data


def _split_prefix(key: str) -> tuple[str, str]:
    return ("module.", key[len("module.") :]) if key.startswith("module.") else ("", key)


def layer_of(key: str) -> str:
    """The layer a state-dict key belongs to: `conv1` for `conv1.op.weight`/`conv1.weight_bits`."""
    head = key.rsplit(".", 1)[0] if "." in key else ""
    for part in (".op", ".bn"):
        if head.endswith(part):
            return head[: -len(part)]
    return head


def clean_state_dict(state: dict[str, Any]) -> OrderedDict[str, torch.Tensor]:
    """Tensors only, `module.` prefixes removed.

    Some vendor checkpoints hold a layer twice, with and without the prefix (and sometimes
    the bias only once). Like the vendor's synthesizer, a layer keeps the keys of the prefix
    its weights first appear under and drops the other copy.
    """
    tensors = [(k, v) for k, v in state.items() if isinstance(v, torch.Tensor)]
    chosen: dict[str, str] = {}
    for key, _ in tensors:
        prefix, bare = _split_prefix(key)
        if bare.endswith("weight") and ".bn." not in bare:
            chosen.setdefault(layer_of(bare), prefix)
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in tensors:
        prefix, bare = _split_prefix(key)
        if chosen.setdefault(layer_of(bare), prefix) == prefix:
            out[bare] = value
    return out


def hardware_layers(model: nn.Module) -> dict[str, HardwareLayer]:
    return {n: m for n, m in model.named_modules() if isinstance(m, HardwareLayer)}


def _legacy_param(state: dict[str, torch.Tensor], layer: str, param: str) -> str | None:
    """`<layer>.<anything>.weight` or `<layer>.weight` (pre-QAT test checkpoints)."""
    for key in state:
        if not key.startswith(layer + ".") or not key.endswith("." + param):
            continue
        middle = key[len(layer) + 1 : -len(param) - 1]
        if middle == "" or ("." not in middle and middle not in ("bn", "op")):
            return key
    if f"{layer}.{param}" in state:
        return f"{layer}.{param}"
    return None


def _is_integral(t: torch.Tensor) -> bool:
    return bool(torch.all(t == torch.round(t)).item())


def _set_bias(op: nn.Module, value: torch.Tensor | None) -> None:
    if value is None:
        op.register_parameter("bias", None)
    else:
        op.bias = nn.Parameter(value.detach().clone().float())


def load_state(model: nn.Module, state: dict[str, Any], *, source: str = "checkpoint") -> None:
    """Load a vendor or edgesynth state dict into `model` (edgesynth.nn layers).

    The model adapts where checkpoints legitimately differ from a fresh model: a layer's bias
    appears or disappears with the checkpoint's, and batchnorm is dropped when the checkpoint
    has it folded. Missing state buffers get the values the vendor's tools assume. Anything
    else that does not fit (another architecture) is one EdgesynthError naming what differs.
    """
    sd = clean_state_dict(state)
    used: set[str] = set()
    problems: list[str] = []
    for name, layer in hardware_layers(model).items():
        if layer.op is None:
            _load_buffers(layer, name, sd, used, quantized=False)
            continue
        wkey = (
            f"{name}.op.weight" if f"{name}.op.weight" in sd else _legacy_param(sd, name, "weight")
        )
        if wkey is None:
            problems.append(f"no weights for layer `{name}`")
            continue
        weight = sd[wkey]
        if tuple(weight.shape) != tuple(layer.op.weight.shape):
            problems.append(
                f"layer `{name}` weights are {tuple(weight.shape)} in the checkpoint, "
                f"{tuple(layer.op.weight.shape)} in the model"
            )
            continue
        bkey = f"{name}.op.bias" if f"{name}.op.bias" in sd else _legacy_param(sd, name, "bias")
        used.update(k for k in (wkey, bkey) if k)
        layer.op.weight.data.copy_(weight.float())
        _set_bias(layer.op, sd[bkey] if bkey else None)
        _load_bn(layer, name, sd, used, problems)
        legacy = f"{name}.weight_bits" not in sd and _is_integral(weight) and weight.abs().max() > 1
        _load_buffers(layer, name, sd, used, quantized=legacy)
    thresholds = [k for k in sd if k.endswith(IGNORED_BUFFERS[:2]) and bool(sd[k].any())]
    if thresholds:
        warnings.warn(
            f"{source}: activation thresholds / final scales of newer ai8x-training QAT are not "
            f"applied in float mode ({', '.join(thresholds[:3])}); quantize the checkpoint "
            "with the vendor's tools for 8-bit evaluation.",
            stacklevel=2,
        )
    unused = [k for k in sd if k not in used and not k.endswith(IGNORED_BUFFERS)]
    unused = [k for k in unused if not k.endswith("num_batches_tracked")]
    if unused:
        problems.append(
            "the model has no place for "
            + ", ".join(f"`{k}`" for k in unused[:6])
            + (" ..." if len(unused) > 6 else "")
        )
    if problems:
        shown = problems[:4] + ([f"{len(problems) - 4} more"] if len(problems) > 4 else [])
        raise EdgesynthError(f"{source} does not fit the model: " + "; ".join(shown) + ".")


def _load_bn(
    layer: HardwareLayer,
    name: str,
    sd: dict[str, torch.Tensor],
    used: set[str],
    problems: list[str],
) -> None:
    keys = [k for k in sd if k.startswith(f"{name}.bn.")]
    if layer.bn is None:
        if keys:
            problems.append(f"layer `{name}` has batchnorm in the checkpoint but not in the model")
        return
    if not keys:  # folded into the weights already
        layer.bn = None
        return
    bn_state = {k[len(f"{name}.bn.") :]: sd[k] for k in keys}
    try:
        layer.bn.load_state_dict(bn_state, strict=False)
    except RuntimeError as exc:
        problems.append(f"layer `{name}` batchnorm does not fit ({exc})")
    used.update(keys)


def _load_buffers(
    layer: HardwareLayer,
    name: str,
    sd: dict[str, torch.Tensor],
    used: set[str],
    *,
    quantized: bool,
) -> None:
    """Copy the state buffers; fill what older checkpoints omit."""
    found = {b: sd[f"{name}.{b}"] for b in BUFFERS if f"{name}.{b}" in sd}
    used.update(f"{name}.{b}" for b in found)
    for b, value in found.items():
        getattr(layer, b).copy_(value.reshape(-1)[:1].float())
    if quantized:  # weights only, already integers: 8-bit, shift 0 (pre-QAT test checkpoints)
        layer.weight_bits.fill_(8.0)
        layer.bias_bits.fill_(8.0)
        layer.quantize_activation.fill_(1.0)
        layer.adjust_output_shift.fill_(0.0)
        return
    bits = float(layer.weight_bits.item())
    if "bias_bits" not in found:
        layer.bias_bits.fill_(bits)
    if "quantize_activation" not in found:
        layer.quantize_activation.fill_(float(bits > 0))
    if "adjust_output_shift" not in found and layer.op is not None:
        # Quantized checkpoints hold integer weights; QAT ones hold floats.
        layer.adjust_output_shift.fill_(float(bits > 0 and not _is_integral(layer.op.weight)))


def model_state(model: nn.Module) -> OrderedDict[str, torch.Tensor]:
    """The state dict edgesynth writes: the vendor's keys, detached CPU tensors."""
    return OrderedDict((k, v.detach().cpu().clone()) for k, v in model.state_dict().items())


def _on_cpu(value: Any) -> Any:
    """`value` with every tensor in it moved to the CPU (a GPU run's checkpoint loads
    anywhere)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def write_checkpoint(
    path: str | Path,
    *,
    arch: str,
    state_dict: dict[str, torch.Tensor],
    epoch: int = 0,
    extras: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    inputs: Sequence[str | Path | None] = (),
    overwrite: bool = False,
) -> Path:
    """Write a checkpoint in the vendor's layout, atomically (staging file, then rename); an
    existing file is replaced only with `overwrite`."""
    from edgesynth.outputs import write_file_atomic

    p = Path(path)
    data = {
        "epoch": epoch,
        "state_dict": OrderedDict(state_dict),
        "arch": arch,
        "optimizer_state_dict": _on_cpu(optimizer.state_dict()) if optimizer is not None else {},
        "optimizer_type": type(optimizer) if optimizer is not None else None,
        "compression_sched": {},
        "extras": dict(extras or {}),
    }
    return write_file_atomic(
        p, writer=lambda handle: torch.save(data, handle), overwrite=overwrite, inputs=inputs
    )
