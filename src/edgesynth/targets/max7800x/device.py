"""Device facts for MAX78000 and MAX78002: the one place training and synthesis read them from.

Sizes follow the hardware documentation: data memory in 32-bit words per instance (MAX78000:
16 instances of 8192 x 32 bits = 512 KiB; MAX78002: 16 sections of 80 KiB = 1,280 KiB), kernel
memory in 9-byte kernel words (one 3x3 kernel of 8-bit weights) per processor, bias memory in
bytes (one 8-bit bias per output channel) per quadrant. Register and memory addresses are in
`regmap.py` (the code generator's) and, written independently, `vdevice/regmap.py`.
"""

from __future__ import annotations

from edgesynth.ir.numformat import NumberFormat
from edgesynth.lean_dataclass import dataclass

# Operators whose inputs and output share one scale: the chip passes their codes through.
SHARED_SCALE_OPS = ("pool", "global_pool", "flatten", "reshape", "concat", "slice")
SHARED_SCALE_OPS += ("activation", "clip", "eltwise:add", "eltwise:sub")


@dataclass(frozen=True)
class Device:
    """The facts of one device (MAX78000 or MAX78002) that training and synthesis read."""

    name: str  # "MAX78000"
    code: int  # vendor device number: 85 or 87
    max_layers: int
    max_stream_layers: int
    groups: int  # quadrants
    processors_per_group: int
    processors_sharing_memory: int  # processors that share one data-memory instance
    max_row_col: int  # largest input height/width
    instance_words: int  # usable 32-bit words per data-memory instance (shared by 4 processors)
    mask_width_large: int  # kernel words in the first processor of each group
    mask_width_small: int  # kernel words in every other processor
    bias_words_per_group: int  # 8-bit bias values per quadrant's bias memory
    tram_size: int
    bias_div: int  # the accumulator sees bias * bias_div
    max_dilation_1d: int
    max_pool_dilation: int
    max_pool_passes: int
    supports_depthwise: bool
    supports_binary_weights: bool
    supports_calcx4: bool
    supports_read_ahead: bool
    supports_snoop: bool
    supports_link_layer: bool
    supports_kernel_bypass: bool
    supports_multipass_padded_conv1d: bool
    supports_stream_nonpad_final: bool
    supports_fifo_go: bool
    supports_oneshot: bool
    supports_pipeline: bool
    max_start_layer: int
    max_conv2d_dilation: int = 1
    supported_transpose_pads: tuple[int, ...] = (0, 1, 2)
    supported_transpose_output_pads: tuple[int, ...] = (1,)
    max_kernel_2d: int = 3
    conv2d_kernel_sizes: tuple[int, ...] = (1, 3)  # square kernels only
    transpose_kernel_size: int = 3
    transpose_stride: int = 2
    conv1d_stride: int = 1
    max_linear_features: int = 1024
    max_kernel_1d: int = 9
    max_pool: int = 16
    max_pool_stride: int = 16
    max_pad: int = 2
    max_stride_2d: int = 1  # larger strides only for 1x1 or with multipass on MAX78002
    max_channels_per_processor: int = 16  # channel expansion by multi-pass
    activation_bits: int = 8
    weight_bits: tuple[int, ...] = (1, 2, 4, 8)
    max_output_shift: int = 15  # |total shift| (YAML/checkpoint shift + 8 - weight bits)
    max_operands: int = 16  # element-wise inputs
    max_pool_last_operands: int = 2  # element-wise inputs when pooling after (`pool_first: false`)
    max_flatten_pixels: int = 256  # pooled H x W that `flatten` can fold into channels
    max_passes: int = 16  # input passes the layer control register can count
    write_ptr_increment_bits: int = 4  # LCTL2 write-pointer step (write_gap x passes) field
    max_frame_words: int = 2**21  # input H x W x passes (frame address bits)
    # ms the main program waits after cnn_enable() by default (the vendor's `--switch-delay`):
    # the MAX78002's CNN power switch needs time to settle
    switch_delay_ms: int = 0
    max_dilated_1d_span: int = 9  # conv1d (k-1) x dilation below this stretches the kernel
    max_dilation_1d_kernel: int = 3  # longer spans run on 3x3 hardware: kernel length <= 3
    max_dilation_1d_pad: int = 0  # ... and no padding
    fifo_channels_hwc: int = 16  # input channels the four FIFOs take (HWC)
    fifo_channels_chw: int = 4  # ... (CHW)
    fast_fifo_channels_hwc: int = 4
    fast_fifo_channels_chw: int = 1
    fifo_processors_hwc: int = 0x000F000F000F000F  # processors the FIFOs feed (HWC)
    fifo_processors_chw: int = 0x0001000100010001  # ... (CHW)
    supports_pll: bool = False
    supports_read_gap: bool = False  # `read_gap` (multi-pass stride register)
    supports_multipass_read_gap: bool = False  # `read_gap` with more than one input pass
    supports_multipass_eltwise_conv_bias: bool = True  # element-wise + conv + bias in one layer
    supports_streaming_passthrough: bool = True
    supports_multipass_calcx4_partial_quad: bool = False
    emulates_multipass_eltwise: bool = False  # multi-pass element-wise runs as a passthrough
    emulates_1x1_streaming: bool = True  # streamed 1x1 conv2d runs as padded 3x3
    requires_avgpool_reset_after_eltwise: bool = False  # inserts a hidden layer
    uses_new_streaming: bool = False  # MAX78002 streaming buffer equations
    stream_delta2_bits: int = 12  # width of the streaming row-skip counter
    supports_stream_bias: bool = False  # a streaming first layer needs no bias work-around
    instance_banks: int = 1  # independently accessed banks per data-memory instance

    @property
    def number_format(self) -> NumberFormat:
        """What post-training quantization makes (`quantize.py`): signed 8-bit data and
        weights, one scale per tensor and per layer; the accumulator x 2**(shift - 7) with
        the output shift within +-max_output_shift (`shift_range` holds shift - 7); 8-bit bias;
        calibration in batches of 64."""
        return NumberFormat(
            name=self.name,
            scale="power_of_two",
            activation_bits=(self.activation_bits,),
            weight_bits=(8,),
            bias_bits=8,
            accumulator_bits=32,
            shift_range=(-self.max_output_shift + 1 - 7, self.max_output_shift - 7),
            ties=SHARED_SCALE_OPS,
            calibration_chunk=64,
        )

    @property
    def instance_bytes(self) -> int:
        """Bytes of one data-memory instance: the most one layer's input or output may use."""
        return self.instance_words * 4

    @property
    def processors(self) -> int:
        return self.groups * self.processors_per_group

    @property
    def max_channels(self) -> int:
        return self.processors * self.max_channels_per_processor

    @property
    def data_memory_bytes(self) -> int:
        instances = self.processors // self.processors_sharing_memory
        return instances * self.instance_words * 4

    def processors_for(self, channels: int) -> int:
        """Processors a map enables for `channels` channels (see `processors_per_pass`)."""
        return processors_per_pass(channels, self.processors, self.processors_sharing_memory)

    @property
    def max_out_offset(self) -> int:
        """`out_offset`/`in_offset` (bytes) must be below this (0x20000 / 0x50000)."""
        return self.instance_words * 4 * self.processors_sharing_memory


