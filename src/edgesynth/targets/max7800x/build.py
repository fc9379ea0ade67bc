"""Turn a parsed YAML description, weights and a sample into a MAX7800x `Network`.

This is where the vendor's implicit semantics live: per-operation defaults (padding 1 for
convolutions, 3x3 kernels, ...), which YAML layers take weights from the checkpoint, the weight
bit width inferred from the values, the implicit output shift (8 - bits), channel counts taken
from the weights, the layer sequence (`next_sequence`, `--stop-after`), and the shape of every
layer's input and output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.network import NETWORK_INPUT, Layer, Network
from edgesynth.ir.spec import LayerSpec, NetworkSpec
from edgesynth.sim.ops import pooled_size
from edgesynth.targets.max7800x.device import Device

BINARY = -1  # the vendor's code for +/-1 weights


@dataclass
class BuildOptions:
    device: Device
    checkpoint: str | None = None
    sample_input: str | None = None
    stop_after: int | None = None
    start_layer: int = 0
    no_bias: list[int] = field(default_factory=list)
    output_width: int | None = None  # --output-width: overrides the final layer's
    skip_checkpoint_layers: int = 0
    skip_yaml_layers: int = 0
    reshape_inputs: bool = False
    input_offset: int | None = None
    ignore_streaming: bool = False
    streaming_layers: list[int] = field(default_factory=list)
    base_dir: Path = Path(".")  # where implicit `tests/...` look-ups resolve


@dataclass
class WeightLayer:
    """One weight-bearing layer's parameters, from a checkpoint or a synthetic weights file."""

    weight: np.ndarray  # int64 as stored by the source
    bias: np.ndarray | None
    output_shift: int | None  # from the checkpoint; None when the source has none
    source: str  # for messages: "checkpoint.pth.tar: conv1.op.weight"


def _error(spec: NetworkSpec, layer: LayerSpec, key: str | None, message: str) -> EdgesynthError:
    line = layer.lines.get(key, layer.line) if key else layer.line
    return EdgesynthError(
        message, file=spec.path, line=line, layer=layer.index, layer_name=layer.name, key=key
    )


# --------------------------------------------------------------------------------------------
# Per-layer configuration with the vendor's defaults


def _configure_layer(spec: NetworkSpec, ls: LayerSpec, index: int) -> Layer:
    operation = ls.operation or "conv2d"
    is_1d = operation == "conv1d"
    if ls.kernel_size is not None and operation not in ("none", "linear"):
        kernel = ls.kernel_size
    elif operation in ("none", "linear"):
        kernel = (1, 1)
    elif is_1d:
        kernel = (9, 1)
    else:
        kernel = (3, 3)
    if operation in ("none", "linear") and ls.kernel_size not in (None, (1, 1)):
        raise _error(spec, ls, "kernel_size", f"a {operation} layer has no kernel; remove it.")

    pad = ls.pad if ls.pad is not None else ((0, 0) if operation in ("none", "linear") else (1, 1))
    pool_type = "max" if ls.max_pool is not None else "avg" if ls.avg_pool is not None else None
    pool = ls.max_pool or ls.avg_pool or (1, 1)
    pool_stride = ls.pool_stride or (1, 1)
    stride = ls.stride or (1, 1)
    dilation = ls.dilation or (1, 1)
    output_padding = ls.output_padding or ((1, 1) if operation == "convtranspose2d" else (0, 0))
    if is_1d:
        pad, pool, pool_stride, stride = (
            (pad[0], 0),
            (pool[0], 1),
            (pool_stride[0], 1),
            (stride[0], 1),
        )
        dilation = (dilation[0], 1)
    if operation == "convtranspose2d":
        stride = (2, 2)
    operands = ls.operands or (2 if ls.eltwise else 1)
    quant = ls.quantization
    return Layer(
        index=index,
        spec=ls,
        operation=operation,
        eltwise=ls.eltwise,
        operands=operands,
        pool_first=True if ls.pool_first is None else ls.pool_first,
        pool_type=pool_type,
        pool=tuple(pool),
        pool_stride=tuple(pool_stride),
        pool_dilation=tuple(ls.pool_dilation or (1, 1)),
        kernel_size=tuple(kernel),
        stride=tuple(stride),
        pad=tuple(pad),
        dilation=tuple(dilation),
        output_padding=tuple(output_padding),
        groups=ls.groups or 1,
        activation=None if ls.activation in (None, "none") else ls.activation,
        quantization=8 if quant in (None, "binary") else int(quant),
        binary=quant == "binary",
        output_width=ls.output_width or 8,
        flatten=bool(ls.flatten),
        in_crop=tuple(ls.in_crop or (0, 0)),
        processors=ls.processors,
        output_processors=ls.output_processors,
        in_offset=ls.in_offset,
        out_offset=ls.out_offset if ls.out_offset is not None else 0,
        data_format=ls.data_format or "HWC",
        streaming=bool(ls.streaming),
        write_gap=ls.write_gap or 0,
        read_gap=ls.read_gap or 0,
        bias_group=ls.bias_group,
        output=bool(ls.output),
        buffer_shift=ls.buffer_shift or 0,
        buffer_insert=ls.buffer_insert or 0,
    )


