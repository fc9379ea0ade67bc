"""Turn a parsed YAML description, weights and a sample into a MAX7800x `Network`.

This is where the vendor's implicit semantics live: which YAML layers exist (`sequence`,
`--skip-yaml-layers`), per-operation defaults (padding 1 for convolutions, 3x3 kernels, ...),
which layers take weights from the checkpoint and how the vendor lines weights and biases up
with the layers (including `weight_source` and `bypass`), the weight width, the implicit output
shift (8 - bits), channel counts taken from the weights, the layer sequence (`next_sequence`,
`--start-layer`, `--stop-after`, `simulated_sequence`), and the shape of every layer's input
and output.

The vendor (ai8x-synthesis `izer`) keeps parallel per-layer lists and patches them in place; a
few of its results depend on that bookkeeping rather than on the layer itself. Those are
reproduced on purpose, each where it happens, because they decide the known-answer numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.checkpoint import CheckpointLayer, resolve_quantization
from edgesynth.ir.network import NETWORK_INPUT, Layer, Network
from edgesynth.ir.spec import LayerSpec, NetworkSpec
from edgesynth.sim.ops import pooled_size
from edgesynth.targets.max7800x.device import Device

BINARY = -1  # the vendor's code for +/-1 weights
DATA_BUFFER = -2  # an `in_sequences` entry that names the global `data_buffer`
ALL_LAYERS_NO_BIAS = 256  # `--no-bias` without a list: every layer


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
    ignore_activation: bool = False  # --ignore-activation
    ignore_bn: bool = False  # --ignore-bn: skip unfolded BatchNorm weights in the checkpoint
    zero_sram: bool = False  # --zero-sram / --pretend-zero-sram: every 7th kernel cleared
    weight_input: str | None = None  # --weight-input: synthetic weights file
    bias_input: str | None = None  # --bias-input: synthetic bias file
    synthesize_input: int | None = None  # --synthesize-input
    synthesize_words: int = 8  # --synthesize-words
    input_csv_format: int = 888  # --input-csv-format: 555/565 drop low bits of the sample


@dataclass
class WeightLayer:
    """One weight-bearing layer's parameters, from a checkpoint or a synthetic weights file."""

    weight: np.ndarray  # int64 as stored by the source
    bias: np.ndarray | None
    output_shift: int | None  # from the checkpoint; None when the source has none
    source: str  # for messages: "checkpoint.pth.tar: conv1.op.weight"
    weight_bits: int = 8  # the checkpoint's `weight_bits` (8 when absent)


def _error(spec: NetworkSpec, layer: LayerSpec, key: str | None, message: str) -> EdgesynthError:
    line = layer.lines.get(key, layer.line) if key else layer.line
    return EdgesynthError(
        message, file=spec.path, line=line, layer=layer.index, layer_name=layer.name, key=key
    )


# --------------------------------------------------------------------------------------------
# Which YAML layers exist, and in which order


def yaml_layers(spec: NetworkSpec, skip: int) -> list[LayerSpec]:
    """The layers the vendor parses: the first `skip` dropped, then ordered by `sequence`.

    A layer without `sequence` follows the one before it; gaps in the numbering close up, so a
    layer's index is its rank, which is also what numeric references refer to.
    """
    numbered: list[tuple[int, LayerSpec]] = []
    sequence = 0
    for ls in spec.layers[skip:]:
        if ls.sequence is not None:
            sequence = ls.sequence - skip
            if sequence < 0:
                raise _error(
                    spec,
                    ls,
                    "sequence",
                    f"`sequence: {ls.sequence}` falls among the {skip} layers skipped by "
                    "--skip-yaml-layers.",
                )
        numbered.append((sequence, ls))
        sequence += 1
    return [ls for _, ls in sorted(numbered, key=lambda item: item[0])]


def checkpoint_takers(spec: NetworkSpec, opts: BuildOptions) -> int:
    """How many YAML layers read weights from a checkpoint (not passthrough/element-wise, not
    `bypass`, no `weight_source`)."""
    return sum(
        1
        for ls in yaml_layers(spec, opts.skip_yaml_layers)
        if (ls.operation or "conv2d") != "none" and not ls.bypass and ls.weight_source is None
    )


