"""The vendor's latency estimate (MAX78000): CNN clock cycles per layer.

A layer reads its (pooled) input row by row: padding positions take a read and a TRAM write per
pass and element-wise operand, data positions also read every pooled pixel; each output column
then writes one word per output channel and pass. Streaming layers are estimated at 1.5 times
their frame time (marked "rough"). The cycle counts are the vendor's model, not a measurement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer
from edgesynth.targets.max7800x.plan.registers import flatten_product

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.plan.settings import PlanSettings

STARTUP = 1


@dataclass
class Latency:
    """The vendor's cycle estimate of each layer."""

    layers: list[tuple[int, int]]  # (layer index, cycles)
    rough: bool  # some layers stream: their cycles are estimates

    @property
    def total(self) -> int:
        return STARTUP + sum(c for _, c in self.layers)


def layer_cycles(h: HwLayer, s: PlanSettings) -> int:
    """Cycles of one layer (positive; streaming layers scaled by 1.5)."""
    layout = s.kernels.layouts.get(h.index)
    count = layout.count if layout else 0
    offset = layout.offset if layout else 0
    if not h.flatten:
        in_dim = h.hw_input_dim
        out_chan = count // h.in_expand
        out_dim = h.hw_output_dim
    else:
        pr, pc = h.hw_pooled_dim
        in_dim = (h.hw_input_dim[0] * h.pool[0], h.hw_input_dim[1] * h.pool[1])
        out_chan = count // (h.in_expand * pr * pc)
        out_dim = (h.hw_output_dim[0] * pr, h.hw_output_dim[1] * pc)
    passthrough = h.hw_operator == "none"
    if passthrough and h.out_expand > 1 and h.pooling:
        multipass = 2 * h.in_expand - 1  # pooling passthrough with output passes reads twice
    else:
        multipass = h.in_expand
    if h.operator == "convtranspose2d":
        pooled = (h.hw_pooled_dim[0] * h.stride[0], h.hw_pooled_dim[1] * h.stride[1])
    else:
        pooled = h.hw_pooled_dim
    if passthrough:
        out_chan = h.output_chan
    return _frame(
        in_dim=in_dim,
        pool=h.pool,
        pooled=pooled,
        multipass=multipass,
        out_chan=out_chan,
        out_dim=out_dim,
        kernel=h.hw_kernel_size,
        padding=h.hw_padding,
        elements=h.operands,
        pool_first=h.layer.pool_first,
        passthrough=passthrough,
        pass_out_chan=h.timeslots,
        flatten=flatten_product(h) >= 16,
        streaming=h.streaming,
        kern_offs=offset,
        multiwrite=s.chip.device.name == "MAX78000",
    )


def _frame(
    *,
    in_dim,
    pool,
    pooled,
    multipass,
    out_chan,
    out_dim,
    kernel,
    padding,
    elements,
    pool_first,
    passthrough,
    pass_out_chan,
    flatten,
    streaming,
    kern_offs,
    multiwrite,
) -> int:
    del in_dim
    pooled_rows, pooled_cols = pooled
    row_pad, col_pad = padding
    kern_rows, kern_cols = kernel
    out_cols = out_dim[1]
    read = tram = write = 1
    meq_one = 1 if out_chan == 1 and multipass == 1 else 0
    pre_read = 0
    if pool_first:
        pad_mp = multipass * elements * (read + tram)
        dat_mp = multipass * elements * (pool[0] * pool[1] * read + tram)
        mp_mult = 1
    else:
        if multiwrite and (multipass > 1 or elements > 1):
            pre_read = (
                (pooled_rows + 2 * row_pad - kern_cols + 1) * col_pad
                + (pooled_cols + 2 * col_pad - kern_rows + 1) * row_pad
                - row_pad * col_pad
            ) * kern_offs
        pad_mp = multipass * (read + tram)
        dat_mp = multipass * (elements * read * pool[0] * pool[1] + tram)
        mp_mult = multipass
    col = 2 * col_pad * (pad_mp + write)
    first_pad_row = col + mp_mult * pooled_cols * (pad_mp + write)
    row_no_conv = col + mp_mult * pooled_cols * (dat_mp + write)
    left = col_pad * (pad_mp + write)
    right = pad_mp * col_pad
    row_conv = (
        left
        + mp_mult * (kern_cols - 1 - col_pad) * (dat_mp + write)
        + mp_mult * (out_cols - col_pad) * dat_mp
        + right
    )
    bottom_row = (
        left
        + mp_mult * (kern_cols - 1 - col_pad) * (pad_mp + write)
        + mp_mult * (out_cols - col_pad) * pad_mp
        + right
    )
    if passthrough:
        out_row = multipass * pooled_rows * pooled_cols
        total = pooled_rows * pooled_cols * (dat_mp + multipass * pass_out_chan)
    else:
        out_row = multipass * out_cols * out_chan + out_chan * meq_one
        total = (
            (1 if flatten else 0)
            + pre_read
            + row_pad * first_pad_row
            + (kern_rows - 1 - row_pad) * row_no_conv
            + (row_conv + out_row) * (pooled_rows - (kern_rows - 1 - row_pad))
            + row_pad * (bottom_row + out_row)
        )
    if streaming:
        total = (15 * total + 9) // 10
    return total


def estimate(s: PlanSettings, sim_order: list[int]) -> Latency | None:
    """The estimate per simulated layer; None on devices without a latency model."""
    if s.chip.device.name != "MAX78000":
        return None
    by_index = s.by_index
    layers = [(i, layer_cycles(by_index[i], s)) for i in sim_order if i in by_index]
    rough = any(by_index[i].streaming or c <= 0 for i, c in layers)
    return Latency(layers=layers, rough=rough)