def _uses_weights(layer: Layer) -> bool:
    return layer.operation != "none" and not layer.spec.bypass and layer.weight_source is None


# --------------------------------------------------------------------------------------------
# Weights


def _fls(value: int) -> int:
    """Index of the most significant set bit (-1 for 0)."""
    return int(value).bit_length() - 1


def _inferred_bits(weight: np.ndarray, device: Device) -> int:
    """The narrowest weight width (1, 2, 4, 8 or BINARY) that holds every value."""
    magnitudes = np.abs(weight)
    if device.supports_binary_weights and weight.size and magnitudes.min() == magnitudes.max() == 1:
        return BINARY
    w_max, w_min = int(weight.max()), int(weight.min())
    high = w_max if w_max > 0 else abs(w_max) - 1
    low = w_min if w_min > 0 else abs(w_min) - 1
    if high > 0 or low > 0:
        return 1 << (_fls(max(_fls(high), _fls(low)) + 1) + 1)
    return 1


def _weight_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _assign_checkpoint_weights(
    spec: NetworkSpec, layers: list[Layer], sources: list[WeightLayer], device: Device
) -> None:
    takers = [layer for layer in layers if _uses_weights(layer)]
    if len(sources) < len(takers):
        missing = takers[len(sources)]
        raise _error(
            spec,
            missing.spec,
            None,
            f"the YAML has {len(takers)} layers with weights but the checkpoint only "
            f"{len(sources)}; this is the first YAML layer left without weights. Check that "
            "the checkpoint belongs to this network (`arch`) and that passthrough/element-wise "
            "layers are marked `op: none`/`op: add`.",
        )
    for layer, source in zip(takers, sources, strict=False):
        weight = source.weight.astype(np.int64)
        ls = layer.spec
        if ls.quantization is None:
            bits = _inferred_bits(weight, device)
        elif ls.quantization == "binary":
            bits = BINARY
        else:
            bits = int(ls.quantization)
        if bits == BINARY:
            if not (np.abs(weight) == 1).all():
                raise _error(
                    spec,
                    ls,
                    "quantization",
                    f"binary weights must all be -1 or +1, but {source.source} holds values "
                    f"from {weight.min()} to {weight.max()}.",
                )
        else:
            low, high = _weight_range(bits)
            if weight.min() < low or weight.max() > high:
                raise _error(
                    spec,
                    ls,
                    "quantization",
                    f"{bits}-bit weights must lie in [{low}, {high}], but {source.source} holds "
                    f"values from {weight.min()} to {weight.max()}; set `quantization` to the "
                    "width the checkpoint was quantized for.",
                )
        layer.binary = bits == BINARY
        layer.quantization = 1 if bits == BINARY else bits
        if layer.operation == "convtranspose2d":
            weight = np.flip(weight, axis=(2, 3)).swapaxes(0, 1)
        _check_kernel(spec, layer, weight, source.source)
        layer.weights = weight
        layer.bias = source.bias
        shift = ls.output_shift if ls.output_shift is not None else (source.output_shift or 0)
        layer.output_shift = int(shift) + 8 - layer.quantization


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

        raise _error(
            spec,
            layer.spec,
            "kernel_size",
            f"the YAML configures a {show(layer.kernel_size)} kernel but {source} holds "
            f"{show(found)} kernels (weights shaped {tuple(weight.shape)}).",
        )