class _References:
    """Layer references as the vendor resolves them: names by lookup, numbers minus the
    skipped YAML layers, `stop` as -1, the data buffer's name as DATA_BUFFER."""

    def __init__(self, spec: NetworkSpec, specs: list[LayerSpec], skip: int) -> None:
        self.spec = spec
        self.skip = skip
        self.names = {ls.name.lower(): i for i, ls in enumerate(specs) if ls.name}
        self.buffers = {b.name.lower() for b in spec.data_buffer if b.name}

    def resolve(self, ls: LayerSpec, key: str, ref: int | str) -> int:
        if isinstance(ref, str):
            lowered = ref.lower()
            if lowered == "stop":
                return -1
            if lowered in ("input", "in"):
                return NETWORK_INPUT
            if lowered in self.names:
                return self.names[lowered]
            if lowered in self.buffers and key == "in_sequences":
                return DATA_BUFFER
            known = ", ".join(f"`{n}`" for n in self.names) or "none"
            raise _error(self.spec, ls, key, f"no layer is named `{ref}` (named layers: {known}).")
        if ref == NETWORK_INPUT:
            return NETWORK_INPUT
        return int(ref) - self.skip


# --------------------------------------------------------------------------------------------
# Per-layer configuration with the vendor's defaults


def _shared_default_pad(specs: list[LayerSpec]) -> tuple[int, int]:
    """The padding of every convolution that does not set `pad`.

    The vendor's YAML reader gives all such layers one shared [1, 1] list and zeroes the
    second element of a Conv1d layer's padding in place, so a single Conv1d layer without `pad`
    turns the default of every other layer into [1, 0] too (still so in the newest vendor
    sources we could read). The corpus has no case that decides it either way.
    """
    for ls in specs:
        if ls.operation == "conv1d" and ls.pad is None:
            return (1, 0)
    return (1, 1)


def _configure_layer(
    spec: NetworkSpec, ls: LayerSpec, index: int, default_pad: tuple[int, int], opts: BuildOptions
) -> Layer:
    operation = ls.operation or "conv2d"
    is_1d = operation == "conv1d"
    if operation == "linear" and ls.kernel_size is not None:
        raise _error(
            spec,
            ls,
            "kernel_size",
            "a linear layer has no kernel to configure; remove `kernel_size` (the vendor "
            "refuses it even as 1x1).",
        )
    if operation == "none" and ls.kernel_size not in (None, (1, 1)):
        raise _error(spec, ls, "kernel_size", "a passthrough layer has no kernel; remove it.")
    if operation in ("none", "linear"):
        kernel = (1, 1)
    elif ls.kernel_size is not None:
        kernel = ls.kernel_size
    else:
        kernel = (9, 1) if is_1d else (3, 3)

    # `op: none`, `linear` and the element-wise operations set their own zero padding.
    own_zero_pad = operation in ("none", "linear")
    pad = ls.pad if ls.pad is not None else ((0, 0) if own_zero_pad else default_pad)
    pool_type = "max" if ls.max_pool is not None else "avg" if ls.avg_pool is not None else None
    pool = ls.max_pool or ls.avg_pool or (1, 1)
    pool_stride = ls.pool_stride or (1, 1)
    stride = ls.stride or (1, 1)
    dilation = ls.dilation or (1, 1)
    pool_dilation = ls.pool_dilation or (1, 1)
    output_padding = ls.output_padding or ((1, 1) if operation == "convtranspose2d" else (0, 0))
    if is_1d:
        pad, pool, pool_stride = (pad[0], 0), (pool[0], 1), (pool_stride[0], 1)
        stride, dilation, pool_dilation = (stride[0], 1), (dilation[0], 1), (pool_dilation[0], 1)
    if operation == "convtranspose2d":
        stride = (2, 2)
    operands = ls.operands or (2 if ls.eltwise else 1)
    quant = ls.quantization
    activation = None if ls.activation in (None, "none") else ls.activation
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
        pool_dilation=tuple(pool_dilation),
        kernel_size=tuple(kernel),
        stride=tuple(stride),
        pad=tuple(pad),
        dilation=tuple(dilation),
        output_padding=tuple(output_padding),
        groups=ls.groups or 1,
        activation=None if opts.ignore_activation else activation,
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


