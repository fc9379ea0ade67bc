"""Per-layer cycle estimate, from what the registers say a layer does.

The accelerator reads each input row (and its padding) through the pooling stage into the
TRAM, one read state per pooled value and one TRAM write per pixel and pass, then writes every
output channel of a row. These are the same equations as the vendor tool's latency estimate
(`Estimated latency` in its log; state costs: 1 cycle per read, TRAM write and write state),
evaluated here on the register-derived layer description. Streaming layers are estimated at
1.5 times a regular layer, as the vendor does.
"""

from __future__ import annotations

from edgesynth.targets.max7800x.vdevice.execute import LayerResult
from edgesynth.targets.max7800x.vdevice.interpret import LayerProgram

READ = TRAM_WRITE = WRITE = 1
STARTUP = 1


def layer_cycles(prog: LayerProgram, result: LayerResult) -> int:
    channels, _, out_cols = result.output.shape
    pool_r, pool_c = prog.pool
    pad_r, pad_c = prog.pad
    kern_r, kern_c = prog.kernel
    passthrough = prog.passthrough
    passes = prog.passes
    if prog.flatten or (
        not passthrough and prog.kernel == (1, 1) and passes > 1 and (prog.rows == prog.cols == 1)
    ):
        # Flattened input: the passes are the pixels of the flattened frame.
        pooled_r, pooled_c, passes = 1, passes, 1
        out_cols = pooled_c
    else:
        pooled_r = (prog.rows - pool_r) // prog.pool_stride[0] + 1
        pooled_c = (prog.cols - pool_c) // prog.pool_stride[1] + 1
        if prog.deconv:
            pooled_r, pooled_c = 2 * pooled_r, 2 * pooled_c
    if passthrough and passes > 1 and prog.pooling and prog.device == "MAX78000":
        passes = 2 * passes - 1  # multi-pass pooling passthrough runs twice
    elements = prog.operands
    # ONED.prepool is only set when there is pooling to do first
    pool_first = prog.eltwise is None or prog.prepool or prog.pool == (1, 1)
    slots = channels if passthrough else prog.slots

    pre_read = 0
    if pool_first:
        pad_cost = passes * elements * (READ + TRAM_WRITE)
        data_cost = passes * elements * (pool_r * pool_c * READ + TRAM_WRITE)
        row_passes = 1
    else:
        if prog.device == "MAX78000" and (passes > 1 or elements > 1):
            kernel_column = prog.mask_start >> 3
            pre_read = (
                (pooled_r + 2 * pad_r - kern_c + 1) * pad_c
                + (pooled_c + 2 * pad_c - kern_r + 1) * pad_r
                - pad_r * pad_c
            ) * kernel_column
        pad_cost = passes * (READ + TRAM_WRITE)
        data_cost = passes * (elements * READ * pool_r * pool_c + TRAM_WRITE)
        row_passes = passes

    side_pads = 2 * pad_c * (pad_cost + WRITE)
    padding_row = side_pads + row_passes * pooled_c * (pad_cost + WRITE)
    data_row_no_conv = side_pads + row_passes * pooled_c * (data_cost + WRITE)
    left = pad_c * (pad_cost + WRITE)
    lead = row_passes * (kern_c - 1 - pad_c)
    body = row_passes * (out_cols - pad_c)
    right = pad_cost * pad_c
    data_row = left + lead * (data_cost + WRITE) + body * data_cost + right
    bottom_row = left + lead * (pad_cost + WRITE) + body * pad_cost + right

    if passthrough:
        total = pooled_r * pooled_c * (data_cost + passes * prog.timeslots)
    else:
        single = 1 if slots == 1 and passes == 1 else 0
        out_row = passes * out_cols * slots + slots * single
        rows_before = kern_r - 1 - pad_r
        total = (
            (1 if prog.flatten else 0)
            + pre_read
            + pad_r * padding_row
            + rows_before * data_row_no_conv
            + (data_row + out_row) * (pooled_r - rows_before)
            + pad_r * (bottom_row + out_row)
        )
    streaming = prog.stream_enabled and prog.fbuf > 0
    if streaming:
        total = (15 * total + 9) // 10
    return int(total)


def estimate_all(programs: list[LayerProgram], results: list[LayerResult]) -> list[int]:
    return [layer_cycles(p, r) for p, r in zip(programs, results, strict=True)]


def total_cycles(estimates: list[int]) -> int:
    return STARTUP + sum(estimates)