MAX78000 = Device(
    name="MAX78000",
    code=85,
    max_layers=32,
    max_stream_layers=8,
    groups=4,
    processors_per_group=16,
    processors_sharing_memory=4,
    max_row_col=1024,
    instance_words=8192,
    mask_width_large=768,
    mask_width_small=768,
    bias_words_per_group=512,
    tram_size=3072,
    bias_div=128,
    max_dilation_1d=1023,
    max_pool_dilation=1,
    max_pool_passes=1,
    supports_depthwise=False,
    supports_binary_weights=False,
    supports_calcx4=False,
    supports_read_ahead=False,
    supports_snoop=False,
    supports_link_layer=False,
    supports_kernel_bypass=False,
    supports_multipass_padded_conv1d=True,
    supports_stream_nonpad_final=False,
    supports_fifo_go=False,
    supports_oneshot=False,
    supports_pipeline=False,
    max_start_layer=0,
    emulates_multipass_eltwise=True,
)

MAX78002 = Device(
    name="MAX78002",
    code=87,
    max_layers=128,
    max_stream_layers=8,
    groups=4,
    processors_per_group=16,
    processors_sharing_memory=4,
    max_row_col=2048,
    instance_words=20480,
    mask_width_large=4 * 1024 + 4 * 256,
    mask_width_small=4 * 1024,
    bias_words_per_group=2048,
    tram_size=12288,
    bias_div=128,
    max_dilation_1d=2047,
    max_pool_dilation=16,
    max_pool_passes=2**16,
    supports_depthwise=True,
    supports_binary_weights=True,
    supports_calcx4=True,
    supports_read_ahead=True,
    supports_snoop=True,
    supports_link_layer=True,
    supports_kernel_bypass=True,
    supports_multipass_padded_conv1d=False,
    supports_stream_nonpad_final=True,
    supports_fifo_go=True,
    supports_oneshot=True,
    supports_pipeline=True,
    max_start_layer=127,
    switch_delay_ms=10,
    max_stride_2d=1,
    supports_pll=True,
    supports_read_gap=True,
    supports_multipass_eltwise_conv_bias=False,
    supports_streaming_passthrough=False,
    requires_avgpool_reset_after_eltwise=True,
    uses_new_streaming=True,
    stream_delta2_bits=14,
    write_ptr_increment_bits=8,
    supports_stream_bias=True,
    instance_banks=5,
)

