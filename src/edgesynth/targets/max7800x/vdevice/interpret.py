"""What one layer does, read from its registers alone.

`interpret(machine, layer)` turns the registers of every quadrant into a `LayerProgram`: the
input geometry and where it is read, pooling, the operation, the kernel-memory addresses, bias,
output scaling and activation, and the write-pointer arithmetic. Nothing here knows the YAML,
the checkpoint or edgesynth's plan; the field meanings are documented in `regmap.py` and
docs/vdevice.md.
"""

from __future__ import annotations

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.vdevice.record import Factory, Record
from edgesynth.targets.max7800x.vdevice.state import Machine

MASK_SIZE_BITS = {0: 8, 1: 1, 2: 2, 3: 4}


class WritePointer(Record):
    """One quadrant's output addressing: linear word address = base + offsets (see execute)."""

    base: int
    toff: int
    moff: int
    choff: int
    inc: int  # extra increment per output pixel (LCTRL1.wptr_inc)


class GroupPart(Record):
    """What one quadrant contributes to a layer."""

    group: int
    processors: list[int]  # global processor numbers reading input (EN.pro_en)
    masked: list[int]  # processors applying kernels (EN.mask_en)
    sums_from: list[int]  # quadrants whose partial sums this one adds (LCTRL0.cnnsi_en)
    bias_enabled: bool
    bias_start: int
    write: WritePointer


