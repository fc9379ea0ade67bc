"""Refuse what Gati cannot run, naming the ONNX node and the reason.

Runs on the fused layer chain, before calibration, so a model is refused quickly. Field
limits come from the instruction tables in `isa.py`; array limits from `device.py`.
"""

from __future__ import annotations

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.targets.gati import device, isa
from edgesynth.targets.gati.chain import FusedLayer, LayerChain, PoolSpec
from edgesynth.targets.gati.concat import concat_buffers


def _err(graph: LayerChain, node: str, reason: str) -> EdgesynthError:
    return EdgesynthError(f"{graph.label(node)}: {reason}", file=graph.path or None)


def _fits(graph: LayerChain, node: str, fmt: isa.Format, name: str, value: int, what: str) -> None:
    f = fmt.by_name[name]
    if not 0 <= value <= f.max:
        raise _err(
            graph,
            node,
            f"{what} = {value} overflows {fmt.name}.{name} ({f.width} bits, at most {f.max})",
        )


def pad_sides(
    graph: LayerChain, node: str, pads: tuple[int, int, int, int], what: str
) -> tuple[int, int]:
    """(amount, PadSides bits) for ONNX pads (top, left, bottom, right); unequal amounts fail."""
    top, left, bottom, right = pads
    amounts = {p for p in pads if p}
    if len(amounts) > 1:
        raise _err(
            graph,
            node,
            f"{what} pads (top, left, bottom, right) = {pads} differ; Gati pads every flagged "
            "side by one amount",
        )
    amount = amounts.pop() if amounts else 0
    sides = (
        (isa.PAD_TOP if top else 0)
        | (isa.PAD_LEFT if left else 0)
        | (isa.PAD_BOTTOM if bottom else 0)
        | (isa.PAD_RIGHT if right else 0)
    )
    return amount, sides


def _nonnegative_input(graph: LayerChain, index: int) -> bool:
    """Can the values entering layer `index`'s pooling never be negative?"""
    layer = graph.layers[index]
    if layer.activation in ("relu", "sigmoid"):
        return True
    if layer.activation is not None or layer.kind != "none":
        return False
    return all(j >= 0 and _nonnegative_input(graph, j) for j in graph.sources_of(index)[0])


def check_layer(graph: LayerChain, index: int, warnings: list[str] | None = None) -> None:
    """Raise on the first rule layer `index` breaks. With `warnings`, a max pool over values
    that can be negative is lowered anyway and reported there (integer graphs)."""
    layer = graph.layers[index]
    if layer.kind == "conv":
        _check_conv(graph, layer)
    elif layer.kind == "linear":
        _check_linear(graph, layer)
    elif layer.kind == "eltwise":
        _check_eltwise(graph, layer)
    else:
        _check_identity(graph, layer)
    if layer.pool is not None:
        _check_pool(graph, index, layer, layer.pool, warnings)


def _check_map(graph: LayerChain, node: str, shape: tuple[int, ...], what: str) -> None:
    c, h, w = shape
    _fits(graph, node, isa.CONV, "IC" if what == "input" else "KN", c, f"{what} channels")
    _fits(graph, node, isa.CONV, "IH" if what == "input" else "OH", h, f"{what} height")
    _fits(graph, node, isa.CONV, "IW" if what == "input" else "OW", w, f"{what} width")


def _check_conv(graph: LayerChain, layer: FusedLayer) -> None:
    node = layer.name
    assert layer.weight is not None
    kh, kw = layer.weight.shape[2:]
    if layer.group != 1:
        raise _err(
            graph,
            node,
            f"grouped convolution (group={layer.group}) is not supported: each kernel "
            "iteration sums over all input channels",
        )
    if layer.dilations != (1, 1):
        raise _err(graph, node, f"dilation {layer.dilations} is not supported")
    if kh * kw > device.ENGINE_ROWS:
        raise _err(
            graph,
            node,
            f"kernel {kh}x{kw} has {kh * kw} taps, larger than the engine: a compute "
            f"engine column holds {device.ENGINE_ROWS} weights (9x8 processing elements)",
        )
    _fits(graph, node, isa.CONV, "KH", kh, "kernel height")
    _fits(graph, node, isa.CONV, "KW", kw, "kernel width")
    sh, sw = layer.strides
    if sh != sw:
        raise _err(graph, node, f"strides {layer.strides} differ; CONV has one Stride field")
    _fits(graph, node, isa.CONV, "Stride", sh, "stride")
    amount, _ = pad_sides(graph, node, layer.pads, "convolution")
    _fits(graph, node, isa.CONV, "Pad", amount, "padding")
    _check_map(graph, node, layer.in_shape, "input")
    _check_map(graph, node, layer.conv_shape, "output")


