"""Streaming registers: when a layer may start (prefill), how far it advances per row and
column (delta 1/2), its TRAM volume offset, and its circular input buffer (rollover).

The first layer fed by the FIFOs always has a start value (the frame size, or the prefill when
it streams); later layers have them only when they stream. The MAX78000 and MAX78002 use
different equations (the MAX78002 ones come from the vendor's spreadsheet, cell by cell).
"""

from __future__ import annotations

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer
from edgesynth.targets.max7800x.plan.settings import PlanSettings, StreamRegs


def _ceil4(x: int) -> int:
    return (x + 3) // 4


def stream_registers(s: PlanSettings) -> dict[int, StreamRegs]:
    result: dict[int, StreamRegs] = {}
    for h in s.hw:
        regs = _old(h, s) if not s.chip.device.uses_new_streaming else _new(h, s)
        if h.index > s.first and h.streaming:
            regs.invol = sum(o.in_expand_invol for o in s.hw if o.index < h.index)
        if s.opts.rules.fifo and h.streaming:
            regs.rollover = _rollover(h, s, regs)
        limit = 1 << s.chip.device.stream_delta2_bits
        if regs.delta2 >= limit:
            raise EdgesynthError(
                f"the streaming row advance (delta2 = {regs.delta2}) exceeds the device maximum "
                f"({limit}); reduce the pooling.",
                layer=h.index,
                layer_name=h.layer.spec.name,
            )
        if regs.invol >= 16:
            raise EdgesynthError(
                f"the streaming volume offset ({regs.invol}) exceeds the device maximum (15).",
                layer=h.index,
                layer_name=h.layer.spec.name,
            )
        result[h.index] = regs
    return result


def _old(h: HwLayer, s: PlanSettings) -> StreamRegs:
    """MAX78000."""
    o = s.opts.rules
    r = StreamRegs()
    rows, cols = h.hw_input_dim
    if h.index == s.first and o.fifo:
        if o.override_start is not None:
            r.start = o.override_start
        elif h.streaming:
            r.start = (h.pool[0] - 1) * cols + h.pool[1]
        else:
            r.start = rows * cols
            if h.big_data:
                r.start = _ceil4(r.start)
        if o.override_start is None:
            r.start *= h.pool[0]
        if h.streaming:
            r.delta1 = (
                o.override_delta1
                if o.override_delta1 is not None
                else (h.pool_stride[1] - 1) * h.operands
            )
            r.delta2 = (
                o.override_delta2
                if o.override_delta2 is not None
                else (h.pool[0] - 1) * cols * h.operands
            )
    elif h.index > s.first and h.streaming:
        prev = s.by_index[h.prev]
        padded = prev.hw_pooled_dim[1] + 2 * prev.hw_padding[1]
        r.start = (
            padded * (prev.hw_kernel_size[0] - 1 + h.pool[0] - 1)
            + prev.hw_kernel_size[1]
            - 1
            + h.pool[1]
            + o.increase_start
        )
        r.delta1 = h.pool_stride[1] * h.operands + o.increase_delta1
        r.delta2 = (h.pool_stride[0] - 1) * padded + h.pool[1] * h.operands + o.increase_delta2
    return r