def _synthetic_takers(layers: list[Layer]) -> list[Layer]:
    """The layers that consume synthetic weight arrays, in the vendor's order.

    The vendor skips weightless layers, but tests `bypass` on the layer numbered by how many
    arrays were consumed so far rather than on the layer itself; reproduced because it decides
    which array lands where.
    """
    takers: list[Layer] = []
    seq = 0
    while seq < len(layers):
        while seq < len(layers) and (
            layers[seq].operation == "none" or layers[len(takers)].spec.bypass
        ):
            seq += 1
        if seq >= len(layers):
            break
        takers.append(layers[seq])
        seq += 1
    return takers


def _assign_synthetic_weights(
    spec: NetworkSpec, layers: list[Layer], arrays: list[np.ndarray], source: str
) -> None:
    """Synthetic test weights: requantized to the YAML's width by shifting right."""
    takers = _synthetic_takers(layers)
    if len(arrays) < len(takers):
        raise _error(
            spec,
            takers[len(arrays)].spec,
            None,
            f"{source} holds weights for {len(arrays)} layers, the YAML needs {len(takers)}.",
        )
    for layer, weight in zip(takers, arrays, strict=False):
        weight = np.array(weight, dtype=np.int64)
        ls = layer.spec
        high = int(weight.max())
        low = int(weight.min())
        high = high + 1 if high < 0 else high
        low = low + 1 if low < 0 else low
        current = max(_fls(abs(low)), _fls(abs(high))) + 2
        if current > 8:
            raise _error(spec, ls, None, f"{source} holds weights wider than 8 bits.")
        if ls.quantization == "binary":
            weight = np.where(weight >= 0, 1, -1)
            layer.binary, layer.quantization = True, 1
        else:
            bits = 8 if ls.quantization is None else int(ls.quantization)
            if current > bits:
                weight = weight >> (current - bits)
            layer.quantization = bits
        _check_kernel(spec, layer, weight, source)
        layer.weights = weight
        layer.output_shift = (ls.output_shift or 0) + 8 - layer.quantization


def _synthetic_bias(
    layers: list[Layer], arrays: list[np.ndarray], no_bias: list[int]
) -> list[np.ndarray | None]:
    """Bias arrays are read one per YAML position; weightless layers then shift them along.

    This mirrors how the vendor lines the bias file up with the layers: the arrays end up on
    the weight-bearing layers in order.
    """
    biases: list[np.ndarray | None] = [None] * len(layers)
    remaining = iter(arrays)
    for index in range(len(layers)):
        if index in no_bias:
            continue
        array = next(remaining, None)
        if array is None:
            break
        biases[index] = np.asarray(array, dtype=np.int64)
    for layer in layers:
        if layer.operation == "none" and not layer.spec.bypass:
            biases.insert(layer.index, None)
    return biases[: len(layers)]


# --------------------------------------------------------------------------------------------
# Sequence and shapes


def _resolve_reference(spec: NetworkSpec, layers: list[Layer], ls: LayerSpec, key: str, ref):
    if isinstance(ref, str):
        if ref.lower() in ("input", "in"):
            return NETWORK_INPUT
        for layer in layers:
            if layer.spec.name == ref:
                return layer.index
        names = ", ".join(f"`{x.spec.name}`" for x in layers if x.spec.name) or "none"
        raise _error(spec, ls, key, f"no layer is named `{ref}` (named layers: {names}).")
    return int(ref)


def _simulated_order(spec: NetworkSpec, layers: list[Layer], order: list[int]) -> list[int]:
    """`simulated_sequence` lets the known-answer simulation skip ahead of `next_sequence`."""
    sim_order: list[int] = []
    index = order[0]
    while index != -1 and index not in sim_order:
        sim_order.append(index)
        ls = layers[index].spec
        if ls.simulated_sequence is None:
            index = layers[index].next_sequence
        elif isinstance(ls.simulated_sequence, str) and ls.simulated_sequence.lower() == "stop":
            index = -1
        else:
            index = _resolve_reference(
                spec, layers, ls, "simulated_sequence", ls.simulated_sequence
            )
    return sim_order