def _takes_no_weights(layer: Layer) -> bool:
    return layer.operation == "none" or bool(layer.spec.bypass)


# --------------------------------------------------------------------------------------------
# Weights and biases


def _fls(value: int) -> int:
    """Index of the most significant set bit (-1 for 0)."""
    return int(value).bit_length() - 1


@dataclass
class _Params:
    """One weight array as the vendor keeps it, with what it derived from the array."""

    weight: np.ndarray
    in_channels: int
    out_channels: int
    flat_2d_linear: bool = False  # a checkpoint Linear: the vendor stores it as (1, out, in)


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

        raise _error(
            spec,
            layer.spec,
            "kernel_size",
            f"the YAML configures a {show(layer.kernel_size)} kernel but {source} holds "
            f"{show(found)} kernels (weights shaped {tuple(weight.shape)}).",
        )


def _checkpoint_params(
    spec: NetworkSpec, layers: list[Layer], sources: list[WeightLayer], opts: BuildOptions
) -> tuple[list[_Params], list[np.ndarray | None], dict[int, int]]:
    """Weights, biases and total shifts of the layers that read the checkpoint, in order."""
    takers = [x for x in layers if not _takes_no_weights(x) and x.spec.weight_source is None]
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
    params: list[_Params] = []
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
            raise _error(spec, ls, "quantization", f"{source.source}: {err.message}") from None
        layer.binary, layer.quantization = binary, bits
        weight = source.weight.astype(np.int64)
        if layer.operation == "convtranspose2d":
            weight = np.flip(weight, axis=(2, 3)).swapaxes(0, 1)
        _check_kernel(spec, layer, weight, source.source)
        in_ch, out_ch = _channels_of(layer, weight)
        params.append(_Params(weight, in_ch, out_ch, flat_2d_linear=weight.ndim == 2))
        bias = source.bias
        if layer.index in opts.no_bias:
            bias = None
        biases.append(None if bias is None else np.asarray(bias, dtype=np.int64))
        shift = ls.output_shift if ls.output_shift is not None else (source.output_shift or 0)
        shifts[layer.index] = int(shift) + 8 - layer.quantization
    return params, biases, shifts


def _synthetic_takers(layers: list[Layer]) -> list[Layer]:
    """The layers that consume synthetic weight arrays, in the vendor's order.

    The vendor skips passthrough layers, but tests `bypass` on the layer numbered by how many
    arrays were consumed so far rather than on the layer itself; reproduced because it decides
    which array lands where. `weight_source` does not exempt a layer here.
    """
    takers: list[Layer] = []
    seq = 0
    while seq < len(layers):
        while seq < len(layers) and (
            layers[seq].operation == "none"
            or (len(takers) < len(layers) and layers[len(takers)].spec.bypass)
        ):
            seq += 1
        if seq >= len(layers):
            break
        takers.append(layers[seq])
        seq += 1
    return takers


def _synthetic_params(
    spec: NetworkSpec, layers: list[Layer], arrays: list[np.ndarray], source: str
) -> tuple[list[_Params], dict[int, int]]:
    """Synthetic test weights: requantized to the YAML's width by shifting right."""
    takers = _synthetic_takers(layers)
    if len(arrays) < len(takers):
        raise _error(
            spec,
            takers[len(arrays)].spec,
            None,
            f"{source} holds weights for {len(arrays)} layers, the YAML needs {len(takers)}.",
        )
    params: list[_Params] = []
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
        in_ch, out_ch = _channels_of(layer, weight)
        params.append(_Params(weight, in_ch, out_ch))
        shifts[layer.index] = (ls.output_shift or 0) + 8 - layer.quantization
    return params, shifts


