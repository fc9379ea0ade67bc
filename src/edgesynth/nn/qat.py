"""Quantization-aware training: the policy file and switching a model over.

The policy file is the vendor's `qat_policy.yaml`:

    start_epoch: 10          # epoch at which QAT starts (batchnorm is folded then)
    weight_bits: 8           # 1, 2, 4 or 8 (MAX78002: or binary, +/-1) for every layer...
    shift_quantile: 0.995    # optional: quantile of |params| the output shift covers (1.0)
    overrides:               # optional: per layer (module name) settings
      conv1: {weight_bits: 8}
      fc: {weight_bits: 4, shift_quantile: 1.0}

`outlier_removal_z_score` (newer vendor policies) is accepted and has no effect. Any other key
is an error, naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from torch import nn

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.nn import device as device_setting
from edgesynth.nn.bnfold import fuse_bn_layers
from edgesynth.nn.functional import BINARY
from edgesynth.nn.layers import HardwareLayer

TOP_KEYS = ("start_epoch", "weight_bits", "shift_quantile", "overrides", "outlier_removal_z_score")
OVERRIDE_KEYS = ("weight_bits", "shift_quantile")
ALL_WEIGHT_BITS = (1, 2, 4, 8)  # either device; binary needs the MAX78002


@dataclass(frozen=True)
class LayerOverride:
    weight_bits: int | None = None
    shift_quantile: float | None = None


@dataclass(frozen=True)
class QatPolicy:
    start_epoch: int
    weight_bits: int = 8
    shift_quantile: float = 1.0
    overrides: dict[str, LayerOverride] = field(default_factory=dict)

    def for_layer(self, name: str) -> tuple[int, float]:
        o = self.overrides.get(name, LayerOverride())
        bits = o.weight_bits if o.weight_bits is not None else self.weight_bits
        quantile = o.shift_quantile if o.shift_quantile is not None else self.shift_quantile
        return bits, quantile

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "start_epoch": self.start_epoch,
            "weight_bits": _bits_name(self.weight_bits),
            "shift_quantile": self.shift_quantile,
        }
        if self.overrides:
            d["overrides"] = {
                k: {
                    f: _bits_name(v) if f == "weight_bits" else v
                    for f, v in vars(o).items()
                    if v is not None
                }
                for k, o in self.overrides.items()
            }
        return d


def _bits_name(bits: int) -> int | str:
    """How a policy file spells weight bits (binary as `binary`)."""
    return "binary" if bits == BINARY else bits


def _fail(message: str, source: str, line: int | None = None, key: str | None = None) -> None:
    raise EdgesynthError(message, file=source, line=line, key=key)


def _check_keys(
    node: yaml.MappingNode, allowed: tuple[str, ...], source: str, where: str
) -> dict[str, int]:
    """Key -> line of a YAML mapping; unknown keys are an error."""
    lines: dict[str, int] = {}
    for key_node, _ in node.value:
        key = str(key_node.value)
        if key not in allowed:
            _fail(
                f"unknown key `{key}` in {where}; allowed: {', '.join(allowed)}."
                + did_you_mean(key, allowed),
                source,
                key_node.start_mark.line + 1,
            )
        lines[key] = key_node.start_mark.line + 1
    return lines


def _bits(value: Any, source: str, line: int | None, key: str) -> int:
    """Weight bits of a policy entry; `binary` (+/-1 weights, MAX78002 only: see
    `check_policy_fits`) is -1."""
    allowed: tuple[int | str, ...] = (*ALL_WEIGHT_BITS, "binary")
    if isinstance(value, str) and value.lower() == "binary":
        return BINARY
    if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
        _fail(f"must be one of {', '.join(map(str, allowed))}, got {value!r}.", source, line, key)
    return int(value)


def _quantile(value: Any, source: str, line: int | None, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        _fail(f"must be a number in (0, 1], got {value!r}.", source, line, key)
    return float(value)


def load_policy(path: str | Path) -> QatPolicy | None:
    """The policy in `path`; None for the vendor's `None` (QAT disabled)."""
    if str(path).lower() == "none":
        return None
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise EdgesynthError(f"cannot read the QAT policy: {err.strerror}.", file=source) from None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise EdgesynthError(f"not valid YAML: {err}", file=source, line=line) from None
    if not isinstance(node, yaml.MappingNode):
        raise EdgesynthError("a QAT policy must be a mapping of keys.", file=source)
    lines = _check_keys(node, TOP_KEYS, source, "the QAT policy")
    data = yaml.safe_load(text)
    return policy_from_dict(data, source, lines, node)