def _sequence(spec: NetworkSpec, layers: list[Layer], opts: BuildOptions) -> list[int]:
    count = len(layers)
    for layer in layers:
        ls = layer.spec
        if ls.next_sequence is None:
            layer.next_sequence = layer.index + 1 if layer.index + 1 < count else -1
        elif isinstance(ls.next_sequence, str) and ls.next_sequence.lower() == "stop":
            layer.next_sequence = -1
        else:
            layer.next_sequence = _resolve_reference(
                spec, layers, ls, "next_sequence", ls.next_sequence
            )
            if layer.next_sequence >= count:
                layer.next_sequence = -1
        if ls.in_sequences is not None:
            layer.in_sequences = [
                _resolve_reference(spec, layers, ls, "in_sequences", ref) for ref in ls.in_sequences
            ]
            for ref in layer.in_sequences:
                if ref != NETWORK_INPUT and not 0 <= ref < count:
                    raise _error(
                        spec,
                        ls,
                        "in_sequences",
                        f"refers to layer {ref}, but the network has layers 0 to {count - 1} "
                        "(and -1 for the input).",
                    )
    order: list[int] = []
    index = opts.start_layer
    if not 0 <= index < count:
        raise EdgesynthError(
            f"--start-layer {index} is outside the network's layers 0 to {count - 1}."
        )
    while index != -1 and index < count:
        if index in order:
            raise _error(
                spec,
                layers[index].spec,
                "next_sequence",
                f"the layer sequence loops back to layer {index}.",
            )
        order.append(index)
        if opts.stop_after is not None and index == opts.stop_after - opts.skip_yaml_layers:
            layers[index].next_sequence = -1
        index = layers[index].next_sequence
    return order


def _channels(spec: NetworkSpec, net_layers: list[Layer], order: list[int], in_ch: int) -> None:
    previous = None
    for index in order:
        layer = net_layers[index]
        ls = layer.spec
        weight = layer.weights
        if weight is not None:
            if layer.operation == "convtranspose2d":
                in_channels, out_channels = weight.shape[1], weight.shape[0] * layer.groups
            elif weight.ndim == 2:
                in_channels, out_channels = weight.shape[1], weight.shape[0]
            else:
                in_channels, out_channels = weight.shape[1] * layer.groups, weight.shape[0]
        else:
            in_channels = out_channels = 0
        if layer.in_sequences:
            producers = layer.in_sequences
            sizes = [in_ch if i == NETWORK_INPUT else net_layers[i].out_channels for i in producers]
            in_channels = sum(sizes) if layer.eltwise is None else sizes[0]
        if in_channels <= 0:
            if previous is None:
                in_channels = in_ch // layer.operands
            else:
                in_channels = net_layers[previous].out_channels
        if ls.in_channels is not None:
            in_channels = ls.in_channels
        if out_channels <= 0:
            out_channels = in_channels
        if ls.out_channels is not None:
            out_channels = ls.out_channels
        layer.in_channels = in_channels
        layer.out_channels = out_channels
        previous = index


def _dimensions(
    spec: NetworkSpec, layers: list[Layer], order: list[int], sample_dim: tuple[int, int]
) -> None:
    previous = None
    for index in order:
        layer = layers[index]
        ls = layer.spec
        if ls.in_dim is not None:
            in_dim = tuple(ls.in_dim)
        elif previous is None:
            in_dim = sample_dim
        else:
            sources = layer.in_sequences or [previous]
            dims = [sample_dim if s == NETWORK_INPUT else layers[s].out_dim for s in sources]
            if any(d != dims[0] for d in dims):
                raise _error(
                    spec,
                    ls,
                    "in_sequences",
                    "cannot combine outputs of different sizes: "
                    + ", ".join(
                        f"layer {s}: {d[0]}x{d[1]}" for s, d in zip(sources, dims, strict=True)
                    ),
                )
            in_dim = dims[0]
        top, bottom = layer.in_crop
        if top or bottom:
            in_dim = (in_dim[0] - top - bottom, in_dim[1])
        layer.in_dim = in_dim
        pooled = (
            pooled_size(in_dim[0], layer.pool[0], layer.pool_stride[0], layer.pool_dilation[0]),
            1
            if layer.is_1d
            else pooled_size(
                in_dim[1], layer.pool[1], layer.pool_stride[1], layer.pool_dilation[1]
            ),
        )
        if min(pooled) <= 0:
            raise _error(
                spec,
                ls,
                "max_pool" if layer.pool_type == "max" else "avg_pool",
                f"pooling {layer.pool[0]}x{layer.pool[1]} with stride {layer.pool_stride[0]} "
                f"leaves no data from the {in_dim[0]}x{in_dim[1]} input.",
            )
        layer.pooled_dim = pooled
        kh, kw = layer.kernel_size
        if layer.operation == "convtranspose2d":
            out = tuple(
                (pooled[a] - 1) * layer.stride[a]
                - 2 * layer.pad[a]
                + layer.dilation[a] * ((kh, kw)[a] - 1)
                + layer.output_padding[a]
                + 1
                for a in (0, 1)
            )
        elif layer.is_1d:
            out = (
                (pooled[0] - layer.dilation[0] * (kh - 1) - 1 + 2 * layer.pad[0]) // layer.stride[0]
                + 1,
                1,
            )
        else:
            out = tuple(
                (pooled[a] - layer.dilation[a] * ((kh, kw)[a] - 1) - 1 + 2 * layer.pad[a])
                // layer.stride[a]
                + 1
                for a in (0, 1)
            )
        if layer.flatten:
            out = (1, 1)
            flat = pooled[0] * pooled[1]
            layer.in_channels //= flat
        if min(out) <= 0:
            raise _error(
                spec,
                ls,
                "pad",
                f"the output of this layer would be empty ({out[0]}x{out[1]}) for a "
                f"{pooled[0]}x{pooled[1]} input.",
            )
        layer.out_dim = out
        previous = index


