"""The register values of a network: cnn_init(), cnn_configure() and cnn_start().

One function per register (or group of registers) computes its value from the hardware layer
and the plan; `configure_writes` lists them in the order the generated code writes them: layer
by layer, quadrant by quadrant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x import regmap as rm
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer, ffs, fls, popcount, tscnt_max
from edgesynth.targets.max7800x.plan.writes import Fill, Writes

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.plan.settings import PlanSettings


def init_writes(s: PlanSettings) -> Writes:
    """cnn_init(): clocks, the AON control, clearing the registers (MAX78002), stop state."""
    regs, dev = s.chip.regs, s.chip.device
    w = Writes(regs, s.opts.plan.write_zero_registers)
    clear = regs.bist_zero is not None
    if clear:
        val = 0 if not dev.supports_pipeline or s.pipeline else rm.CTL_NO_PIPELINE
        for g in s.groups_used:
            val |= rm.CTL_CLOCK_ENABLE | _ready(s.opts.plan.ready_sel) << 1
            w.ctl(g, rm.REG_CTL, val, "Enable clocks", verify=False)
    w.fifo(rm.AON_CTL, _ready(s.opts.plan.ready_sel_aon), "AON control", force=True)
    if clear:
        for g in s.groups_used:
            w.ctl(g, rm.REG_SRAM, rm.SRAM_CONTROL, "SRAM control")
        bist = regs.bist_zero_both if s.any_bias else regs.bist_zero
        for g in s.groups_used:
            w.ctl(g, rm.REG_SRAM_TEST, bist, "Clear registers", verify=False)
        for g in s.groups_used:
            w.wait(g, rm.REG_SRAM_TEST, regs.bist_zero_wait, regs.bist_zero_wait, "Wait for clear")
        for g in s.groups_used:
            w.ctl(g, rm.REG_SRAM_TEST, 0, "Reset BIST", force=True, verify=False)
    for g in s.groups_used:
        if s.opts.plan.init_tram:  # the vendor clears TRAM_SIZE bytes (not words) per processor
            for p in range(s.chip.per_group):
                address = regs.apb_base + regs.tram(g, p)
                w.items.append(Fill(address, regs.tram_size, f"Zero TRAM {g}"))
        val = rm.CTL_CLOCK_ENABLE | _ready(s.opts.plan.ready_sel) << 1
        if s.opts.rules.fifo:
            val |= rm.CTL_FIFO
        if s.opts.plan.mexpress:
            val |= rm.CTL_MEXPRESS
        if dev.supports_pipeline and not s.pipeline:
            val |= rm.CTL_NO_PIPELINE
        w.ctl(g, rm.REG_CTL, val, "Stop SM")
        if not clear:
            w.ctl(g, rm.REG_SRAM, rm.SRAM_CONTROL, "SRAM control")
        first = s.first_hw_layer
        val = s.opts.rules.repeat_layers * (s.final + s.hidden_layers) | first << 8
        w.ctl(g, rm.REG_LCNT_MAX, val, "Layer count")
    if s.opts.plan.zero_sram:  # self-test (and clear) every memory of every quadrant
        for name, (start, done, error) in regs.bist.items():
            for g in range(s.chip.groups):
                w.ctl(g, rm.REG_SRAM_TEST, start, f"{name} BIST")
            for g in range(s.chip.groups):
                w.wait(g, rm.REG_SRAM_TEST, done, done, "Wait for BIST")
            for g in range(s.chip.groups):
                w.check(g, rm.REG_SRAM_TEST, error, 0, "Return on BIST error")
            for g in range(s.chip.groups):
                w.ctl(g, rm.REG_SRAM_TEST, 0, "Reset BIST", force=True)
    return w


def _ready(value: int | None) -> int:
    """Memory wait states (--ready-sel, --ready-sel-fifo, --ready-sel-aon); 0 by default."""
    return value or 0


def _local_source(h: HwLayer, s: PlanSettings) -> bool:
    """Write pointers local to each quadrant: needed when the output map has uneven gaps."""
    for g in s.groups_used:
        gmap = h.output_processor_map & s.chip.group_mask(g)
        if popcount(gmap) > 1:
            gap_min, gap_max = s.chip.max_proc, 0
            p = ffs(gmap)
            while p < fls(gmap):
                gap = ffs(gmap & ~((1 << (p + 1)) - 1)) - p - 1
                gap_min, gap_max = min(gap, gap_min), max(gap, gap_max)
                p += gap + 1
            if gap_min != gap_max or (gap_max > 0 and h.hw_operator == "none"):
                return True
    return False


def _next_layer(h: HwLayer, s: PlanSettings) -> int:
    if s.opts.rules.link_layer:
        return 1 << 7 | (h.index + 1) if h.index != s.final else 1 << 8
    following = h.layer.next_sequence
    following = -1 if following is None else following
    if following == -1:
        return 1 << 8 if h.index != s.layer_count - 1 else 0
    if following != h.index + 1:
        return 1 << 7 | following + s.hw_add(following)
    snoop = h.layer.spec.snoop_sequence
    if snoop is not None:
        return 1 << 7 | int(snoop) + s.hw_add(int(snoop))
    return 0


def _counts(h: HwLayer, s: PlanSettings) -> tuple[int, int]:
    """Row and column count registers (with padding)."""
    regs = s.chip.regs
    if h.flatten:
        in_row, in_col = h.pool
    elif h.hw_operator == "convtranspose2d":
        in_row, in_col = h.stride[0] * h.hw_input_dim[0], h.stride[1] * h.hw_input_dim[1]
    elif h.hw_operator == "none" and h.emulate_eltwise:
        in_row, in_col = h.hw_input_dim[0] * h.in_expand, h.hw_input_dim[1]
    else:
        in_row, in_col = h.hw_input_dim
    pad_r, pad_c = h.hw_padding
    if regs.cnt_diff_shift is None:
        rows = (in_row - 1 | pad_r << regs.pad_cnt_shift) + 2 * pad_r
        cols = (in_col - 1 | pad_c << regs.pad_cnt_shift) + 2 * pad_c
        return rows, cols

    def last_fetch(size: int, k: int) -> int:
        pool, dil, stride = h.pool[k], h.pool_dilation[k], h.pool_stride[k]
        return size - ((size - pool - dil + 1) // stride) * stride

    diff = last_fetch(in_row, 0)
    rows = in_row - diff
    diff_c = 1 if h.hw_operator == "conv1d" else last_fetch(in_col, 1)
    step = (diff_c + (h.pool_stride[0] - 1) * in_col) * (h.input_skip + 1) * h.operands
    rows |= step * h.in_expand << regs.cnt_diff_shift
    if pad_r > 0:
        rows |= 1 << regs.pad_ena_shift | (pad_r - 1) << regs.pad_cnt_shift
    diff = last_fetch(in_col, 1)
    cols = in_col - diff | diff << regs.cnt_diff_shift
    if pad_c > 0:
        cols |= 1 << regs.pad_ena_shift | (pad_c - 1) << regs.pad_cnt_shift
    return rows, cols


def _write_pointer(h: HwLayer, s: PlanSettings, group: int, local: bool) -> int:
    regs, chip = s.chip.regs, s.chip
    val = (h.out_offset - h.out_ignore) // 4
    omap, pmap = h.output_processor_map, h.processor_map
    if local:
        instance = ffs(omap >> group * chip.shared) & ~(chip.shared - 1)
        return val | (instance + group * chip.shared) * regs.instance_size
    if h.hw_operator != "none" and h.groups > 1 and not h.broadcast:
        first_group = ffs(pmap) // chip.per_group
        if group < first_group:
            return 0
        wptr = (group - first_group) * chip.per_group + ffs(omap)
        if group != first_group:
            wptr -= ffs(pmap) % chip.per_group
        return val | (wptr // chip.shared) << regs.write_ptr_shift
    if h.hw_operator != "none":
        instance = ffs(omap) & ~(chip.shared - 1)
    elif omap & chip.group_mask(group):
        instance = ffs(omap & chip.group_mask(group)) & ~(chip.shared - 1)
    else:
        instance = 0
    return (
        val
        | (instance % chip.shared) * regs.instance_size
        | (instance // chip.shared) << regs.write_ptr_shift
    )


def _timeslot_offset(h: HwLayer, s: PlanSettings) -> int:
    size = s.chip.regs.instance_size
    if h.hw_operator in ("conv2d", "linear"):
        if h.hw_kernel_size == (1, 1) and h.groups == 1:
            return 1
        if h.groups > 1 and not h.broadcast:
            return size * 4
        return 0
    if h.hw_operator == "none":
        if popcount(h.processor_map) > 4 or (h.operands > 1 and h.in_expand > 1):
            return size * 4
        return size
    return 0


def _layer_control(h: HwLayer, s: PlanSettings, group: int, local: bool) -> int:
    regs, chip = s.chip.regs, s.chip
    val = rm.LCTL_MASTER
    if h.activation == "relu":
        val |= rm.LCTL_RELU
    if not h.pool_average:
        val |= rm.LCTL_MAX_POOL
    if h.pooling:
        val |= rm.LCTL_POOL_ENABLE
    if h.big_data:
        val |= rm.LCTL_BIG_DATA
    if not local:
        val |= rm.LCTL_GLOBAL_WRITE
    if h.groups > 1 and h.broadcast:
        val |= rm.LCTL_BROADCAST
    if h.output_width != 8:
        val |= rm.LCTL_WIDE_OUTPUT
    quad = s.opts.rules.fast_fifo_quad and h.index == s.first
    if not quad and h.hw_operator != "none" and group == s.groups_used[0] and h.groups == 1:
        sources = 0
        for t in range(s.groups_used[0] + 1, chip.groups):
            if chip.group_bits(h.processor_map, t):
                sources |= 1 << t
        bias_group = s.bias.group.get(h.index)
        if isinstance(bias_group, int) and bias_group != group:
            sources |= 1 << bias_group
        val |= sources << rm.LCTL_SOURCES_SHIFT
    if h.rd_ahead and regs.rd_ahead_shift is not None:
        val |= 1 << regs.rd_ahead_shift
    if regs.cprime_max_shift is not None and h.hw_operator != "none":
        val |= (h.hw_kernel_size[0] - 1) << regs.rprime_max_shift
        val |= (h.hw_kernel_size[1] - 1) << regs.cprime_max_shift
    if h.rd_ahead and regs.shift_cnt_shift is not None:
        shift = (h.in_expand - 1) // 4 if h.tcalc else h.in_expand - 1
        val |= shift << regs.shift_cnt_shift
    if h.bypass:
        val |= rm.LCTL_BYPASS
    return val


def flatten_product(h: HwLayer) -> int:
    if h.flatten:
        return h.in_expand * h.hw_pooled_dim[0] * h.hw_pooled_dim[1] - 1
    return 0


def _layer_control2(h: HwLayer, s: PlanSettings) -> int:
    if h.flatten:
        in_exp = flatten_product(h) & 0x0F
    elif h.hw_operator == "none" and h.emulate_eltwise:
        in_exp = 0
    else:
        in_exp = h.in_expand - 1
    if in_exp >= 16:
        raise EdgesynthError(
            f"the layer needs {in_exp + 1} input passes; the device supports at most 16.",
            layer=h.index,
            layer_name=h.layer.spec.name,
        )
    quant = h.bits if not h.bypass else 8
    omap = h.output_processor_map
    span = fls(omap) - (ffs(omap) & ~(s.chip.shared - 1))
    val = (span * quant) << s.chip.regs.xpch_max_shift | in_exp
    skip = h.out_expand * (h.write_gap + 1) - 1 if h.hw_operator != "none" else h.write_gap
    return val | skip << 4


def _mask_count(h: HwLayer, s: PlanSettings) -> tuple[int, int, int]:
    """(kernel count field, kernel offset field, 1D start offset) of the mask registers."""
    if h.hw_operator == "none":
        return 0, 0, 0
    layout = s.kernels.layouts.get(h.index)
    count = layout.count if layout else 0
    offset = layout.offset if layout else 0
    quant = h.bits if not h.bypass else 8
    kc = count if not h.bypass else h.output_chan // h.groups
    kl = (kc - 1) * quant
    if h.index == s.first and h.calcx4:
        kl += quant
        kl = (kl + 3) // 4
        kl -= quant
    kh, kw = h.hw_kernel_size
    koffs, sad = divmod(9 * offset, kh * kw)
    if h.calcx4:
        koffs = calcx4_index(koffs, s)
    return kl, koffs * 8, sad


def calcx4_index(k: int, s: PlanSettings) -> int:
    regs = s.chip.regs
    if not s.chip.device.supports_calcx4:
        return k
    small, large = regs.mask_width_small, regs.mask_width_large
    if k < small:
        return (k % 4) * (small // 4) + k // 4
    k -= small
    return (k % 4) * ((large - small) // 4) + k // 4 + small


def _oned(h: HwLayer, s: PlanSettings, sad: int) -> int:
    val = tscnt_max(h)
    if h.hw_operator == "conv1d":
        val |= h.hw_kernel_size[0] << rm.ONED_KERNEL_SHIFT | rm.ONED_ENABLE
    elif (h.hw_operator in ("conv2d", "linear") and h.hw_kernel_size == (1, 1)) or (
        h.hw_operator == "none" and h.operands == 1
    ):
        val |= rm.ONED_ONEXONE
    if h.operands > 1:
        val |= (
            rm.ONED_ELTWISE
            | rm.ELTWISE_ENCODING[h.eltwise or "add"] << rm.ONED_ELT_FN_SHIFT
            | (h.operands - 1) << rm.ONED_OPERANDS_SHIFT
        )
        if h.pooling and h.layer.pool_first:
            val |= rm.ONED_POOL_FIRST
        if h.hw_operator != "none":
            val |= rm.ONED_ELT_CONV
    return val | sad << rm.ONED_SAD_SHIFT


def _tram_max(h: HwLayer, s: PlanSettings) -> int:
    fp = flatten_product(h)
    if h.hw_operator == "conv1d" or (
        h.hw_operator in ("conv2d", "linear")
        and h.hw_kernel_size == (1, 1)
        and (h.index == 0 or not h.streaming)
    ):
        return fp << 16 | (2 * fp + 1) if fp >= 16 else 0
    val = h.tram_max - 1
    if h.index > 0 and h.streaming:
        prev_max = sum(o.tram_max * o.in_expand for o in s.hw if o.index < h.index)
        val += prev_max
        val |= prev_max << 16
    return val


def _post(h: HwLayer, s: PlanSettings, group: int) -> int:
    if h.bits == 1:
        val = 1 << rm.POST_WEIGHT_BITS_SHIFT
    elif h.quantization == 2:
        val = 2 << rm.POST_WEIGHT_BITS_SHIFT
    elif h.quantization == 4:
        val = 3 << rm.POST_WEIGHT_BITS_SHIFT
    else:
        val = 0
    shift = h.output_shift
    val |= ((-shift | 16) if shift < 0 else shift) << rm.POST_SHIFT_SHIFT
    bias_group = s.bias.group.get(h.index)
    offsets = s.bias.offsets.get(h.index, [None] * s.chip.groups)
    quad = s.opts.rules.fast_fifo_quad and h.index == 0
    if h.groups == 1 and group == bias_group:
        offs = offsets[group]
        if h.calcx4:
            offs //= 4
        val |= rm.POST_BIAS_ENABLE | offs
    elif offsets[group] is not None and (h.groups > 1 or quad):
        offs = offsets[group]
        if h.broadcast:
            offs //= 4
        val |= rm.POST_BIAS_ENABLE | offs
    if (
        not s.chip.device.supports_multipass_eltwise_conv_bias
        and group == bias_group
        and h.operator != "none"
        and h.operands > 1
    ):
        raise EdgesynthError(
            "on this device a multi-pass element-wise operation must be in a separate layer "
            "from a convolution with bias.",
            layer=h.index,
            layer_name=h.layer.spec.name,
        )
    if h.hw_operator == "none":
        val |= (rm.POST_TS_ENABLE | rm.POST_ONEXONE) if h.operands == 1 else rm.POST_TS_ENABLE
    if h.activation == "abs":
        val |= rm.POST_ABS
    fp = flatten_product(h)
    if fp >= 16:
        val |= rm.POST_FLATTEN | (fp >> 4) << rm.POST_XPMP_SHIFT
    if h.hw_operator == "convtranspose2d":
        val |= rm.POST_DECONV
    if h.groups > 1:
        val |= rm.POST_DEPTHWISE | rm.POST_TS_ENABLE
    if h.calcx4:
        val |= rm.POST_CALCX4
    if h.tcalc:
        val |= rm.POST_TCALC
    return val


def _enables(h: HwLayer, s: PlanSettings, group: int) -> int:
    val = s.chip.group_bits(h.processor_map, group)
    if h.hw_operator != "none" and not h.bypass:
        val = val << 16 | val
    return val


def configure_writes(s: PlanSettings) -> Writes:
    """cnn_configure(): every layer's registers in every used quadrant, then the FIFOs."""
    w = Writes(s.chip.regs, s.opts.plan.write_zero_registers)
    regs = s.chip.regs
    has_nxtlyr = "NXTLYR" in regs.layer_regs
    for r in range(s.opts.rules.repeat_layers):
        for h in s.hw:
            hw_layer = r * (s.layer_count + s.hidden_layers) + h.index + h.hw_add
            local = _local_source(h, s)
            rows, cols = _counts(h, s)
            stream = s.streams.get(h.index)
            for gindex, g in enumerate(s.groups_used):
                reset = h.avgpool_reset and g == s.groups_used[0]
                if reset:
                    w.note("Average pool accumulator reset layer and")
                w.note(f"Layer {r * s.layer_count + h.index} quadrant {g}")
                if has_nxtlyr:
                    w.lreg(g, hw_layer, "NXTLYR", _next_layer(h, s), "Next Layer")
                if reset:
                    w.lreg(g, hw_layer - 1, "RCNT", 1 << 16)
                w.lreg(g, hw_layer, "RCNT", rows, "Rows")
                if reset:
                    w.lreg(g, hw_layer - 1, "CCNT", 1 << 16)
                w.lreg(g, hw_layer, "CCNT", cols, "Columns")
                for k, reg in ((0, "PRCNT"), (1, "PCCNT")):
                    val = (h.pool[k] - 1) * h.pool_dilation[k]
                    if regs.cnt_inc_shift is not None:
                        val |= (h.pool_dilation[k] - 1) << regs.cnt_inc_shift
                    w.lreg(g, hw_layer, reg, val, "Pooling rows" if k == 0 else "Pooling columns")
                if h.hw_operator == "convtranspose2d":
                    val = 0
                elif h.pool_stride[0] > 1:
                    val = h.pool_stride[0] - 1
                else:
                    val = h.stride[0] - 1
                if regs.mp_stride_shift is not None:
                    val |= (
                        h.pool_stride[0] * h.operands * h.in_expand * (h.input_skip + 1)
                        << regs.mp_stride_shift
                    )
                if reset:
                    w.lreg(g, hw_layer - 1, "STRIDE", 0x10)
                w.lreg(g, hw_layer, "STRIDE", val, "Stride")
                val = _write_pointer(h, s, g, local)
                if reset:
                    w.lreg(g, hw_layer - 1, "WPTR_BASE", val)
                w.lreg(g, hw_layer, "WPTR_BASE", val, "SRAM write ptr")
                val = _timeslot_offset(h, s)
                if reset:
                    w.lreg(g, hw_layer - 1, "WPTR_TOFFS", val)
                w.lreg(g, hw_layer, "WPTR_TOFFS", val, "Write ptr time slot offs")
                if h.hw_operator != "none":
                    w.lreg(
                        g, hw_layer, "WPTR_MOFFS", 1 << regs.write_ptr_shift, "Write ptr mask offs"
                    )
                val = (h.output_width // 8) * (h.write_gap + 1) if h.out_expand > 1 else 0
                w.lreg(g, hw_layer, "WPTR_CHOFFS", val, "Write ptr multi-pass channel offs")
                if reset:
                    w.lreg(g, hw_layer - 1, "RPTR_BASE", h.in_offset // 4)
                w.lreg(g, hw_layer, "RPTR_BASE", h.in_offset // 4, "SRAM read ptr")
                if reset:
                    w.lreg(g, hw_layer - 1, "LCTL", 0x920)
                w.lreg(g, hw_layer, "LCTL", _layer_control(h, s, g, local), "Layer control")
                w.lreg(g, hw_layer, "LCTL2", _layer_control2(h, s), "Layer control 2")
                kl, koffs, sad = _mask_count(h, s)
                if "MCNT1" in regs.layer_regs:
                    if h.hw_operator != "none":
                        w.lreg(g, hw_layer, "MCNT1", kl + koffs, "Mask count")
                        w.lreg(g, hw_layer, "MCNT2", koffs, "Mask offset")
                    else:
                        w.lreg(g, hw_layer, "MCNT2", (h.out_expand - 1) * 8, "Mask offset")
                else:
                    if h.hw_operator != "none":
                        val = koffs << regs.mcnt_sad_shift | kl + koffs
                    elif h.emulate_eltwise:
                        val = 0
                    else:
                        val = (h.out_expand - 1) * 8
                    w.lreg(g, hw_layer, "MCNT", val, "Mask offset and count")
                if "OCHAN" in regs.layer_regs:
                    w.lreg(g, hw_layer, "OCHAN", _ochan(h, s), "Output channel count")
                if reset:
                    w.lreg(g, hw_layer - 1, "ONED", 0x100)
                w.lreg(g, hw_layer, "ONED", _oned(h, s, sad), "1D")
                w.lreg(g, hw_layer, "TPTR", _tram_max(h, s), "TRAM ptr max")
                if reset:
                    w.lreg(g, hw_layer - 1, "POST", 0x03000000)
                w.lreg(g, hw_layer, "POST", _post(h, s, g), "Post processing register")
                if reset:
                    w.lreg(g, hw_layer - 1, "ENA", 1)
                w.lreg(g, hw_layer, "ENA", _enables(h, s, g), "Mask and processor enables")
                start = stream.start if stream else 0
                if s.opts.rules.fifo_go and h.index == s.first:
                    start |= 1 << 25
                w.lreg(g, hw_layer, "STREAM1", start, "Stream processing start")
                val = stream.delta2 << 16 | stream.delta1 << 4 | stream.invol if stream else 0
                w.lreg(g, hw_layer, "STREAM2", val, "Stream processing delta")
                if stream is not None and stream.rollover is not None:
                    w.lreg(
                        g,
                        hw_layer,
                        "FMAX",
                        stream.rollover,
                        "Rollover",
                        verify=s.chip.device.name == "MAX78000",  # not readable on MAX78002
                    )
                if h.index == s.first and s.opts.rules.fifo:
                    val = h.hw_input_dim[0] * h.hw_input_dim[1]
                    if h.big_data:
                        val = (val + 3) // 4
                    w.ctl(g, regs.reg_ifrm, val, "Input frame size")
                del gindex
    _snoop_writes(w, s)
    _fifo_writes(w, s)
    return w


def _ochan(h: HwLayer, s: PlanSettings) -> int:
    if h.bypass:
        return h.output_chan - 1
    if h.hw_operator != "none" and h.groups == 1:
        layout = s.kernels.layouts.get(h.index)
        val = (layout.ochan if layout else 0) - 1
        return val // 4 if h.calcx4 else val
    if h.groups > 1:
        return (tscnt_max(h) + 1) * h.in_expand - 1
    return tscnt_max(h)


_SNOOP_REGS = [0x42020 + i for i in range(24)]
_SNP1 = {
    name: _SNOOP_REGS[i]
    for i, name in enumerate(("A1", "A2", "D1", "D2", "X1", "X2", "C1", "C2", "ACC", "HIT"))
}


def _snoop_writes(w: Writes, s: PlanSettings) -> None:
    snoop = s.net_spec.snoop
    if snoop is None:
        return
    for g in s.groups_used:
        for reg, value in zip(_SNOOP_REGS, snoop[:24], strict=False):
            w.ctl(g, reg, value, "Snoop")


def _fifo_enable(s: PlanSettings, g: int) -> int:
    """The FIFO bits of quadrant g's CTRL in cnn_start()."""
    if not s.opts.rules.fifo:
        return 0
    if not s.processor_map_0 & 0x0F << g * 16:
        return rm.CTL_FIFO
    fval = rm.CTL_FIFO
    if s.opts.rules.fast_fifo:
        fval |= rm.CTL_FAST_FIFO
    if s.fifo_group:
        fval |= rm.CTL_FIFO_GROUP
    return fval


def _snoop_loop_writes(w: Writes, s: PlanSettings) -> None:
    """--snoop-loop: the last layer links back to layer 0, and snoop unit 1 watches the
    last layer's first output word and decides whether the link is taken (the vendor's
    words: count 0x84d0 with the pipeline, 0x2134 without; control 0x8a412014, then the same
    with the enable bit)."""
    last = s.hw[-1]
    hw_layer = (s.opts.rules.repeat_layers - 1) * (s.layer_count + s.hidden_layers)
    hw_layer += last.index + last.hw_add
    for g in s.groups_used:
        w.lreg(g, hw_layer, "NXTLYR", 0x80, "Link Layer", force=True)
        w.ctl(g, _SNP1["HIT"], 0, "Clear match hit accumulator", force=True)
        w.ctl(g, _SNP1["A1"], 0x00200000 | last.out_offset >> 2, "Address snoop 1", force=True)
        w.ctl(g, _SNP1["X1"], 0x84D0 if s.pipeline else 0x2134, "Count snoop 1", force=True)
        w.ctl(g, _SNP1["C2"], 0x4000, "Snoop 1 control register 2", force=True)
        w.ctl(g, _SNP1["C1"], 0x8A412014, "Snoop 1 control register 1", force=True)
        w.ctl(g, _SNP1["C1"], 0x8A412015, "Snoop 1 control register 1", force=True)


def _fifo_writes(w: Writes, s: PlanSettings) -> None:
    if not s.opts.rules.fifo:
        return
    chip = s.chip
    if not s.opts.rules.fast_fifo:
        val = 0x02 << 2 | 0x02 << 7 | _ready(s.opts.plan.ready_sel_fifo)
        if chip.device.name == "MAX78000":
            val |= 1 << 11
        first = s.by_index[s.first]
        for i in range(first.input_chan):
            if s.processor_map_0 & 1 << (i % chip.groups) * chip.per_group:
                val |= 1 << (i % chip.groups) + 12
        w.fifo(rm.FIFO_CTL, val, "FIFO control")
    else:
        w.raw(rm.FAST_FIFO_BASE_ADDRESS + rm.FAST_FIFO_IE, 0, "Fast FIFO interrupt enable")
        w.raw(rm.FAST_FIFO_BASE_ADDRESS + rm.FAST_FIFO_CR, 10 << 4, "Fast FIFO control")


def control_value(s: PlanSettings) -> int:
    """The control register value every quadrant runs with (before its own bits)."""
    dev = s.chip.device
    streaming = any(h.streaming for h in s.hw)
    val = rm.CTL_STREAMING if streaming else 0
    if s.opts.sim.avg_pool_rounding:
        val |= rm.CTL_POOL_ROUNDING
    if s.opts.rules.fifo:
        val |= rm.CTL_EXT_SYNC
        if streaming:
            val |= rm.CTL_FIFO_STREAMING
    val |= rm.CTL_CLOCK_ENABLE
    if s.opts.plan.mexpress:
        val |= rm.CTL_MEXPRESS
    if s.opts.sim.simple1b:
        val |= rm.CTL_SIMPLE1B
    if s.binary:
        val |= rm.CTL_BINARY
    if s.opts.rules.fast_fifo_quad:
        val |= rm.CTL_QUPAC
    if s.opts.rules.one_shot:
        val |= rm.CTL_ONESHOT
    if s.opts.plan.ext_rdy:
        val |= rm.CTL_EXT_RDY
    first = s.by_index[s.first]
    if s.chip.regs.ctl_pipeline_shift is not None:
        if not s.pipeline:
            val |= 1 << s.chip.regs.ctl_pipeline_shift
        if first.streaming and first.big_data:
            val |= rm.CTL_STREAM_CHW
    if s.net_spec.snoop is not None:
        val |= rm.CTL_APB_CLOCK
    if dev.supports_pipeline and not s.pipeline:
        val |= rm.CTL_NO_PIPELINE
    return val


def start_writes(s: PlanSettings) -> tuple[Writes, Writes]:
    """cnn_start(): enable every quadrant; then (after the timer starts) the master quadrant."""
    w = Writes(s.chip.regs, s.opts.plan.write_zero_registers)
    go = Writes(s.chip.regs, s.opts.plan.write_zero_registers)
    val = control_value(s)
    first_group = s.groups_used[0]
    # With the pipeline (MAX78002) the ready select is fixed at 0.
    rdy = 0 if s.pipeline and s.chip.device.supports_pipeline else _ready(s.opts.plan.ready_sel)
    fifo = s.opts.rules.fifo
    for g in s.groups_used:
        fval = _fifo_enable(s, g)
        if s.opts.plan.snoop_loop:
            fval |= rm.CTL_APB_CLOCK
        else:
            if g != first_group:
                fval |= rm.CTL_ENABLE
            fval |= rm.CTL_EXT_SYNC
        value = val | rdy << 1 | fval | first_group << rm.CTL_MASTER_SHIFT
        w.ctl(g, rm.REG_CTL, value, f"Enable quadrant {g}")
    if s.opts.plan.powerdown:
        unused = [g for g in range(s.chip.groups) if g not in s.groups_used]
        val2 = 0
        for g in unused:
            val2 |= 1 << 12 + g
        w.fifo(rm.AON_CTL, val2 | _ready(s.opts.plan.ready_sel_aon), "AON control")
    if s.opts.plan.snoop_loop:
        _snoop_loop_writes(w, s)
        for g in s.groups_used:
            fval = _fifo_enable(s, g) | rm.CTL_EXT_SYNC | rm.CTL_APB_CLOCK
            if g != first_group:
                fval |= rm.CTL_ENABLE
            value = val | rdy << 1 | fval | first_group << rm.CTL_MASTER_SHIFT
            w.ctl(g, rm.REG_CTL, value, f"Enable quadrant {g}")
    if fifo and s.processor_map_0 & 0x0F << first_group * 16:
        val |= rm.CTL_FIFO
        if s.opts.rules.fast_fifo:
            val |= rm.CTL_FAST_FIFO
        if s.fifo_group:
            val |= rm.CTL_FIFO_GROUP
    if s.opts.plan.snoop_loop:
        val |= rm.CTL_APB_CLOCK
    value = val | rdy << 1 | rm.CTL_ENABLE
    go.ctl(first_group, rm.REG_CTL, value, f"Master enable quadrant {first_group}")
    return w, go