class LayerProgram(Record):
    """What one layer's registers tell the accelerator to do."""

    layer: int
    device: str
    parts: dict[int, GroupPart]
    rows: int  # input rows read (before pooling, without padding)
    cols: int
    pad: tuple[int, int]
    big_data: bool  # CHW input: 4 pixels of one channel per word
    read_ptr: int  # words
    passes: int  # input words per pixel per operand (multi-pass, flatten)
    pixel_words: int  # words from one input pixel to the next (passes x operands, read gap)
    operands: int  # element-wise operands
    eltwise: str | None  # "sub", "add", "or", "xor"
    prepool: bool
    conv_after_eltwise: bool
    pool: tuple[int, int]
    pool_stride: tuple[int, int]
    pool_dilation: tuple[int, int]
    pooling: str | None  # "max", "avg" or None
    pool_rounding: bool
    stride: tuple[int, int]  # convolution stride (MAX78002 with no pool stride)
    kernel: tuple[int, int]  # (rows, cols) of the kernel window, (1,1) for 1x1
    one_d: bool
    oned_width: int
    oned_sad: int
    mask_start: int
    mask_end: int
    weight_bits: int
    binary: bool
    shift: int  # output shift: positive left, negative right
    relu: bool
    absolute: bool
    out32: bool
    timeslots: int  # tscnt_max + 1
    ts_mode: bool
    onexone: bool
    flatten: bool
    deconv: bool
    depthwise: bool
    broadcast: bool  # depthwise with output processors = input processors
    bypass: bool  # MAX78002 kernel bypass: every weight is 1, no kernel memory
    calcx4: bool
    ochan: int  # MAX78002 OCHAN.ochan_max
    xpch_max: int
    stream_enabled: bool  # CTRL.stream_en
    fbuf: int  # streaming circular buffer size in words (0: none)
    stream_start: int  # STRM0.strm_isval
    fifo: str | None = None  # first layer fed by the "standard" or "fast" FIFO
    fifo_group: bool = False  # CTRL.fifogrp
    streamed: bool = False  # reads a streaming circular buffer
    qupac: bool = False  # first layer in x16 parallel mode (CTRL.qupac)
    notes: list[str] = Factory(list)

    @property
    def passthrough(self) -> bool:
        return not self.bypass and all(not p.masked for p in self.parts.values())

    @property
    def steps(self) -> int:
        """Mask-counter steps: output slots x passes."""
        return (self.mask_end - self.mask_start) // self.weight_bits + 1

    @property
    def slots(self) -> int:
        if self.bypass:  # no kernels: OCHAN counts the output channels
            return self.ochan + 1
        if self.calcx4:  # OCHAN counts groups of four outputs per pass
            return max(1, 4 * (self.ochan + 1) // self.passes)
        return max(1, self.steps // self.passes)

    @property
    def slots_per_pass(self) -> int:
        return self.xpch_max // self.weight_bits + 1

    @property
    def kernel_taps(self) -> int:
        return self.kernel[0] * self.kernel[1]


def active_groups(machine: Machine, layer: int) -> list[int]:
    return [g for g in range(4) if machine.field(g, layer, "EN", "pro_en")]


def interpret(machine: Machine, layer: int) -> LayerProgram:
    """Decode layer `layer` of every quadrant."""
    groups = active_groups(machine, layer)
    if not groups:
        raise EdgesynthError(f"layer {layer} enables no processor (EN is 0 in every quadrant)")
    r = _Registers(machine, layer, groups[0])
    lctrl0, post, oned, ctrl = r.lctrl0, r.post, r.oned, r.ctrl
    step, pool, dil, pooling = _pooling(r)
    rows, cols, pad, per_pixel = _input_geometry(r, step, pool, dil)
    deconv = bool(post["deconv_en"])
    if deconv:
        # The counters span the zero-stuffed image: a 0 after every input byte and a row of 0s
        # after every input row (POST.deconv_en).
        rows, cols = rows // 2, cols // 2
    passes = _passes(r)
    ewise = bool(oned["ewise_en"])
    operands = oned["ewise_cnt"] + 1 if ewise else 1
    pixel_words = per_pixel if r.is87 else passes * operands
    kernel, mask_start, mask_end = _kernel_and_masks(r)
    bits = MASK_SIZE_BITS[post["mask_size"]]
    parts = {
        g: _group_part(machine, layer, g) for g in sorted(_taking_part(machine, layer, groups))
    }
    return LayerProgram(
        layer=layer,
        device=machine.dmap.name,
        parts=parts,
        rows=rows,
        cols=cols,
        pad=pad,
        big_data=bool(lctrl0["parallel"]),
        read_ptr=machine.reg(r.g0, layer, "RPTR_BASE"),
        passes=passes,
        pixel_words=max(pixel_words, passes * operands),
        operands=operands,
        eltwise=("sub", "add", "or", "xor")[oned["ewise_func"]] if ewise else None,
        prepool=bool(oned["prepool"]),
        conv_after_eltwise=bool(oned["two_d_conv"]),
        pool=pool,
        pool_stride=(step, step),
        pool_dilation=dil,
        pooling=pooling,
        pool_rounding=bool(ctrl["poolrnd"]),
        stride=(1, 1),
        kernel=kernel,
        one_d=bool(oned["oned_en"]),
        oned_width=oned["oned_width"],
        oned_sad=oned["oned_sad"],
        mask_start=mask_start,
        mask_end=mask_end,
        weight_bits=bits,
        binary=bits == 1 and bool(ctrl["timeshft"]) and r.is87,
        shift=post["scale_reg"] * (-1 if post["scale_shft"] else 1),
        relu=bool(lctrl0["act_en"]),
        absolute=bool(post["out_abs"]),
        out32=bool(lctrl0["bigdwrt"]),
        timeslots=oned["tscnt_max"] + 1,
        ts_mode=bool(post["ts_en"]),
        onexone=bool(post["onexone_en"]),
        flatten=bool(post["flatten_en"]),
        deconv=deconv,
        depthwise=bool(post.get("dw_en")),
        broadcast=bool(lctrl0.get("dw_broadcast")),
        bypass=bool(lctrl0.get("bypass")),
        calcx4=bool(post.get("calcx4")),
        ochan=r.f("OCHAN", "ochan_max") if r.is87 else 0,
        xpch_max=r.f("LCTRL1", "xpch_max"),
        stream_enabled=bool(ctrl["stream_en"]),
        fbuf=r.f("FBUF", "fbuf_max"),
        stream_start=r.f("STRM0", "strm_isval"),
        fifo_group=bool(ctrl["fifogrp"]),
    )


class _Registers:
    """The layer's registers in its first active quadrant (those that describe the layer as
    a whole), and the global control register."""

    def __init__(self, machine: Machine, layer: int, g0: int) -> None:
        self.machine = machine
        self.layer = layer
        self.g0 = g0
        self.is87 = machine.dmap.name == "MAX78002"
        self.lctrl0 = machine.fields(g0, layer, "LCTRL0")
        self.post = machine.fields(g0, layer, "POST")
        self.oned = machine.fields(g0, layer, "ONED")
        self.ctrl = machine.global_fields(g0, "CTRL")

    def f(self, reg: str, name: str) -> int:
        return self.machine.field(self.g0, self.layer, reg, name)


def _pooling(
    r: _Registers,
) -> tuple[int, tuple[int, int], tuple[int, int], str | None]:
    """Pool stride, window, dilation and kind (None: no pooling, a 1x1 window)."""
    step = r.f("STRIDE", "stride") + 1
    pool_en = bool(r.lctrl0["pool_en"])
    if r.is87:
        dil = (r.f("PRCNT", "prcnt_inc") + 1, r.f("PCCNT", "pccnt_inc") + 1)
        pool = (r.f("PRCNT", "prcnt_max") // dil[0] + 1, r.f("PCCNT", "pccnt_max") // dil[1] + 1)
    else:
        dil = (1, 1)
        pool = (r.f("PRCNT", "prcnt_max") + 1, r.f("PCCNT", "pccnt_max") + 1)
    pooling = ("max" if r.lctrl0["maxpl_en"] else "avg") if pool_en else None
    if not pool_en:
        pool = (1, 1)
    return step, pool, dil, pooling


def _input_geometry(
    r: _Registers, step: int, pool: tuple[int, int], dil: tuple[int, int]
) -> tuple[int, int, tuple[int, int], int]:
    """Rows and columns read (before pooling, without padding), the padding, and on the
    MAX78002 the words per pixel its counters give (0 on the MAX78000)."""
    if r.is87:
        last_start, cols, pad, per_pixel = _counts_87(r.machine, r.layer, r.g0, step)
        return last_start + (pool[0] - 1) * dil[0] + 1, cols, pad, per_pixel
    pad = (r.f("RCNT", "rcnt_pad"), r.f("CCNT", "ccnt_pad"))
    rows = r.f("RCNT", "rcnt_max") + 1 - 2 * pad[0]
    cols = r.f("CCNT", "ccnt_max") + 1 - 2 * pad[1]
    return rows, cols, pad, 0


def _passes(r: _Registers) -> int:
    """Input words per pixel per operand (multi-pass; flatten counts with POST.xpmp_cnt)."""
    if r.post["flatten_en"]:
        return (r.post["xpmp_cnt"] << 4 | r.f("LCTRL1", "inpchexp")) + 1
    return r.f("LCTRL1", "inpchexp") + 1


def _kernel_and_masks(r: _Registers) -> tuple[tuple[int, int], int, int]:
    """The kernel window (rows, cols) and the mask counter's start and end."""
    one_d, oned_width = bool(r.oned["oned_en"]), r.oned["oned_width"]
    if r.is87:
        kernel = (r.lctrl0["rprime_max"] + 1, r.lctrl0["cprime_max"] + 1)
    else:
        kernel = (1, 1) if oned_width == 1 and not one_d else (3, 3)
    if one_d:
        kernel = (oned_width, 1)
    if r.is87:
        return kernel, r.f("MCNT2", "mcnt_sad"), r.f("MCNT1", "mcnt_max")
    return kernel, r.f("MCNT", "mcnt_sad"), r.f("MCNT", "mcnt_max")


def _taking_part(machine: Machine, layer: int, groups: list[int]) -> set[int]:
    """A quadrant that adds active quadrants' partial sums (LCTRL0.cnnsi_en) takes part even
    without processors of its own (it writes the result); so do the quadrants it adds (the
    bias may live there)."""
    sources = {t: machine.field(t, layer, "LCTRL0", "cnnsi_en") for t in range(4)}
    taking_part = set(groups)
    while True:
        grown = set(taking_part)
        for t, adds in sources.items():
            added = {u for u in range(4) if adds >> u & 1 and u != t}
            if t in taking_part or added & set(groups):
                grown |= added | ({t} if added & set(groups) else set())
        if grown == taking_part:
            return taking_part
        taking_part = grown


def _group_part(machine: Machine, layer: int, g: int) -> GroupPart:
    """Quadrant `g`'s processors, kernels, partial-sum sources, bias and write pointer."""
    en = machine.fields(g, layer, "EN")
    pro, mask = en["pro_en"], en["mask_en"]
    pst = machine.fields(g, layer, "POST")
    sources = machine.field(g, layer, "LCTRL0", "cnnsi_en")
    return GroupPart(
        group=g,
        processors=[16 * g + i for i in range(16) if pro >> i & 1],
        masked=[16 * g + i for i in range(16) if mask >> i & 1],
        sums_from=[t for t in range(4) if sources >> t & 1 and t != g],
        bias_enabled=bool(pst["bptr_en"]),
        bias_start=pst["bptr_sad"],
        write=WritePointer(
            base=machine.reg(g, layer, "WPTR_BASE"),
            toff=machine.reg(g, layer, "WPTR_TOFF"),
            moff=machine.reg(g, layer, "WPTR_MOFF"),
            choff=machine.reg(g, layer, "WPTR_CHOFF"),
            inc=machine.field(g, layer, "LCTRL1", "wptr_inc"),
        ),
    )


def _counts_87(
    machine: Machine, layer: int, g: int, pool_stride: int
) -> tuple[int, int, tuple[int, int], int]:
    """MAX78002 row/column counters: the start of the last pooling window (`max`), the
    distance to the end of the frame (`diff`); padding is a separate enable and count.

    Columns: CCNT.max + CCNT.diff. Rows: only the start of the last window is known (RCNT.diff
    counts the words from the last window to the next start in the frame). Words per pixel:
    STRIDE.mp_stride / stride. Returns the last window's start row, columns, padding and the
    words per pixel.
    """
    rcnt = machine.fields(g, layer, "RCNT")
    ccnt = machine.fields(g, layer, "CCNT")
    pad = (
        (rcnt["rcnt_pad"] + 1) if rcnt["rcnt_pad_en"] else 0,
        (ccnt["ccnt_pad"] + 1) if ccnt["ccnt_pad_en"] else 0,
    )
    cols = ccnt["ccnt_max"] + ccnt["ccnt_diff"]
    mp_stride = machine.field(g, layer, "STRIDE", "mp_stride")
    per_pixel = max(1, mp_stride // pool_stride)
    # Rows past the last pooling window are never read: the caller adds the window's span.
    return rcnt["rcnt_max"], cols, pad, per_pixel