# --------------------------------------------------------------------------------------------


def build_network(
    spec: NetworkSpec,
    sample: np.ndarray,
    opts: BuildOptions,
    *,
    checkpoint_layers: list[WeightLayer] | None = None,
    synthetic_weights: tuple[list[np.ndarray], str] | None = None,
    synthetic_bias: list[np.ndarray] | None = None,
) -> Network:
    """Apply the device's semantics to `spec` and attach weights; shapes follow `sample`."""
    layers = [_configure_layer(spec, ls, i) for i, ls in enumerate(spec.layers)]
    if not layers:
        raise EdgesynthError("the network has no layers.", file=spec.path)
    for layer in layers:
        if layer.spec.weight_source is not None:
            layer.weight_source = _resolve_reference(
                spec, layers, layer.spec, "weight_source", layer.spec.weight_source
            )
    if checkpoint_layers is not None:
        _assign_checkpoint_weights(spec, layers, checkpoint_layers, opts.device)
        for layer in layers:
            if layer.index in opts.no_bias:
                layer.bias = None
    elif synthetic_weights is not None:
        _assign_synthetic_weights(spec, layers, *synthetic_weights)
        biases = _synthetic_bias(layers, synthetic_bias or [], opts.no_bias)
        for layer, bias in zip(layers, biases, strict=False):
            if _uses_weights(layer):
                layer.bias = bias
    for layer in layers:
        if layer.spec.bypass:
            # Kernel bypass multiplies by one and ignores any bias; without a configured
            # shift the output equals the accumulator (shift 7 undoes the /128).
            layer.weights, layer.bias, layer.quantization = None, None, 1
            shift = layer.spec.output_shift
            layer.output_shift = 7 if shift is None else shift
        elif not _uses_weights(layer):
            layer.output_shift = layer.spec.output_shift or 0
        if layer.weight_source is not None:
            src = layers[layer.weight_source]
            layer.weights, layer.bias = src.weights, src.bias
            layer.quantization, layer.binary = src.quantization, src.binary
            layer.output_shift = (layer.spec.output_shift or 0) + 8 - layer.quantization

    if sample.ndim < 3:
        sample = sample[..., None]
    order = _sequence(spec, layers, opts)
    _channels(spec, layers, order, sample.shape[0])
    _dimensions(spec, layers, order, (sample.shape[1], sample.shape[2]))
    final = order[-1]
    if opts.output_width is not None:
        layers[final].output_width = opts.output_width
    if opts.input_offset is not None:
        layers[order[0]].in_offset = opts.input_offset
    for layer in layers:
        if opts.ignore_streaming:
            layer.streaming = False
        if layer.index in opts.streaming_layers:
            layer.streaming = True
    return Network(
        spec=spec,
        device=opts.device.name,
        layers=layers,
        input_shape=tuple(sample.shape),
        order=order,
        sim_order=_simulated_order(spec, layers, order),
        output_layer=final,
    )
