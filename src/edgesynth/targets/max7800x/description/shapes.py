"""Channel counts and the input, pooled and output size of every layer along the sequence."""

from __future__ import annotations

from edgesynth.sim.ops import pooled_size
from edgesynth.targets.max7800x.description.layer_config import layer_error
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer
from edgesynth.targets.max7800x.description.spec import NetworkSpec


def infer_channels(
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
            raise layer_error(
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
                raise layer_error(
                    spec,
                    ls,
                    "in_sequences",
                    "reads the network input, which is not this "
                    "run's input (--start-layer); its size is unknown.",
                )
            if odim != dim and ls.in_dim is None:
                raise layer_error(
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
        raise layer_error(
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


def infer_dimensions(
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
            raise layer_error(
                spec,
                ls,
                "in_crop",
                f"`in_crop: [{top}, 0]`: the vendor tool keeps no data at all when only the "
                "start is cropped (its slice runs to -0); crop at least one row at the end.",
            )
        if (top or bottom) and ls.in_dim is None:
            raise layer_error(
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
            raise layer_error(
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
                raise layer_error(
                    spec,
                    ls,
                    "flatten",
                    f"flattening {pooled[0]}x{pooled[1]} pixels leaves no input channels.",
                )
        if min(out) <= 0:
            raise layer_error(
                spec,
                ls,
                "pad",
                f"the output of this layer would be empty ({out[0]}x{out[1]}) for a "
                f"{pooled[0]}x{pooled[1]} input.",
            )
        layer.out_dim = out
        out_dims[index] = out
        previous = index
