"""`edgesynth quantize`: turn a trained checkpoint into the integers the chip runs.

Layers trained with QAT keep what they learned: the output shift covers the `shift_quantile`
of |weights and bias| (the same rule QAT used), weights round to `weight_bits` and the bias to
one byte. Float layers are post-training quantized with a clip method:

- SCALE (--scale s, default 0.85): weights and bias times s, no output shift; every layer's
  output is scaled by s (the vendor's "simple clipping").
- MAX, AVGMAX, AVG, STDDEV: a clip threshold t from the layer's weights (MAX: max |w|;
  AVGMAX: the larger of |mean of per-channel minima| and |mean of per-channel maxima|;
  AVG: mean of per-channel max |w|; STDDEV: mean +/- n standard deviations, --stddev n,
  default 2, limited to the weights' range). The output shift is ceil(log2(t)): weights are
  divided by 2^shift, clipped, and the chip's shift multiplies the result back, so the
  layer computes the float function except where weights exceed the threshold.

Layers QAT-trained with binary weights (`weight_bits` -1, MAX78002) become 1-bit layers whose
weights are all +/-1 (the sign), with the shift QAT used; the synthesizer runs them as binary.

The result is written in the vendor's layout: integer `op.weight`, `op.bias` holding the bias
byte times 2^(weight_bits-1), `output_shift`, `weight_bits`, `bias_bits`, `quantize_activation`
1, `adjust_output_shift` 0. Batchnorm still in the checkpoint is folded first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.nn import functional as hw
from edgesynth.quant.bnfuse import fuse_bn_state
from edgesynth.quant.checkpoint import layer_of

METHODS = ("SCALE", "MAX", "AVGMAX", "AVG", "STDDEV")
DEFAULT_SCALE = 0.85
DEFAULT_STDDEV = 2.0


def _per_channel(w: torch.Tensor) -> torch.Tensor:
    return w.reshape(w.shape[0], -1)


def clip_threshold(w: torch.Tensor, method: str, stddev: float = DEFAULT_STDDEV) -> float:
    """The clip threshold of a weight tensor under `method` (not SCALE)."""
    w = w.detach().double()
    if method == "MAX":
        t = w.abs().max()
    elif method == "AVGMAX":
        rows = _per_channel(w)
        t = torch.maximum(rows.min(dim=1).values.mean().abs(), rows.max(dim=1).values.mean().abs())
    elif method == "AVG":
        t = _per_channel(w).abs().max(dim=1).values.mean()
    elif method == "STDDEV":
        mean, std = w.mean(), w.std() if w.numel() > 1 else torch.tensor(0.0)
        lo = torch.maximum(w.min(), mean - stddev * std)
        hi = torch.minimum(w.max(), mean + stddev * std)
        t = torch.maximum(lo.abs(), hi.abs())
    else:
        raise EdgesynthError(f"unknown clip method `{method}`.")
    return float(t)


@dataclass
class LayerReport:
    name: str
    weight_bits: int
    output_shift: int
    method: str
    clipped: int  # weights that did not fit
    total: int


@dataclass
class QuantizeOptions:
    clip_method: str | None = None  # None: QAT layers as trained, float layers SCALE
    scale: float = DEFAULT_SCALE
    stddev: float = DEFAULT_STDDEV
    weight_bits: int | None = None  # default for layers without their own
    layer_bits: list[int | None] | None = None  # per weight layer, from a network YAML
    allowed_bits: tuple[int, ...] = (1, 2, 4, 8)
    binary_weights: bool = True  # the device runs +/-1 weights (layers QAT-trained as binary)


def _scalar(state: dict[str, torch.Tensor], key: str, default: float) -> float:
    value = state.get(key)
    return float(value.reshape(-1)[0]) if value is not None and value.numel() else default


def weight_layers(state: dict[str, torch.Tensor]) -> list[tuple[str, str]]:
    """(layer name, weight key) of every weighted layer, in state-dict order."""
    out = []
    for key, value in state.items():
        if key.endswith("weight") and ".bn." not in key and value.dim() > 1:
            out.append((layer_of(key), key))
    return out


def quantize_state(
    state: dict[str, torch.Tensor], opts: QuantizeOptions
) -> tuple[OrderedDict[str, torch.Tensor], list[LayerReport]]:
    """The quantized state dict (vendor layout) and what happened to each layer."""
    if opts.clip_method is not None and opts.clip_method not in METHODS:
        raise EdgesynthError(
            f"unknown clip method `{opts.clip_method}`; choose {', '.join(METHODS)}."
            + did_you_mean(opts.clip_method, METHODS)
        )
    state, _ = fuse_bn_state(state)
    layers = weight_layers(state)
    if not layers:
        raise EdgesynthError("the checkpoint holds no layer weights to quantize.")
    if opts.layer_bits is not None and len(opts.layer_bits) < len(layers):
        opts.layer_bits = list(opts.layer_bits) + [None] * (len(layers) - len(opts.layer_bits))
    done: dict[str, dict[str, torch.Tensor]] = {}
    reports = []
    for i, (name, wkey) in enumerate(layers):
        entries, report = _quantize_layer(state, name, wkey, i, opts)
        done[name] = entries
        reports.append(report)
    return _assemble(state, done), reports


def _bits_for(state: dict[str, torch.Tensor], name: str, index: int, opts: QuantizeOptions) -> int:
    bits = opts.layer_bits[index] if opts.layer_bits else None
    if bits is None:
        stored = int(_scalar(state, f"{name}.weight_bits", 0))
        bits = stored or opts.weight_bits or 8
    if bits == hw.BINARY:
        if not opts.binary_weights:
            raise EdgesynthError(
                f"layer `{name}` was trained with binary (+/-1) weights, which only the "
                "MAX78002 runs; quantize it with --device MAX78002."
            )
        if opts.clip_method is not None:
            raise EdgesynthError(
                f"layer `{name}` was trained with binary (+/-1) weights: quantize it as "
                "trained, without --clip-method."
            )
        return bits
    if bits not in opts.allowed_bits:
        raise EdgesynthError(
            f"layer `{name}`: {bits}-bit weights are not supported; choose "
            + ", ".join(map(str, opts.allowed_bits))
            + "."
        )
    return bits


def _quantize_layer(
    state: dict[str, torch.Tensor], name: str, wkey: str, index: int, opts: QuantizeOptions
) -> tuple[dict[str, torch.Tensor], LayerReport]:
    w = state[wkey].detach().double()
    bkey = wkey[: -len("weight")] + "bias"
    b = state[bkey].detach().double() if bkey in state else None
    bits = _bits_for(state, name, index, opts)
    trained_bits = _scalar(state, f"{name}.weight_bits", 0)
    adjust = _scalar(state, f"{name}.adjust_output_shift", 1)
    if trained_bits != 0 and adjust == 0:
        raise EdgesynthError(f"layer `{name}` is already quantized (adjust_output_shift is 0).")
    qat = trained_bits != 0 and opts.clip_method is None
    quantile = _scalar(state, f"{name}.shift_quantile", 1.0)
    method = "QAT" if qat else (opts.clip_method or "SCALE")
    if qat:
        shift = int(hw.qat_output_shift(w, b, bits, quantile).item())
        factor = 2.0 ** (-shift)
    elif method == "SCALE":
        shift, factor = 0, opts.scale
    else:
        t = clip_threshold(w, method, opts.stddev)
        shift = int(hw.output_shift_for(torch.tensor([t])).item())
        factor = 2.0 ** (-shift)
    lo, hi = hw.weight_levels(bits)
    unit = 2 ** (hw.hardware_bits(bits) - 1)  # binary weights count as 1 bit
    scaled = hw.round_half_up(w * factor * unit)
    w_int = hw.binarize(w) if bits == hw.BINARY else scaled.clamp(lo, hi)
    entries: dict[str, torch.Tensor] = {
        "output_shift": torch.tensor([float(shift)]),
        "weight_bits": torch.tensor([float(hw.hardware_bits(bits))]),
        "bias_bits": torch.tensor([8.0]),
        "quantize_activation": torch.tensor([1.0]),
        "adjust_output_shift": torch.tensor([0.0]),
        "shift_quantile": torch.tensor([quantile]),
        wkey: w_int.float(),
    }
    if b is not None:
        b_int = hw.round_half_up(b * factor * unit).clamp(hw.BIAS_MIN, hw.BIAS_MAX)
        entries[bkey] = (b_int * unit).float()
    clipped = 0 if bits == hw.BINARY else int((scaled != w_int).sum())
    return entries, LayerReport(name, bits, shift, method, clipped, w.numel())


def _assemble(
    state: dict[str, torch.Tensor], done: dict[str, dict[str, torch.Tensor]]
) -> OrderedDict[str, torch.Tensor]:
    """Vendor order: each layer's state buffers, then its weights and bias; others kept."""
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    emitted: set[str] = set()
    for key, value in state.items():
        layer = layer_of(key)
        if layer not in done:
            out[key] = value
            continue
        if layer in emitted:
            continue
        emitted.add(layer)
        entries = done[layer]
        for buf, tensor in entries.items():
            out[buf if "." in buf and buf.startswith(layer) else f"{layer}.{buf}"] = tensor
    return out
