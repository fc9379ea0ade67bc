"""Gati hardware facts: array geometry, DRAM alignment, and edgesynth's assumptions about it."""

from __future__ import annotations

from edgesynth.ir.numformat import NumberFormat

ENGINES = 8  # compute engines: each takes one input channel per channel iteration
ENGINE_ROWS = 9  # kernel taps per engine column (a 3x3 filter is one column)
ENGINE_COLS = 8  # filters per engine (output channels per kernel iteration)
FC_WIDTH = 32  # P: columns of the 1xP output-stationary FC engine
WORD_BYTES = 4  # DWP and DRAM work on 32-bit words
WORD_SIZE = 32  # the seed's WORD_SIZE (alignment unit in elements for Vec2MatCols)
ACC_BITS = 32  # partial sums / accumulants
DRAM_ALIGN = 32  # edgesynth aligns every region to one 32-byte DRAM beat (32-bit aligned too)
PIXEL_BLOCK = 8  # NHW8C8: 8 consecutive pixels of each of 8 channels form one 64-byte block
CHANNEL_BLOCK = 8
INST_ORIGIN = 0  # GATI_INST_ORG

# edgesynth's assumption: the output block can hold this many bytes of int32 partial sums
# on chip; a convolution whose per-kernel-iteration partial sums fit sets OnChipAcc.
ON_CHIP_ACC_BYTES = 16384

ACT_OUT_FRACTION_BITS = 7  # sigmoid/tanh outputs are int8 with scale 2**-7

# What post-training quantization makes (`quantize.py`): signed symmetric int8 activations and
# weights, one weight scale per layer, bias 8-bit where it fits else 32-bit, 32-bit
# accumulators; the tail block's requantization is acc x QuantScale >> QuantShift (16-bit
# QuantScale rounded half up, 5-bit QuantShift: the widths of those fields in isa.TAIL).
NUMBER_FORMAT = NumberFormat(
    name="gati",
    scale="mul_shift",
    activation_bits=(8,),
    weight_bits=(8,),
    bias_bits=32,
    accumulator_bits=ACC_BITS,
    weights="layer",
    mul_bits=16,
    shift_max=31,
    multiplier_rounding="half_up",
    calibration_chunk=128,
)


def align(n: int, a: int) -> int:
    return -(-n // a) * a


def cdiv(n: int, d: int) -> int:
    return -(-n // d)
