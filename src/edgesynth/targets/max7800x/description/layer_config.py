"""Each YAML layer's configuration as a `Layer`, with the vendor's per-operation defaults.

Padding 1 for convolutions (shared between layers, see `shared_default_pad`), 3x3 kernels (9
for Conv1d), 1x1 for passthrough and linear layers, unit strides and pools, and the YAML keys
copied over. Also the error that names a YAML layer and key, used by the whole build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.description.spec import LayerSpec, NetworkSpec

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.description.assemble_options import BuildOptions


def layer_error(
    spec: NetworkSpec, layer: LayerSpec, key: str | None, message: str
) -> EdgesynthError:
    line = layer.lines.get(key, layer.line) if key else layer.line
    return EdgesynthError(
        message, file=spec.path, line=line, layer=layer.index, layer_name=layer.name, key=key
    )


def shared_default_pad(specs: list[LayerSpec]) -> tuple[int, int]:
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


def configure_layer(
    spec: NetworkSpec, ls: LayerSpec, index: int, default_pad: tuple[int, int], opts: BuildOptions
) -> Layer:
    operation = ls.operation or "conv2d"
    is_1d = operation == "conv1d"
    if operation == "linear" and ls.kernel_size is not None:
        raise layer_error(
            spec,
            ls,
            "kernel_size",
            "a linear layer has no kernel to configure; remove `kernel_size` (the vendor "
            "refuses it even as 1x1).",
        )
    if operation == "none" and ls.kernel_size not in (None, (1, 1)):
        raise layer_error(spec, ls, "kernel_size", "a passthrough layer has no kernel; remove it.")
    if operation in ("none", "linear"):
        kernel = (1, 1)
    elif ls.kernel_size is not None:
        kernel = ls.kernel_size
    else:
        device = opts.device
        kernel = (device.max_kernel_1d, 1) if is_1d else (device.max_kernel_2d,) * 2

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