DEVICES: dict[str, Device] = {d.name: d for d in (MAX78000, MAX78002)}
# The vendor also accepts its internal names and numbers.
ALIASES: dict[str, str] = {
    "MAX78000": "MAX78000",
    "AI85": "MAX78000",
    "85": "MAX78000",
    "MAX78002": "MAX78002",
    "AI87": "MAX78002",
    "87": "MAX78002",
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def passes(channels: int, max_proc: int) -> int:
    """Passes ("multi-pass expansion") needed to process `channels` on `max_proc` processors."""
    return max(1, _ceil_div(channels, max_proc))


def processors_per_pass(channels: int, max_proc: int, shared: int) -> int:
    """Processors a map must enable for `channels` channels: one per channel and pass.

    With more channels than processors, each pass uses a multiple of `shared` processors (one
    memory instance's worth: `Device.processors_sharing_memory`), at most `max_proc`.
    """
    expand = passes(channels, max_proc)
    per_pass = _ceil_div(channels, expand)
    if channels > max_proc:
        per_pass = min(_ceil_div(per_pass, shared) * shared, max_proc)
    return per_pass


def get_device(name: str) -> Device:
    """The device for a name as the vendor's `--device` takes it (case-insensitive)."""
    from edgesynth.errors import EdgesynthError, did_you_mean

    key = ALIASES.get(str(name).upper())
    if key is None:
        raise EdgesynthError(
            f"unknown device `{name}`; choose MAX78000 or MAX78002."
            + did_you_mean(str(name).upper(), ALIASES)
        )
    return DEVICES[key]


def device_name(text: str) -> str:
    """A MAX7800x device as the vendor spells it (MAX78000, ai85, 87, ...): its part number (an
    argparse `type=`: a bad name is a usage error naming the option)."""
    import argparse

    from edgesynth.errors import EdgesynthError

    try:
        return get_device(text).name
    except EdgesynthError as err:
        raise argparse.ArgumentTypeError(err.message) from None
