"""The generated softmax (softmax.c) in NumPy: the reference its tests compare against.

Base-2 softmax in fixed point: inputs Q17.14, outputs Q15. With m the largest input and
b = m - 16 (in Q17.14: m - 2^18), every input x > b contributes 2^e, e = round((x - b) / 2^14)
(rounding half up); the scale is floor(2^32 / sum) truncated to int32, and an output is
scale >> (17 + floor((b - x + 2^13 - 1) / 2^14)), at most 32767; inputs <= b give 0.
"""

from __future__ import annotations

import numpy as np


def softmax_q17p14_q15(values: np.ndarray, shift: int = 0) -> np.ndarray:
    x = np.asarray(values, dtype=np.int64)
    if shift:
        x = ((x << shift) & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64)
    if x.size == 0:
        return np.zeros(0, dtype=np.int16)
    floor = int(x.max()) - (16 << 14)
    used = x > floor
    exponents = (x[used] - floor + 8192) >> 14
    total = int(np.sum(np.left_shift(np.int64(1), exponents)))
    scale = int(np.int64((1 << 32) // total).astype(np.int32))
    out = np.zeros(x.size, dtype=np.int64)
    shifts = 17 + ((floor - x[used] + 8191) >> 14)
    out[used] = np.minimum(np.right_shift(np.int64(scale), shifts), 32767)
    return out.astype(np.int16)
