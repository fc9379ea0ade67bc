"""How a target stores numbers, as data, and the arithmetic every quantizer shares.

Each target declares one `NumberFormat` in its `device.py` (`NUMBER_FORMAT`, or a property of
its device); the quantization pass (`sim.observe` for the ranges, `ir.ties` for the tensors
that share a scale, and the functions here for steps and requantization factors) takes the
target's numbers from it. Where targets' rules differ in a corner, the difference is a field
below, not a branch in a target's code.

A tensor's real value is code x step. A range's *threshold* is its largest magnitude (an
all-zero range counts as 1, see `zero_step`), widened by `headroom_bits`; its step is the
threshold over the largest code. Requantization takes an accumulator at one step to codes at
another: by a power of two (`scale="power_of_two"`: the output shift) or by an integer
multiplier and a right shift (`scale="mul_shift"`: mul / 2**shift).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError

if TYPE_CHECKING:  # NumPy is imported where the arithmetic runs: the targets' device modules
    import numpy as np  # declare formats at import time, on the command line's fast path

SCALE_KINDS = ("power_of_two", "mul_shift")
GRANULARITY = ("layer", "channel")
ROUNDING = ("half_up", "up")


@dataclass(frozen=True)
class NumberFormat:
    """A target's number formats (one per target, or per device of a target).

    - `scale`: how an accumulator is brought to the next tensor's step: `power_of_two` (a
      shift only; the weight step absorbs the rest) or `mul_shift` (integer multiplier, then
      a right shift);
    - `activation_bits`, `weight_bits`, `bias_bits`, `accumulator_bits`: widths; the first of
      `activation_bits` is the default where a target offers several;
    - `weights`: one weight step per layer or per output channel;
    - `unsigned_activations`: a tensor that cannot be negative (after a ReLU) uses unsigned
      codes 0..2**bits-1; otherwise codes are signed and symmetric (-(2**(bits-1)-1) up);
    - `rounding`: of every value to its code (`half_up`: floor(x + 1/2));
    - `mul_bits`, `shift_max`, `multiplier_rounding`: for `mul_shift`, the multiplier is below
      2**mul_bits, the shift at most `shift_max`, and the multiplier is the real factor x
      2**shift rounded `half_up` (nearest) or `up` (never below the real factor);
    - `shift_range`: for `power_of_two`, the smallest and largest exponent of the factor;
    - `zero_step`: the step of an all-zero range: `unit_range` (as if its threshold were 1)
      or `one` (step 1);
    - `headroom_bits`: activation width -> bits of headroom added to the threshold (xDNN's
      16-bit activations keep one so a pre-shifted value never saturates);
    - `ties`: operators whose inputs and output share one step, by `op` name (`eltwise:add`
      names one kind of an operator with kinds); targets that tie fused commands rather than
      graph operators name those;
    - `calibration_chunk`: samples evaluated at once while observing ranges, 0 for the whole
      batch (a batched product's float results can depend on the split; each target keeps
      the split its recorded outputs were made with).
    """

    name: str
    scale: str
    activation_bits: tuple[int, ...]
    weight_bits: tuple[int, ...]
    bias_bits: int
    accumulator_bits: int
    weights: str = "layer"
    unsigned_activations: bool = False
    rounding: str = "half_up"
    mul_bits: int = 16
    shift_max: int = 0
    multiplier_rounding: str = "half_up"
    shift_range: tuple[int, int] = (0, 0)
    zero_step: str = "unit_range"
    headroom_bits: dict[int, int] = field(default_factory=dict)
    ties: tuple[str, ...] = ()
    calibration_chunk: int = 256

    def __post_init__(self) -> None:
        if self.scale not in SCALE_KINDS:
            raise ValueError(f"{self.name}: scale {self.scale!r} is not one of {SCALE_KINDS}")
        if self.weights not in GRANULARITY:
            raise ValueError(f"{self.name}: weights {self.weights!r} is not one of {GRANULARITY}")
        if self.multiplier_rounding not in ROUNDING or self.rounding not in ROUNDING:
            raise ValueError(f"{self.name}: rounding is one of {ROUNDING}")
        if self.zero_step not in ("unit_range", "one"):
            raise ValueError(f"{self.name}: zero_step {self.zero_step!r}")


def largest_code(bits: int, unsigned: bool = False) -> int:
    """The largest code of a symmetric signed (or an unsigned) `bits`-wide tensor."""
    return (1 << bits) - 1 if unsigned else (1 << (bits - 1)) - 1


def threshold(maxabs: float, fmt: NumberFormat, bits: int) -> float:
    """The magnitude a range of largest magnitude `maxabs` is quantized over."""
    value = maxabs if maxabs > 0 or fmt.zero_step == "one" else 1.0
    headroom = fmt.headroom_bits.get(bits, 0)
    return value * (1 << headroom) if headroom else value


def step(maxabs: float, fmt: NumberFormat, bits: int, unsigned: bool = False) -> float:
    """The step (real value of one code) of a range of largest magnitude `maxabs`."""
    top = threshold(maxabs, fmt, bits)
    if top <= 0:  # zero_step "one"
        return 1.0
    return top / largest_code(bits, unsigned)


def fit_multiplier(m: np.ndarray | float, fmt: NumberFormat) -> tuple[np.ndarray, int]:
    """(mul, shift) for real factors `m` (one shift for all): the largest shift in
    [0, fmt.shift_max] at which the largest factor x 2**shift, rounded as the format says,
    stays below 2**fmt.mul_bits (0 when none does); each mul is its factor x 2**shift rounded.
    Checking the result (a zero or too large multiplier) is the caller's."""
    import numpy as np

    m = np.asarray(m, dtype=np.float64)
    top = float(m.max(initial=0.0))
    limit = (1 << fmt.mul_bits) - 1
    rounded = _round_up if fmt.multiplier_rounding == "up" else _round_half_up
    if fmt.multiplier_rounding == "up":  # the closed form of the search below
        shift = math.floor(math.log2(limit / top)) if top > 0 else 0
        shift = min(max(shift, 0), fmt.shift_max)
    else:
        shift = next((s for s in range(fmt.shift_max, -1, -1) if rounded(top * 2.0**s) <= limit), 0)
    return rounded(m * 2.0**shift).astype(np.int64), shift


def fit_shift(m: float, fmt: NumberFormat) -> int:
    """For `power_of_two`: the smallest exponent e with 2**e >= m, within `fmt.shift_range`
    (the low end for m = 0)."""
    lo, hi = fmt.shift_range
    if m <= 0:
        return lo
    return int(min(max(math.ceil(math.log2(m)), lo), hi))


def _round_half_up(x: np.ndarray | float) -> np.ndarray:
    import numpy as np

    return np.floor(np.asarray(x, dtype=np.float64) + 0.5)


def _round_up(x: np.ndarray | float) -> np.ndarray:
    import numpy as np

    return np.ceil(np.asarray(x, dtype=np.float64))


def check_format(fmt: NumberFormat, where: str) -> None:
    """A format a target may declare (the contract test runs this over every target)."""
    if not fmt.activation_bits or not fmt.weight_bits:
        raise EdgesynthError(f"{where}: the number format names no activation or weight bits")
    if fmt.scale == "mul_shift" and fmt.shift_max <= 0:
        raise EdgesynthError(f"{where}: a mul_shift format needs shift_max > 0")
    if fmt.scale == "power_of_two" and fmt.shift_range[0] >= fmt.shift_range[1]:
        raise EdgesynthError(f"{where}: a power_of_two format needs a shift range")
