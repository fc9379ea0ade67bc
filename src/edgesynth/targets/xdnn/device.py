"""xDNN device facts, as data: engines, image-memory geometry, field widths and limits.

Where each fact comes from (see docs/xdnn.md for the full list):
- seed: the XDNN description (`../shared/seeds/004_897991aa4a9fe9da.txt`);
- ml-suite: Xilinx ml-suite v1.5's public programs and overlay descriptions;
- edgesynth: a choice the sources leave open, made here and documented.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.ir import numformat
from edgesynth.ir.numformat import NumberFormat

MiB = 1 << 20


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (n >= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


@dataclass(frozen=True)
class Engine:
    """One xDNN engine configuration, named `<pixels>x<array width>` like ml-suite's overlays."""

    name: str
    dsp_pixels: int  # C_IMAGE_OP_PIXELS (seed): pixels the DSP array processes side by side
    imem_bytes: int  # image memory capacity (ml-suite overlays: XDNN_URAM in MB)
    array_width: int = 32  # seed: "fixed at 32"
    bytes_per_pixel: int = 2  # seed: 2 bytes per pixel (16-bit data path)

    @property
    def imem_width(self) -> int:
        """seed: the DSP width in bytes rounded up to the next power of two (14 px -> 32 B)."""
        return next_pow2(self.dsp_pixels * self.bytes_per_pixel)


ENGINES: dict[str, Engine] = {
    # ml-suite has no 14x32 overlay: edgesynth gives it the 28x32 engine's 4 MiB.
    "14x32": Engine("14x32", 14, 4 * MiB),
    # ml-suite xdnn_v2_32x28_*_4mb overlays; googlenet_v1_28.json was compiled with -m 4.
    "28x32": Engine("28x32", 28, 4 * MiB),
    # ml-suite xdnn_v2_32x56_2pe_*_6mb overlays.
    "56x32": Engine("56x32", 56, 6 * MiB),
}
DEFAULT_ENGINE = "28x32"


def engine(name: str) -> Engine:
    if name not in ENGINES:
        raise EdgesynthError(
            f"unknown engine `{name}`; the engines are {', '.join(ENGINES)}."
            + did_you_mean(name, ENGINES),
            key="--engine",
        )
    return ENGINES[name]


# -- image limits (ml-suite overlays: XDNN_MAX_IMG_WH, XDNN_MAX_IMG_DEPTH) -------------------
MAX_IMAGE_WH = 1023
MAX_IMAGE_DEPTH = 4095

# -- the post-array pipeline (seed) ----------------------------------------------------------
ACC_BITS = 48  # the DSP accumulator
DATA_BITS = 16  # pre-shift saturation, post-shift result, bias and its saturation
PRESHIFT_BITS = 6  # "6-bit CSR field Pre-Scale DSP Right-Shifting"
SCALE_BITS = 8  # "8-bit CSR field DSP Scale Multiplication value" (unsigned)
POSTSHIFT_BITS = 4  # "4-bit CSR field Post-Scale DSP Right-Shifting"
BIAS_BITS = 16  # "16-bit CSR field Output Image Bias Value" (signed)
PRESHIFT_MAX = (1 << PRESHIFT_BITS) - 1
SCALE_MAX = (1 << SCALE_BITS) - 1
POSTSHIFT_MAX = (1 << POSTSHIFT_BITS) - 1
BIAS_MIN, BIAS_MAX = -(1 << (BIAS_BITS - 1)), (1 << (BIAS_BITS - 1)) - 1
DATA_MIN, DATA_MAX = -(1 << (DATA_BITS - 1)), (1 << (DATA_BITS - 1)) - 1

# -- geometry fields of edgesynth's register map (edgesynth: 4-bit fields) -----------------
MAX_KERNEL = 15
MAX_STRIDE = 15
MAX_PAD = 15
MAX_DILATION = 15

# -- filter image (seed: 16-bit values, input depth made even, output depth padded to 32) ---
FILTER_BYTES = 2
FILTER_DEPTH_MULTIPLE = 2
FILTER_OUTPUT_MULTIPLE = 32
DDR_ALIGN = 64  # edgesynth: every DDR block starts on a 64-byte boundary (one AXI burst)

BITS = (8, 16)  # quantization modes: values in 8 or 16 bits, always stored as 16-bit words

# What quantization makes (`lower.py`): signed symmetric activations and weights in 8 or 16
# bits, weights per output channel, a 16-bit bias, the 48-bit accumulator. A convolution's
# requantization is ml-suite's (pre-shift, scale, post-shift) triple (`quantfile.solve`); the
# average pool's is an 8-bit scale and a 4-bit post-shift (`mul_bits`, `shift_max`), rounded
# half up. The 16-bit activations keep one bit of headroom. Tensors joined by a max pool, an
# Add or a concatenation of one step share it (`ties` names those fused commands); the ranges
# are observed over the whole calibration batch at once.
NUMBER_FORMAT = NumberFormat(
    name="xdnn",
    scale="mul_shift",
    activation_bits=BITS,
    weight_bits=BITS,
    bias_bits=BIAS_BITS,
    accumulator_bits=ACC_BITS,
    weights="channel",
    mul_bits=SCALE_BITS,
    shift_max=POSTSHIFT_MAX,
    multiplier_rounding="half_up",
    headroom_bits={16: 1},
    ties=("maxpool", "add", "concat"),
    calibration_chunk=0,
)


def avgpool_multiplier(count: int, rescale: float = 1.0) -> tuple[int, int]:
    """(m, s) with m / 2**s ~ 1 / count: the average pool multiplies a window's sum by an
    8-bit scale and shifts it right by a 4-bit post-shift, like the convolution's scale and
    post-shift stages (edgesynth's choice; ml-suite's host library has the same
    sum x scale >> post-shift form). `rescale` = input step / output step folds a change of
    scale into it. The largest shift whose scale fits wins."""
    mul, shift = numformat.fit_multiplier(rescale / count, NUMBER_FORMAT)
    return (int(mul), shift) if mul <= SCALE_MAX else (0, 0)
