"""Derived quantities the hardware works with (shared with the planner and the code generator).

Passes, processors per pass, bytes per data-memory instance, kernel words per processor, bias
bytes, and a layer's dimensions as the hardware runs them (its kernel and padding, which
depend on the layers around it, are in `hw_geometry`).
"""

from __future__ import annotations

from edgesynth.targets.max7800x.description.network import Layer

# passes and processors_per_pass are device arithmetic (device.py); the rules use them from here
from edgesynth.targets.max7800x.device import Device, passes, processors_per_pass


def popcount(value: int) -> int:
    return bin(value).count("1")


def ffs(value: int) -> int:
    """Index of the lowest set bit (-1 for 0)."""
    return (value & -value).bit_length() - 1


def fls(value: int) -> int:
    """Index of the highest set bit (-1 for 0)."""
    return value.bit_length() - 1


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def memory_instances(processor_map: int, shared: int = 4) -> int:
    """Bit map of the data-memory instances the processors in `processor_map` read from."""
    result = 0
    p = 0
    while processor_map >> p:
        if processor_map >> p & 1:
            result |= 1 << p // shared
        p += 1
    return result


def input_passes(layer: Layer, max_proc: int) -> int:
    return passes(layer.in_channels, max_proc)


def output_passes(layer: Layer, max_proc: int) -> int:
    return passes(layer.out_channels, max_proc)


def input_processors_needed(layer: Layer, max_proc: int, shared: int) -> int:
    return processors_per_pass(layer.in_channels, max_proc, shared)


def output_processors_needed(layer: Layer, max_proc: int, shared: int) -> int:
    return processors_per_pass(layer.out_channels, max_proc, shared)


def dilated_conv1d_mode(layer: Layer, device: Device) -> str:
    """How the hardware runs a conv1d layer with `dilation` > 1.

    "none": not dilated; "stretch": the kernel is stretched with zeros (span below 9);
    "conv2d": the data is folded into `dilation` columns and run as a 3x3 conv2d (kernel length
    up to 3); "unsupported": neither works.
    """
    if not layer.is_1d or layer.dilation[0] <= 1:
        return "none"
    k, d = layer.kernel_size[0], layer.dilation[0]
    if (k - 1) * d < device.max_dilated_1d_span:
        return "stretch"
    if k <= device.max_dilation_1d_kernel:
        return "conv2d"
    return "unsupported"


def hw_input_dim(layer: Layer, device: Device) -> tuple[int, int]:
    """Input rows x columns as the hardware reads them."""
    if dilated_conv1d_mode(layer, device) == "conv2d":
        d = layer.dilation[0]
        return (ceil_div(layer.in_dim[0], d), d)
    return layer.in_dim


def output_overhang(layer: Layer, device: Device) -> int:
    """Extra output pixels written by a dilated conv1d folded onto 3x3 hardware."""
    if dilated_conv1d_mode(layer, device) != "conv2d":
        return 0
    rows, cols = hw_input_dim(layer, device)
    return rows * cols - layer.out_dim[0]


def output_skip_bytes(layer: Layer, device: Device) -> int:
    """Bytes before `out_offset` a dilated conv1d (kernel 3) folded onto 3x3 hardware writes."""
    if dilated_conv1d_mode(layer, device) == "conv2d" and layer.kernel_size[0] == 3:
        return 4 * layer.dilation[0] * output_passes(layer, device.processors)
    return 0


def output_pixels(layer: Layer, device: Device) -> int:
    """Pixels the layer writes (per output pass), with the overhang of a folded dilated conv1d."""
    return layer.out_dim[0] * layer.out_dim[1] + output_overhang(layer, device)


def output_bytes(layer: Layer, device: Device, max_proc: int | None = None) -> int:
    """Bytes of one data-memory instance the layer's output occupies from `out_offset`.

    The output is always HWC: one 32-bit word holds 4 channels (8-bit output) or one channel
    (32-bit output), each memory instance serves 4 processors, and every output pass stores
    its own copy of the pixels.
    """
    mp = max_proc or device.processors
    pixels = output_pixels(layer, device)
    return pixels * output_passes(layer, mp) * 4 * layer.output_width // 8


def output_words_per_instance(layer: Layer, device: Device, max_proc: int | None = None) -> int:
    return output_bytes(layer, device, max_proc) // 4


def input_bytes(layer: Layer, max_proc: int) -> int:
    """Bytes of one data-memory instance the layer's input occupies from `in_offset`.

    HWC packs 4 channels per 32-bit word (one word per pixel and pass); CHW gives each channel
    its own memory instance, 4 pixels per word. Element-wise operands are interleaved.
    """
    per_pixel = 1 if layer.data_format == "CHW" else 4
    return (
        layer.in_dim[0]
        * layer.in_dim[1]
        * input_passes(layer, max_proc)
        * layer.operands
        * per_pixel
    )


def input_words_per_instance(layer: Layer, max_proc: int) -> int:
    return ceil_div(input_bytes(layer, max_proc), 4)


def kernel_words(
    layer: Layer,
    output_map: int,
    max_proc: int,
    shared: int,
    quad: bool = False,
    kernel: tuple[int, int] | None = None,
) -> int:
    """Kernel-memory words (72 bits each) the layer needs in every processor it enables.

    `kernel` is the kernel as the hardware runs it (see `hw_kernel`; default: the layer's).
    Kernels for 1-, 2- and 4-bit weights pack 8, 4 and 2 to a byte position; the kernels of
    every output processor from the first (rounded down to its memory instance when there are
    several output passes) to the last are stored, once per input and output pass. `shared`:
    processors per data-memory instance (`Device.processors_sharing_memory`).
    """
    if layer.operation == "none" or layer.spec.bypass or output_map <= 0:
        return 0
    in_exp = input_passes(layer, max_proc)
    out_exp = output_passes(layer, max_proc)
    first = ffs(output_map)
    if out_exp > 1:
        first -= first % shared
    span = 1 + fls(output_map) - first
    if layer.flatten:
        per_kernel = (
            layer.in_channels
            * layer.pooled_dim[0]
            * layer.pooled_dim[1]
            // processors_per_pass(layer.in_channels, max_proc, shared)
        )
        count = span * out_exp - (out_exp * popcount(output_map) - layer.out_channels)
        count *= per_kernel
    elif layer.groups == 1:
        count = span * out_exp * in_exp
    else:
        count = in_exp
    bits = layer.quantization
    qfactor = 8 // bits
    kh, kw = kernel or layer.kernel_size
    ksize = kh * kw
    padding_bits = (count % qfactor) * ksize * (qfactor - 1)
    words = (count * ksize * bits + padding_bits + 71) // 72
    return ceil_div(words, 4) if quad else words


def has_bias(layer: Layer) -> bool:
    return layer.bias is not None and bool((layer.bias != 0).any())


def bias_bytes(layer: Layer, output_map: int, device: Device, max_proc: int) -> int:
    """Bytes of one quadrant's bias memory a (non-depthwise) layer's bias values take."""
    if not has_bias(layer):
        return 0
    size = layer.out_channels + ffs(output_map) % 4 * output_passes(layer, max_proc)
    if layer.index == 0 and layer.streaming and not device.supports_stream_bias:
        size += 1  # the vendor's work-around for a streaming first layer on MAX78000
    return size
