"""Weights and biases: from a checkpoint or synthetic files, lined up with the layers the way
the vendor does it (`weight_source`, `bypass`), with the weight width, the implicit output
shift (8 - bits) and the channel counts the weights imply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.compat.weight_lists import (
    WeightEntry,
    synthetic_takers,
    takes_no_weights,
)
from edgesynth.targets.max7800x.description.checkpoint import CheckpointLayer, resolve_quantization
from edgesynth.targets.max7800x.description.layer_config import layer_error
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.description.spec import NetworkSpec

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.description.assemble_options import BuildOptions

BINARY = -1  # the vendor's code for +/-1 weights


@dataclass
class WeightLayer:
    """One weight-bearing layer's parameters, from a checkpoint or a synthetic weights file."""

    weight: np.ndarray  # int64 as stored by the source
    bias: np.ndarray | None
    output_shift: int | None  # from the checkpoint; None when the source has none
    source: str  # for messages: "checkpoint.pth.tar: conv1.op.weight"
    weight_bits: int = 8  # the checkpoint's `weight_bits` (8 when absent)
    problem: EdgesynthError | None = None  # no hardware values: refused if the run uses them


def _fls(value: int) -> int:
    """Index of the most significant set bit (-1 for 0)."""
    return int(value).bit_length() - 1


def _channels_of(layer: Layer, weight: np.ndarray) -> tuple[int, int]:
    if layer.operation == "convtranspose2d":
        return weight.shape[1], weight.shape[0] * layer.groups
    return weight.shape[1] * layer.groups, weight.shape[0]


def _check_kernel(spec: NetworkSpec, layer: Layer, weight: np.ndarray, source: str) -> None:
    if weight.ndim == 2:
        found = (1, 1)
    elif weight.ndim == 3:
        found = (weight.shape[2], 1)
    else:
        found = (weight.shape[2], weight.shape[3])
    if found != layer.kernel_size:

        def show(k: tuple[int, int]) -> str:
            return str(k[0]) if layer.is_1d else f"{k[0]}x{k[1]}"

        raise layer_error(
            spec,
            layer.spec,
            "kernel_size",
            f"the YAML configures a {show(layer.kernel_size)} kernel but {source} holds "
            f"{show(found)} kernels (weights shaped {tuple(weight.shape)}).",
        )


def _checkpoint_takers(layers: list[Layer]) -> list[Layer]:
    """The layers that take the checkpoint's weight layers, in order."""
    return [x for x in layers if not takes_no_weights(x) and x.spec.weight_source is None]


def refuse_weights_in_use(layers: list[Layer], sources: list[WeightLayer], run: set[int]) -> None:
    """Refuse checkpoint weights that are no hardware values (`WeightLayer.problem`) where a
    layer of the run (`run`: the layers from --start-layer to --stop-after, and those the known
    answer simulates) uses them, itself or through `weight_source`. A layer the run leaves out
    may hold them: the vendor's tool runs such a network."""
    used = run | {layers[i].weight_source for i in run if layers[i].weight_source is not None}
    for layer, source in zip(_checkpoint_takers(layers), sources, strict=False):
        if source.problem is not None and layer.index in used:
            raise source.problem


def checkpoint_params(
    spec: NetworkSpec, layers: list[Layer], sources: list[WeightLayer], opts: BuildOptions
) -> tuple[list[WeightEntry], list[np.ndarray | None], dict[int, int]]:
    """Weights, biases and total shifts of the layers that read the checkpoint, in order."""
    takers = _checkpoint_takers(layers)
    if len(sources) < len(takers):
        missing = takers[len(sources)]
        raise layer_error(
            spec,
            missing.spec,
            None,
            f"the YAML has {len(takers)} layers with weights but the checkpoint only "
            f"{len(sources)}; this is the first YAML layer left without weights. Check that "
            "the checkpoint belongs to this network (`arch`) and that passthrough/element-wise "
            "layers are marked `op: none`/`op: add`.",
        )
    params: list[WeightEntry] = []
    biases: list[np.ndarray | None] = []
    shifts: dict[int, int] = {}
    for layer, source in zip(takers, sources, strict=False):
        ls = layer.spec
        configured = BINARY if ls.quantization == "binary" else ls.quantization
        try:
            bits, binary = resolve_quantization(
                CheckpointLayer(
                    name=source.source,
                    weight=source.weight,
                    bias=None,
                    weight_bits=source.weight_bits,
                ),
                configured,
                binary_weights_supported=opts.device.supports_binary_weights,
            )
        except EdgesynthError as err:
            raise layer_error(spec, ls, "quantization", f"{source.source}: {err.message}") from None
        layer.binary, layer.quantization = binary, bits
        weight = source.weight.astype(np.int64)
        if layer.operation == "convtranspose2d":
            weight = np.flip(weight, axis=(2, 3)).swapaxes(0, 1)
        _check_kernel(spec, layer, weight, source.source)
        in_ch, out_ch = _channels_of(layer, weight)
        params.append(WeightEntry(weight, in_ch, out_ch, flat_2d_linear=weight.ndim == 2))
        bias = source.bias
        if layer.index in opts.no_bias:
            bias = None
        biases.append(None if bias is None else np.asarray(bias, dtype=np.int64))
        shift = ls.output_shift if ls.output_shift is not None else (source.output_shift or 0)
        shifts[layer.index] = int(shift) + 8 - layer.quantization
    return params, biases, shifts


