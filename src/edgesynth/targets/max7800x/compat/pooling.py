"""How the vendor's known-answer simulation pools 1D (Conv1d) data."""

from __future__ import annotations

import numpy as np

from edgesynth.sim.ops import average, pooled_size


def vendor_pool1d(
    data: np.ndarray,
    pool: int,
    stride: int,
    *,
    average_pool: bool,
    dilation: int = 1,
) -> np.ndarray:
    """In-flight pooling of one operand's (C, L) data, as the vendor's 1D simulation does it.

    - Averages are truncated toward zero; --avg-pool-rounding does not apply to 1D layers.
      Proven by the KWS20 v3 demos (MAX78000/kws20_v3, MAX78002/kws20_v3_1), whose average
      pooling layers produce odd sums: rounding them would change the known answer.
    - A dilated average window that runs past the end averages only the samples it covers.
    - Max pooling reads `pool` consecutive samples even when `pool_dilation` is set.
    No corpus case pools dilated 1D data, so the last two points are the vendor simulation's
    behaviour, decided by no known answer.

    The caller pools only a Conv1d layer's first operand (the vendor's simulation does).
    """
    if pool == 1:
        return data[:, ::stride]
    length = data.shape[1]
    out_len = pooled_size(length, pool, stride, dilation)
    starts = np.arange(out_len) * stride
    if average_pool:
        index = starts[:, None] + np.arange(pool) * dilation
        valid = index < length
        values = np.where(valid, data[:, np.minimum(index, length - 1)], 0)
        return average(values.sum(axis=-1), valid.sum(axis=-1), rounding=False)
    index = starts[:, None] + np.arange(pool)
    return data[:, index].max(axis=-1)