def _synthetic_biases(
    layers: list[Layer], arrays: list[np.ndarray], no_bias: Sequence[int]
) -> list[np.ndarray | None]:
    """One array per layer with weights (not passthrough, not bypass), stored compactly.

    A layer in `--no-bias` still uses up its array. The list is one entry per YAML layer,
    filled from the front; the vendor shifts it into place later (see `_line_up`).
    """
    biases: list[np.ndarray | None] = [None] * len(layers)
    remaining = iter(arrays)
    seq = 0
    for layer in layers:
        if _takes_no_weights(layer):
            continue
        array = next(remaining, None)
        if array is None:
            break
        if layer.index not in no_bias:
            biases[seq] = np.asarray(array, dtype=np.int64)
        seq += 1
    return biases


def _line_up(
    spec: NetworkSpec,
    layers: list[Layer],
    params: list[_Params],
    biases: list[np.ndarray | None],
    shifts: dict[int, int],
    refs: _References,
) -> tuple[list[_Params | None], list[np.ndarray | None]]:
    """The vendor's per-layer weight and bias lists.

    When there are fewer weight arrays than YAML layers, the vendor walks the layers and
    inserts an empty entry at each passthrough/bypass layer and a copy of the source layer's
    entry at each `weight_source` layer, into lists that are only lined up up to that point.
    A bypass layer gets no bias entry inserted, so later layers take the next layer's bias.
    """
    weights: list[_Params | None] = list(params)
    bias_list = list(biases)
    if len(layers) > len(weights):
        for layer in layers:
            ll = layer.index
            if _takes_no_weights(layer):
                weights.insert(ll, None)
                if not layer.spec.bypass:
                    bias_list.insert(ll, None)
            elif layer.spec.weight_source is not None:
                val = refs.resolve(layer.spec, "weight_source", layer.spec.weight_source)
                if not -len(weights) <= val < len(weights):
                    raise _error(
                        spec,
                        layer.spec,
                        "weight_source",
                        f"refers to layer {val}, but the network has layers 0 to "
                        f"{len(layers) - 1}.",
                    )
                weights.insert(ll, weights[val])
                bias_list.insert(
                    ll, bias_list[val] if -len(bias_list) <= val < len(bias_list) else None
                )
                shifts[ll] = shifts.get(val, 0)
                layer.weight_source = val
    if len(weights) != len(layers):
        raise EdgesynthError(
            f"the YAML configures {len(layers)} layers but the weights cover {len(weights)} "
            "(layers with weights, plus passthrough/bypass layers and `weight_source` copies); "
            "the vendor refuses such a network.",
            file=spec.path,
        )
    return weights, bias_list


def _zero_every_seventh(spec: NetworkSpec, layers: list[Layer], weights: list) -> None:
    """--zero-sram/--pretend-zero-sram clear every 7th kernel of every layer's weights.

    The vendor keeps each layer's kernels as one array of (out x in) kernels and clears entries
    0, 7, 14, ... of it; a checkpoint Linear layer is one (1, out, in) block, so it is cleared
    entirely. Layers without weights make the vendor tool fail.
    """
    for layer, entry in zip(layers, weights, strict=True):
        if entry is None:
            raise _error(
                spec,
                layer.spec,
                None,
                "--zero-sram/--pretend-zero-sram: this layer has no weights "
                "(passthrough, element-wise or bypass), which the vendor tool cannot handle "
                "with these options.",
            )
    done: set[int] = set()
    for entry in weights:
        if id(entry) in done:
            continue
        done.add(id(entry))
        w = entry.weight
        if entry.flat_2d_linear:
            entry.weight = np.zeros_like(w)
            continue
        flat = w.reshape(-1, *w.shape[2:]).copy() if w.ndim > 2 else w.copy()
        flat[::7] = 0
        entry.weight = flat.reshape(w.shape)