def _check_linear(graph: LayerChain, layer: FusedLayer) -> None:
    node = layer.name
    assert layer.weight is not None
    m, n = layer.weight.shape
    _fits(graph, node, isa.FC, "WeightRows", n, "input features")
    _fits(graph, node, isa.FC, "WeightCols", m, "output features")
    if layer.flatten:
        _, h, w = layer.in_map
        _fits(graph, node, isa.FC, "ImageDim", h * w, "flattened map height x width")


def _check_eltwise(graph: LayerChain, layer: FusedLayer) -> None:
    c, h, w = layer.in_shape
    for name, value, what in (("IC", c, "channels"), ("IH", h, "height"), ("IW", w, "width")):
        _fits(graph, layer.name, isa.ELTWISE, name, value, what)


def _check_identity(graph: LayerChain, layer: FusedLayer) -> None:
    node = layer.name
    if len(layer.in_shape) == 3:
        _check_map(graph, node, layer.in_shape, "input")
    else:
        _fits(graph, node, isa.FC, "WeightRows", layer.in_shape[0], "features")


def _check_pool(
    graph: LayerChain,
    index: int,
    layer: FusedLayer,
    pool: PoolSpec,
    warnings: list[str] | None = None,
) -> None:
    node = pool.node
    kh, kw = pool.kernel
    _fits(graph, node, isa.TAIL, "PoolHeight", kh, "pool height")
    _fits(graph, node, isa.TAIL, "PoolWidth", kw, "pool width")
    if pool.type == "global_avg":
        _check_map(graph, node, layer.conv_shape, "output")
        return
    sh, sw = pool.strides
    if sh != sw:
        raise _err(graph, node, f"pool strides {pool.strides} differ; TailBlock has one PoolStride")
    _fits(graph, node, isa.TAIL, "PoolStride", sh, "pool stride")
    amount, _ = pad_sides(graph, node, pool.pads, "pooling")
    _fits(graph, node, isa.TAIL, "PoolPadding", amount, "pool padding")
    if pool.type == "max" and not _nonnegative_input(graph, index):
        if warnings is not None:
            warnings.append(
                f"{graph.label(node)}: max pooling over values that can be negative: Gati's max "
                "register starts from 0, so negative maxima become 0"
            )
        else:
            raise _err(
                graph,
                node,
                "MaxPool over values that can be negative: Gati's max action starts from 0, so "
                "it needs a Relu (or Sigmoid) before the pooling",
            )
    if pool.type == "avg":
        if any(pool.pads) and not pool.count_include_pad:
            raise _err(
                graph,
                node,
                "AveragePool with padding and count_include_pad=0: the pairwise-average tree "
                "cannot leave padded elements out of the average",
            )
        (h, w), (oh, ow) = pool.in_hw, pool.out_hw
        if (oh - 1) * sh + kh > h + pool.pads[0] + pool.pads[2] or (
            (ow - 1) * sw + kw > w + pool.pads[1] + pool.pads[3]
        ):
            raise _err(
                graph,
                node,
                "AveragePool with ceil_mode windows that run past the input: the pairwise-"
                "average tree has no partial windows",
            )


def check_graph(graph: LayerChain) -> None:
    """Raise on the first thing Gati cannot run."""
    _fits(graph, graph.layers[0].name, isa.START, "TotalLayers", len(graph.layers), "layers")
    concat_buffers(graph)
    for i in range(len(graph.layers)):
        check_layer(graph, i)


def check_all(graph: LayerChain, warnings: list[list[str]] | None = None) -> None:
    """Raise `MultipleErrors` naming everything Gati cannot run (every layer checked). With
    `warnings` (one list per layer), what `check_layer` tolerates is reported there."""
    errors: list[EdgesynthError] = []
    try:
        _fits(graph, graph.layers[0].name, isa.START, "TotalLayers", len(graph.layers), "layers")
    except EdgesynthError as err:
        errors.append(err)
    try:
        concat_buffers(graph)
    except EdgesynthError as err:
        errors.append(err)
    for i in range(len(graph.layers)):
        try:
            check_layer(graph, i, warnings[i] if warnings is not None else None)
        except EdgesynthError as err:
            errors.append(err)
    if errors:
        raise MultipleErrors(errors)