def policy_from_dict(
    data: dict[str, Any],
    source: str = "QAT policy",
    lines: dict[str, int] | None = None,
    node: yaml.MappingNode | None = None,
) -> QatPolicy:
    lines = lines or {}
    for key in data:
        if key not in TOP_KEYS:
            _fail(f"unknown key `{key}` in the QAT policy.", source)
    for required in ("start_epoch", "weight_bits"):
        if required not in data:
            _fail(f"the QAT policy needs `{required}`.", source)
    start = data["start_epoch"]
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        _fail(
            f"must be a whole number >= 0, got {start!r}.",
            source,
            lines.get("start_epoch"),
            "start_epoch",
        )
    bits = _bits(data["weight_bits"], source, lines.get("weight_bits"), "weight_bits")
    quantile = 1.0
    if data.get("shift_quantile") is not None:
        quantile = _quantile(
            data["shift_quantile"], source, lines.get("shift_quantile"), "shift_quantile"
        )
    overrides: dict[str, LayerOverride] = {}
    raw = data.get("overrides") or {}
    if not isinstance(raw, dict):
        _fail("must map layer names to settings.", source, lines.get("overrides"), "overrides")
    sub_nodes = _override_nodes(node)
    for name, settings in raw.items():
        where = f"overrides.{name}"
        sub = sub_nodes.get(str(name))
        sub_lines = _check_keys(sub, OVERRIDE_KEYS, source, f"`{where}`") if sub else {}
        if not isinstance(settings, dict):
            _fail("must be a mapping like {weight_bits: 4}.", source, lines.get("overrides"), where)
        for key in settings:
            if key not in OVERRIDE_KEYS:
                _fail(f"unknown key `{key}`; allowed: {', '.join(OVERRIDE_KEYS)}.", source)
        overrides[str(name)] = LayerOverride(
            _bits(settings["weight_bits"], source, sub_lines.get("weight_bits"), where)
            if "weight_bits" in settings
            else None,
            _quantile(settings["shift_quantile"], source, sub_lines.get("shift_quantile"), where)
            if "shift_quantile" in settings
            else None,
        )
    return QatPolicy(int(start), bits, quantile, overrides)


def _override_nodes(node: yaml.MappingNode | None) -> dict[str, yaml.MappingNode]:
    if node is None:
        return {}
    for key_node, value in node.value:
        if key_node.value == "overrides" and isinstance(value, yaml.MappingNode):
            return {str(k.value): v for k, v in value.value if isinstance(v, yaml.MappingNode)}
    return {}


def bits_label(bits: int) -> str:
    """'8-bit', or 'binary (+/-1)' for -1."""
    return "binary (+/-1)" if bits == BINARY else f"{bits}-bit"


def qat_layers(model: nn.Module) -> dict[str, HardwareLayer]:
    """The model's weighted edgesynth.nn layers by module name (`module.` prefix removed)."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, HardwareLayer):
            out[name.removeprefix("module.")] = m
    return out


def check_policy_fits(model: nn.Module, policy: QatPolicy, source: str = "QAT policy") -> None:
    """Every override names a layer of the model."""
    layers = qat_layers(model)
    unknown = [n for n in policy.overrides if n not in layers]
    if unknown:
        names = ", ".join(f"`{n}`" for n in unknown)
        raise EdgesynthError(
            f"`overrides` names {names}, not a layer of this model; its layers are "
            + ", ".join(layers)
            + "."
            + did_you_mean(unknown[0], layers),
            file=source,
        )
    check_binary_mix(model, policy, source)


def check_binary_mix(model: nn.Module, policy: QatPolicy, source: str = "QAT policy") -> None:
    """Binary (+/-1) weights only on the MAX78002, and never beside 1-bit (0/-1) layers."""
    layers = qat_layers(model).items()
    bits = {name: policy.for_layer(name)[0] for name, m in layers if m.op is not None}
    binary = [n for n, b in bits.items() if b == BINARY]
    one_bit = [n for n, b in bits.items() if b == 1]
    device = device_setting.current().device
    if binary and not device.supports_binary_weights:
        raise EdgesynthError(
            f"layer `{binary[0]}` gets binary (+/-1) weights, which the {device.name} does not "
            "have (the MAX78002 does); use 1, 2, 4 or 8 bits.",
            file=source,
        )
    if binary and one_bit:
        raise EdgesynthError(
            f"layer `{one_bit[0]}` gets 1-bit (0/-1) weights and layer `{binary[0]}` binary "
            "(+/-1) weights; one network cannot have both: make the 1-bit layers 2-bit or "
            "binary.",
            file=source,
        )


def enable_qat(model: nn.Module, policy: QatPolicy) -> int:
    """Fold batchnorm and switch every layer to QAT; returns the number of folded layers."""
    check_policy_fits(model, policy)
    folded = fuse_bn_layers(model)
    for name, layer in qat_layers(model).items():
        bits, quantile = policy.for_layer(name)
        layer.start_qat(bits, quantile)
    return folded


def is_qat(model: nn.Module) -> bool:
    return any(layer.state != "float" for layer in qat_layers(model).values() if layer.op)