def synthetic_params(
    spec: NetworkSpec, layers: list[Layer], arrays: list[np.ndarray], source: str
) -> tuple[list[WeightEntry], dict[int, int]]:
    """Synthetic test weights: requantized to the YAML's width by shifting right."""
    takers = synthetic_takers(layers)
    if len(arrays) < len(takers):
        raise layer_error(
            spec,
            takers[len(arrays)].spec,
            None,
            f"{source} holds weights for {len(arrays)} layers, the YAML needs {len(takers)}.",
        )
    params: list[WeightEntry] = []
    shifts: dict[int, int] = {}
    for layer, weight in zip(takers, arrays, strict=False):
        weight = np.array(weight, dtype=np.int64)
        ls = layer.spec
        high = int(weight.max())
        low = int(weight.min())
        high = high + 1 if high < 0 else high
        low = low + 1 if low < 0 else low
        current = max(_fls(abs(low)), _fls(abs(high))) + 2
        if current > 8:
            raise layer_error(spec, ls, None, f"{source} holds weights wider than 8 bits.")
        if ls.quantization == "binary":
            weight = np.where(weight >= 0, 1, -1)
            layer.binary, layer.quantization = True, 1
        else:
            bits = 8 if ls.quantization is None else int(ls.quantization)
            if current > bits:
                weight = weight >> (current - bits)
            layer.quantization = bits
        _check_kernel(spec, layer, weight, source)
        in_ch, out_ch = _channels_of(layer, weight)
        params.append(WeightEntry(weight, in_ch, out_ch))
        shifts[layer.index] = (ls.output_shift or 0) + 8 - layer.quantization
    return params, shifts


def synthetic_biases(
    layers: list[Layer], arrays: list[np.ndarray], no_bias: Sequence[int]
) -> list[np.ndarray | None]:
    """One array per layer with weights (not passthrough, not bypass), stored compactly.

    A layer in `--no-bias` still uses up its array. The list is one entry per YAML layer,
    filled from the front; the vendor shifts it into place later (`compat.weight_lists.line_up`).
    """
    biases: list[np.ndarray | None] = [None] * len(layers)
    remaining = iter(arrays)
    seq = 0
    for layer in layers:
        if takes_no_weights(layer):
            continue
        array = next(remaining, None)
        if array is None:
            break
        if layer.index not in no_bias:
            biases[seq] = np.asarray(array, dtype=np.int64)
        seq += 1
    return biases


def attach_weights(
    spec: NetworkSpec,
    layers: list[Layer],
    weights: list[WeightEntry | None],
    biases: list[np.ndarray | None],
    shifts: dict[int, int],
) -> tuple[list[int], list[int]]:
    """Give each layer its entry; return the vendor's per-layer input/output channel lists."""
    in_channels: list[int] = []
    out_channels: list[int] = []
    for layer in layers:
        entry = weights[layer.index]
        ll = layer.index
        if layer.spec.bypass:
            layer.weights, layer.quantization = None, 1
            shift = layer.spec.output_shift
            layer.output_shift = 7 if shift is None else shift
        elif layer.operation == "none":
            layer.weights = None
            layer.output_shift = layer.spec.output_shift or 0
        elif entry is None:
            raise layer_error(
                spec,
                layer.spec,
                "weight_source",
                "this layer's weights come from a layer without weights (passthrough, "
                "element-wise or bypass).",
            )
        else:
            layer.weights = entry.weight
            layer.output_shift = shifts.get(ll, layer.spec.output_shift or 0)
        # The vendor indexes the bias list by layer even for bypass layers (see compat's `line_up`).
        if layer.operation != "none":
            if ll >= len(biases):
                raise layer_error(
                    spec,
                    layer.spec,
                    "bypass" if layer.spec.bypass else None,
                    "the vendor's bias list has no entry for this layer (a `bypass` layer "
                    "before it shifts the biases of the layers after it); the vendor tool "
                    "fails on this network.",
                )
            layer.bias = biases[ll]
        in_channels.append(entry.in_channels if entry is not None else 0)
        out_channels.append(entry.out_channels if entry is not None else 0)
    return in_channels, out_channels