def _attach_weights(
    spec: NetworkSpec,
    layers: list[Layer],
    weights: list[_Params | None],
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
            raise _error(
                spec,
                layer.spec,
                "weight_source",
                "this layer's weights come from a layer without weights (passthrough, "
                "element-wise or bypass).",
            )
        else:
            layer.weights = entry.weight
            layer.output_shift = shifts.get(ll, layer.spec.output_shift or 0)
        # The vendor indexes the bias list by layer even for bypass layers (see `_line_up`).
        if layer.operation != "none":
            if ll >= len(biases):
                raise _error(
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


# --------------------------------------------------------------------------------------------
# Sequence, channels and shapes


def _sequence(
    spec: NetworkSpec, layers: list[Layer], opts: BuildOptions, refs: _References
) -> list[int]:
    """The `next_sequence` walk from --start-layer; --stop-after ends it early."""
    count = len(layers)
    for layer in layers:
        ls = layer.spec
        if ls.next_sequence is None:
            layer.next_sequence = layer.index + 1 if layer.index + 1 < count else -1
        else:
            layer.next_sequence = refs.resolve(ls, "next_sequence", ls.next_sequence)
            if layer.next_sequence > count:
                layer.next_sequence = -1
        if ls.in_sequences is not None:
            layer.in_sequences = [refs.resolve(ls, "in_sequences", r) for r in ls.in_sequences]
            for ref in layer.in_sequences:
                if ref not in (NETWORK_INPUT, DATA_BUFFER) and not 0 <= ref < count:
                    raise _error(
                        spec,
                        ls,
                        "in_sequences",
                        f"refers to layer {ref}, but the network has layers 0 to {count - 1} "
                        "(and -1 for the input).",
                    )
            if DATA_BUFFER in layer.in_sequences and len(layer.in_sequences) > 1:
                raise _error(
                    spec, ls, "in_sequences", "the data buffer must be a layer's only input."
                )
    order: list[int] = []
    index = opts.start_layer
    if not 0 <= index < count:
        raise EdgesynthError(
            f"--start-layer {index} is outside the network's layers 0 to {count - 1}."
        )
    while 0 <= index < count:
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


def _simulated_order(
    spec: NetworkSpec, layers: list[Layer], order: list[int], refs: _References
) -> list[int]:
    """The layers the known-answer simulation runs: `simulated_sequence` overrides the
    `next_sequence` step; layers past the last one the walk reached do not exist."""
    limit = max(order) + 1
    sim_order: list[int] = []
    index = order[0]
    while index < limit:
        if index in sim_order:
            raise _error(
                spec,
                layers[index].spec,
                "simulated_sequence",
                f"the simulated layer sequence loops back to layer {index}.",
            )
        if index not in order:
            raise _error(
                spec,
                layers[index].spec,
                "simulated_sequence",
                "the simulation reaches this layer, but the layer sequence (`next_sequence`) "
                "does not, so its input size is unknown.",
            )
        sim_order.append(index)
        ls = layers[index].spec
        if ls.simulated_sequence is None:
            index = layers[index].next_sequence
        else:
            index = refs.resolve(ls, "simulated_sequence", ls.simulated_sequence)
        if index == -1:
            break
    return sim_order


def _channels(
    spec: NetworkSpec,
    layers: list[Layer],
    order: list[int],
    in_ch: list[int],
    out_ch: list[int],
    sample_channels: int,
) -> None:
    """Channel counts as the vendor derives them along the layer sequence.

    `in_ch`/`out_ch` start as the vendor's lists from the weights (0 for layers without) and
    are indexed like the vendor's lists: a layer that is not layer 0 but has no predecessor
    (--start-layer) takes the last list entry, and references to layers not reached yet see
    the value from the weights.
    """
    previous = -1
    for index in order:
        layer = layers[index]
        ls = layer.spec
        if layer.in_sequences:
            sources = layer.in_sequences
            sizes = [sample_channels if i == NETWORK_INPUT else out_ch[i] for i in sources]
            in_ch[index] = sum(sizes) if layer.eltwise is None else sizes[0]
        if in_ch[index] <= 0:
            if index == 0:
                in_ch[index] = sample_channels // layers[0].operands
            else:
                in_ch[index] = out_ch[previous]
        if ls.in_channels is not None:
            in_ch[index] = ls.in_channels
        if out_ch[index] <= 0:
            out_ch[index] = in_ch[index]
        if ls.out_channels is not None:
            out_ch[index] = ls.out_channels
        if in_ch[index] <= 0:
            raise _error(
                spec, ls, "in_channels", "the number of input channels is unknown; set it."
            )
        layer.in_channels = in_ch[index]
        layer.out_channels = out_ch[index]
        previous = index


def _input_dim(
    spec: NetworkSpec,
    layers: list[Layer],
    layer: Layer,
    previous: int,
    out_dims: list[tuple[int, int]],
    first_dims: tuple[int, int] | None,
) -> tuple[int, int]:
    ls = layer.spec
    pixels = 0
    if layer.in_sequences:
        sources = layer.in_sequences

        def dims_of(i: int) -> tuple[int, int] | None:
            return first_dims if i == NETWORK_INPUT else out_dims[i]

        dim = dims_of(sources[0])
        for source in sources:
            odim = dims_of(source)
            if odim is None:
                raise _error(
                    spec,
                    ls,
                    "in_sequences",
                    "reads the network input, which is not this "
                    "run's input (--start-layer); its size is unknown.",
                )
            if odim != dim and ls.in_dim is None:
                raise _error(
                    spec,
                    ls,
                    "in_sequences",
                    "cannot concatenate outputs of different sizes without `in_dim`: "
                    + ", ".join(
                        f"layer {s}: {d[0]}x{d[1]}"
                        for s, d in zip(sources, map(dims_of, sources), strict=True)
                        if d is not None
                    ),
                )
            pixels += odim[0] * odim[1]
        auto = dim
    else:
        auto = out_dims[previous]
    if ls.in_dim is None:
        assert auto is not None
        return auto
    top, bottom = layer.in_crop
    pixel_count = (ls.in_dim[0] + top + bottom) * ls.in_dim[1]
    if pixels > 0 and pixel_count != pixels:
        raise _error(
            spec,
            ls,
            "in_dim",
            f"`in_dim` {ls.in_dim[0]}x{ls.in_dim[1]}"
            + (f" plus `in_crop` {top}+{bottom} rows" if top or bottom else "")
            + f" holds {pixel_count} pixels, but the layers in `in_sequences` deliver {pixels}.",
        )
    return tuple(ls.in_dim)


def _output_dim(layer: Layer, pooled: tuple[int, int], two_d: bool) -> tuple[int, int]:
    kh, kw = layer.kernel_size
    if not two_d:
        return (
            (pooled[0] - layer.dilation[0] * (kh - 1) - 1 + 2 * layer.pad[0]) // layer.stride[0]
            + 1,
            1,
        )
    if layer.operation == "convtranspose2d":
        return tuple(
            (pooled[a] - 1) * layer.stride[a]
            - 2 * layer.pad[a]
            + layer.dilation[a] * ((kh, kw)[a] - 1)
            + layer.output_padding[a]
            + 1
            for a in (0, 1)
        )
    return tuple(
        (pooled[a] - layer.dilation[a] * ((kh, kw)[a] - 1) - 1 + 2 * layer.pad[a])
        // layer.stride[a]
        + 1
        for a in (0, 1)
    )


def _dimensions(
    spec: NetworkSpec, layers: list[Layer], order: list[int], sample_dim: tuple[int, int]
) -> None:
    out_dims: list[tuple[int, int]] = [(0, 0)] * len(layers)
    # The vendor's "size of the network input" is layer 0's; with --start-layer it is unset.
    first_dims = sample_dim if order[0] == 0 else None
    previous = -1
    for index in order:
        layer = layers[index]
        ls = layer.spec
        top, bottom = layer.in_crop
        if top and not bottom:
            raise _error(
                spec,
                ls,
                "in_crop",
                f"`in_crop: [{top}, 0]`: the vendor tool keeps no data at all when only the "
                "start is cropped (its slice runs to -0); crop at least one row at the end.",
            )
        if (top or bottom) and ls.in_dim is None:
            raise _error(
                spec,
                ls,
                "in_crop",
                "`in_crop` needs `in_dim`: the size of the data left after cropping.",
            )
        if previous == -1:
            in_dim = tuple(ls.in_dim) if ls.in_dim is not None else sample_dim
        else:
            in_dim = _input_dim(spec, layers, layer, previous, out_dims, first_dims)
        layer.in_dim = in_dim
        two_d = not layer.is_1d and (layer.operation != "none" or in_dim[1] != 1)
        if not two_d:
            # 1D data (Conv1d, or a passthrough of 1D data): pooling runs along the length.
            layer.pool = (layer.pool[0], 1)
        pooled = (
            pooled_size(in_dim[0], layer.pool[0], layer.pool_stride[0], layer.pool_dilation[0]),
            pooled_size(in_dim[1], layer.pool[1], layer.pool_stride[1], layer.pool_dilation[1])
            if two_d
            else 1,
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
        out = _output_dim(layer, pooled, two_d)
        if layer.flatten and two_d:
            out = (1, 1)
            layer.in_channels //= pooled[0] * pooled[1]
            if layer.in_channels <= 0:
                raise _error(
                    spec,
                    ls,
                    "flatten",
                    f"flattening {pooled[0]}x{pooled[1]} pixels leaves no input channels.",
                )
        if min(out) <= 0:
            raise _error(
                spec,
                ls,
                "pad",
                f"the output of this layer would be empty ({out[0]}x{out[1]}) for a "
                f"{pooled[0]}x{pooled[1]} input.",
            )
        layer.out_dim = out
        out_dims[index] = out
        previous = index


def _check_buffers(spec: NetworkSpec, layers: list[Layer]) -> None:
    for layer in layers:
        ls = layer.spec
        uses_buffer = DATA_BUFFER in (layer.in_sequences or [])
        if (uses_buffer or layer.buffer_shift or layer.buffer_insert) and not spec.data_buffer:
            raise _error(spec, ls, "in_sequences", "no global `data_buffer` is configured.")
        if layer.buffer_shift and layer.operation != "none":
            raise _error(
                spec, ls, "buffer_shift", "`buffer_shift` can only be used in a passthrough layer."
            )
        if layer.buffer_shift and not ls.in_sequences:
            raise _error(
                spec,
                ls,
                "buffer_shift",
                "`buffer_shift` needs the buffer's name in `in_sequences`.",
            )
        if layer.buffer_insert and ls.out_offset is None:
            raise _error(spec, ls, "buffer_insert", "`buffer_insert` needs `out_offset`.")
        if uses_buffer:
            missing = [
                k
                for k in ("in_offset", "out_offset", "in_dim", "in_channels")
                if getattr(ls, k) is None
            ]
            if missing:
                raise _error(
                    spec,
                    ls,
                    "in_sequences",
                    "a layer that reads the data buffer needs "
                    + ", ".join(f"`{k}`" for k in missing)
                    + ".",
                )


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
    specs = yaml_layers(spec, opts.skip_yaml_layers)
    if not specs:
        raise EdgesynthError("the network has no layers.", file=spec.path)
    refs = _References(spec, specs, opts.skip_yaml_layers)
    default_pad = _shared_default_pad(specs)
    layers = [_configure_layer(spec, ls, i, default_pad, opts) for i, ls in enumerate(specs)]

    if checkpoint_layers is not None:
        params, biases, shifts = _checkpoint_params(spec, layers, checkpoint_layers, opts)
    else:
        arrays, source = synthetic_weights if synthetic_weights is not None else ([], "")
        params, shifts = _synthetic_params(spec, layers, arrays, source)
        biases = _synthetic_biases(layers, synthetic_bias or [], opts.no_bias)
    weights, biases = _line_up(spec, layers, params, biases, shifts, refs)
    for layer in layers:
        if layer.spec.weight_source is not None and layer.weight_source is None:
            layer.weight_source = refs.resolve(
                layer.spec, "weight_source", layer.spec.weight_source
            )
    if opts.zero_sram:
        _zero_every_seventh(spec, layers, weights)
    in_ch, out_ch = _attach_weights(spec, layers, weights, biases, shifts)

    if sample.ndim < 3:
        sample = sample[..., None]
    order = _sequence(spec, layers, opts, refs)
    _check_buffers(spec, layers)
    _channels(spec, layers, order, in_ch, out_ch, sample.shape[0])
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
        sim_order=_simulated_order(spec, layers, order, refs),
        output_layer=final,
    )