def _new(h: HwLayer, s: PlanSettings) -> StreamRegs:
    """MAX78002: the vendor's streaming spreadsheet."""
    o = s.opts.rules
    r = StreamRegs()
    rows, cols = h.hw_input_dim
    pad = h.hw_padding[1]
    ps_r, ps_c = h.pool_stride
    row_prim = pad or ps_r
    row_inc = max(h.pool[0] * h.pool_dilation[0], ps_r)
    col_inc = max(h.pool[1] * h.pool_dilation[1], ps_c)
    debug = s.opts.plan.debug_new_streaming and h.index > 0
    last_layer = False
    effective_cols = col_adjust = 0
    if h.streaming:
        following = h.layer.next_sequence
        last_layer = h.index == s.final or not (
            following is not None and following >= 0 and s.by_index[following].streaming
        )
        if debug:
            effective_cols = cols // col_inc
            if effective_cols * ps_c + h.pool[1] > cols:
                effective_cols -= 1
            col_adjust = 0 if col_inc == 1 else cols - effective_cols * col_inc
        else:
            effective_cols = cols // ps_c
            if effective_cols * ps_c + h.pool[1] - 1 > cols:
                effective_cols -= 1
            col_adjust = cols - effective_cols * col_inc

    start_hwc = 0
    if h.index == s.first and o.override_start is not None:
        start_hwc = r.start = o.override_start
    elif h.index == s.first and o.fifo:
        if h.streaming:
            if ps_r == 1 and h.pool[0] == 1:
                r.start = col_inc
            else:
                r.start = (row_inc * (cols + pad * 2) + (pad + 2 * col_inc)) * h.operands
                if h.rd_ahead:
                    r.start += ps_c
        else:
            r.start = rows * cols
        start_hwc = r.start
        if h.big_data:
            r.start = _ceil4(r.start)
    elif h.index > s.first and h.streaming:
        lead = row_prim if debug else pad
        r.start = lead * (cols + 2 * pad) + (row_inc * (cols + 2 * pad) + pad + 2 * col_inc) * (
            h.operands
        )
        if h.rd_ahead:
            r.start += ps_c
        if last_layer and s.opts.plan.debug_new_streaming:
            r.start += col_adjust * ps_c
        start_hwc = r.start
        if h.big_data:
            r.start = _ceil4(r.start)

    if h.streaming:
        skipped = max(0, cols - effective_cols * ps_c)
        if h.index == s.first:
            if o.override_delta1 is not None:
                r.delta1 = o.override_delta1
            else:
                r.delta1 = ps_c * h.operands
                if ps_r == 1 and h.pool[0] == 1:
                    r.delta1 -= 1
                if h.big_data:
                    r.delta1 = _ceil4(r.delta1)
            if o.override_delta2 is not None:
                r.delta2 = o.override_delta2
            else:
                if debug:
                    r.delta2 = (
                        r.delta1 + col_adjust if ps_r == 1 else (ps_r - 1) * cols + col_adjust
                    )
                elif ps_r == 1:
                    r.delta2 = r.delta1 + skipped
                else:
                    r.delta2 = (ps_r - 1) * cols + skipped + h.pool[1] - 1
                if h.big_data:
                    r.delta2 = _ceil4(r.delta2)
                if s.pipeline and r.delta2 > 0:
                    r.delta2 += 1
        else:
            r.delta1 = ps_c * h.operands
            if h.big_data:
                r.delta1 = _ceil4(r.delta1)
            r.delta1 += o.increase_delta1
            if debug:
                r.delta2 = r.delta1 + col_adjust if ps_r == 1 else (ps_r - 1) * cols + col_adjust
            elif ps_r == 1:
                r.delta2 = r.delta1 + skipped
            else:
                r.delta2 = (ps_r - 1) * cols + skipped
            if h.big_data:
                r.delta2 = _ceil4(r.delta2)
            r.delta2 += o.increase_delta2
    r.start_hwc, r.row_inc, r.col_inc = start_hwc, row_inc, col_inc
    return r


def _rollover(h: HwLayer, s: PlanSettings, r: StreamRegs) -> int:
    o = s.opts.rules
    cols = h.hw_input_dim[1]
    if h.index == s.first and o.override_rollover is not None:
        return o.override_rollover
    if not s.chip.device.uses_new_streaming:
        if h.big_data:
            val = 12
        else:
            val = r.start + (h.pool[0] - 1) * cols + max(h.stride[1], h.pool_stride[1], h.pool[1])
        rem = val % h.in_expand
        if rem:
            val += h.in_expand - rem
        return val
    start_hwc, row_inc, col_inc = r.start_hwc, r.row_inc, r.col_inc
    pad = h.hw_padding[1]
    if h.index == s.first:
        val = start_hwc + col_inc + (h.pool_stride[1] - 1) * (cols + pad * 2)
        if h.big_data:
            val *= h.pool_stride[1] * 4
        return val
    val = start_hwc + (h.in_expand - 1) * (row_inc * cols + pad + col_inc) + col_inc
    val += (h.in_expand - val % h.in_expand) % h.in_expand
    if h.big_data:
        val = _ceil4(val)
    return val
