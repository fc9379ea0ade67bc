"""The accelerator's address map and register fields, as data (MAX78000 and MAX78002).

Everything the code generator writes to lands at an address computed here: the per-quadrant
control registers, the per-layer registers, kernel (mask) memory, bias memory, TRAM, data memory,
the four input FIFOs and the fast FIFO. Facts from the public register descriptions and the
vendor's generated code; this module holds numbers only.

Offsets are relative to the APB base (0x5000_0000) unless named `*_address`. One quadrant
("group") of 16 processors owns a block of `group_stride` bytes.
"""

from __future__ import annotations

from dataclasses import field

from edgesynth.lean_dataclass import dataclass

# Per-quadrant control registers (32-bit word index from the quadrant's CNN base).
REG_CTL = 0
REG_SRAM = 1
REG_LCNT_MAX = 2
REG_SRAM_TEST = 3

# Control register (REG_CTL) bits.
CTL_ENABLE = 1 << 0
CTL_CLOCK_ENABLE = 1 << 3
CTL_EXT_RDY = 1 << 4
CTL_NO_PIPELINE = 1 << 5  # MAX78002: pipeline disabled
CTL_STREAM_CHW = 1 << 6  # MAX78002: streaming CHW input
CTL_APB_CLOCK = 1 << 7
CTL_ONESHOT = 1 << 8
CTL_MASTER_SHIFT = 9  # the first used quadrant's number
CTL_EXT_SYNC = 1 << 11
CTL_IRQ = 1 << 12
CTL_POOL_ROUNDING = 1 << 13
CTL_STREAMING = 1 << 14
CTL_FIFO = 1 << 15
CTL_FIFO_STREAMING = 1 << 19
CTL_MEXPRESS = 1 << 20
CTL_SIMPLE1B = 1 << 21
CTL_FAST_FIFO = 1 << 22
CTL_FIFO_GROUP = 1 << 23
CTL_BINARY = 1 << 30
CTL_QUPAC = 1 << 31

SRAM_CONTROL = 0x40E  # REG_SRAM: the value every generated project writes

# Layer control register (LCTL) bits.
LCTL_MASTER = 1 << 5
LCTL_BIG_DATA = 1 << 6  # CHW input
LCTL_POOL_ENABLE = 1 << 7
LCTL_MAX_POOL = 1 << 8
LCTL_RELU = 1 << 9
LCTL_GLOBAL_WRITE = 1 << 11  # write pointer is global (not local to the quadrant)
LCTL_SOURCES_SHIFT = 12  # quadrants that take part as sources (one bit each)
LCTL_WIDE_OUTPUT = 1 << 16
LCTL_BROADCAST = 1 << 29
LCTL_BYPASS = 1 << 30

# Post-processing register (POST) bits.
POST_BIAS_ENABLE = 1 << 12
POST_SHIFT_SHIFT = 13  # [17:13]: bit 4 = right shift, bits 3:0 magnitude
POST_WEIGHT_BITS_SHIFT = 22  # 1: 1-bit, 2: 2-bit, 3: 4-bit weights
POST_TS_ENABLE = 1 << 24
POST_ONEXONE = 1 << 25
POST_ABS = 1 << 26
POST_FLATTEN = 1 << 27
POST_XPMP_SHIFT = 18
POST_DECONV = 1 << 28
POST_CALCX4 = 1 << 29
POST_DEPTHWISE = 1 << 30
POST_TCALC = 1 << 31

# 1D/element-wise register (ONED) fields.
ONED_TSCNT_MASK = 0xF
ONED_SAD_SHIFT = 4
ONED_KERNEL_SHIFT = 8
ONED_ONEXONE = 1 << 8
ONED_ENABLE = 1 << 12
ONED_ELTWISE = 1 << 13
ONED_ELT_FN_SHIFT = 14
ONED_POOL_FIRST = 1 << 16
ONED_ELT_CONV = 1 << 17
ONED_OPERANDS_SHIFT = 18
ELTWISE_ENCODING = {"sub": 0b00, "add": 0b01, "or": 0b10, "xor": 0b11}

# FIFO block (offsets from the APB base).
FIFO_CTL = 0x0
FIFO_STAT = 0x4
FIFO_DATA = 0x8  # FIFO n at FIFO_DATA + 4 n
AON_CTL = 0x1000

FAST_FIFO_BASE_ADDRESS = 0x400C0400  # absolute address (peripheral space)
FAST_FIFO_CR = 0x0
FAST_FIFO_SR = 0x4
FAST_FIFO_IE = 0x8
FAST_FIFO_DR = 0x10


@dataclass(frozen=True)
class RegisterMap:
    """One device's register addresses and fields, as the generated C writes them."""

    device: str
    apb_base: int
    cnn_base: int  # the first quadrant's CNN register block
    group_stride: int  # bytes between quadrants
    global_words: int  # control words before the layer registers
    layer_stride: int | None  # bytes between layers (None: registers are arrays over layers)
    max_layers: int
    layer_regs: dict[str, int]  # layer register -> word index
    stream_regs: dict[str, int]  # streaming registers (MAX78002: separate array)
    reg_ifrm: int  # input frame size (word index from the quadrant's CNN base)
    reg_mlat: int
    bram_base: int
    tram_base: int
    mram_base: int
    sram_base: int
    tram_stride: int  # bytes between processors' TRAM
    tram_size: int
    mask_stride: int  # bytes between processors' kernel memory (16 bytes per kernel word)
    mask_width_small: int  # kernel words in a processor without the large memory
    mask_width_large: int  # kernel words in the first processor of each quadrant
    mask_instances_each: int
    mask_instance_large: int
    mask_instance_small: int
    bias_size: int  # bytes of bias memory per quadrant
    instance_size: int  # 32-bit words of address space per data memory instance
    instance_width: int  # usable 32-bit words per data memory instance
    write_ptr_shift: int
    # Field positions and widths that differ between the devices.
    pad_cnt_shift: int
    pad_ena_shift: int | None
    cnt_diff_shift: int | None
    cnt_inc_shift: int | None
    mp_stride_shift: int | None
    xpch_max_shift: int
    mcnt_sad_shift: int | None
    rd_ahead_shift: int | None
    cprime_max_shift: int | None
    rprime_max_shift: int | None
    shift_cnt_shift: int | None
    ctl_pipeline_shift: int | None
    # BIST / clear values for REG_SRAM_TEST.
    bist_zero_both: int | None
    bist_zero: int | None
    bist_zero_wait: int | None
    # Memory self-tests (--zero-sram): name -> (start value, done bits, error bit).
    bist: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    # -- addresses (offsets from the APB base) ------------------------------------------------
    def ctl(self, group: int, reg: int) -> int:
        return self.group_stride * group + self.cnn_base + reg * 4

    def lreg(self, group: int, reg: str, layer: int) -> int:
        base = self.group_stride * group + self.cnn_base + self.global_words * 4
        if reg in self.stream_regs:
            return base + self.stream_regs[reg] * 4 + layer * 4
        index = self.layer_regs[reg]
        if self.layer_stride is not None:
            return base + index * 4 + layer * self.layer_stride
        return base + index * 4 * self.max_layers + layer * 4

    def bias(self, group: int) -> int:
        return self.group_stride * group + self.bram_base

    def kernel(self, processor: int, processors_per_group: int = 16) -> int:
        """Start of a processor's kernel memory (16 bytes of address space per kernel word)."""
        group, proc = divmod(processor, processors_per_group)
        return self.group_stride * group + self.mram_base + proc * self.mask_stride

    def tram(self, group: int, processor: int) -> int:
        return self.group_stride * group + self.tram_base + processor * self.tram_stride

    def data(self, group: int) -> int:
        return self.group_stride * group + self.sram_base


_MAX78000_LAYER_REGS = {
    "RCNT": 0,
    "CCNT": 1,
    "ONED": 2,
    "PRCNT": 3,
    "PCCNT": 4,
    "STRIDE": 5,
    "WPTR_BASE": 6,
    "WPTR_TOFFS": 7,
    "WPTR_MOFFS": 8,
    "WPTR_CHOFFS": 9,
    "RPTR_BASE": 10,
    "LCTL": 11,
    "MCNT": 12,
    "TPTR": 13,
    "ENA": 14,
    "POST": 15,
    "STREAM1": 16,
    "STREAM2": 17,
    "FMAX": 18,
    "LCTL2": 20,
}

_MAX78002_LAYER_REGS = {
    "NXTLYR": 0,
    "RCNT": 1,
    "CCNT": 2,
    "ONED": 3,
    "PRCNT": 4,
    "PCCNT": 5,
    "STRIDE": 6,
    "WPTR_BASE": 7,
    "WPTR_TOFFS": 8,
    "WPTR_MOFFS": 9,
    "WPTR_CHOFFS": 10,
    "RPTR_BASE": 11,
    "LCTL": 12,
    "LCTL2": 13,
    "MCNT1": 14,
    "MCNT2": 15,
    "OCHAN": 16,
    "TPTR": 17,
    "ENA": 18,
    "POST": 19,
}

MAX78000_MAP = RegisterMap(
    device="MAX78000",
    apb_base=0x50000000,
    cnn_base=0x100000,
    group_stride=0x400000,
    global_words=4,
    layer_stride=None,
    max_layers=32,
    layer_regs=_MAX78000_LAYER_REGS,
    stream_regs={},
    reg_ifrm=612,
    reg_mlat=1024,
    bram_base=0x108000,
    tram_base=0x110000,
    mram_base=0x180000,
    sram_base=0x400000,
    tram_stride=4096 * 4,
    tram_size=3072,
    mask_stride=1024 * 16,
    mask_width_small=768,
    mask_width_large=768,
    mask_instances_each=1,
    mask_instance_large=768,
    mask_instance_small=768,
    bias_size=512,
    instance_size=2048,
    instance_width=2048,
    write_ptr_shift=13,
    pad_cnt_shift=16,
    pad_ena_shift=None,
    cnt_diff_shift=None,
    cnt_inc_shift=None,
    mp_stride_shift=None,
    xpch_max_shift=8,
    mcnt_sad_shift=16,
    rd_ahead_shift=None,
    cprime_max_shift=None,
    rprime_max_shift=None,
    shift_cnt_shift=None,
    ctl_pipeline_shift=None,
    bist_zero_both=None,
    bist_zero=None,
    bist_zero_wait=None,
    bist={
        "Data SRAM": (1 << 0, 1 << 27 | 1 << 18, 1 << 14),
        "Mask SRAM": (1 << 2, 1 << 27 | 1 << 19, 1 << 15),
        "Tornado SRAM": (1 << 4, 1 << 27 | 1 << 20, 1 << 16),
        "Bias Rfile": (1 << 6, 1 << 27 | 1 << 21, 1 << 17),
    },
)

MAX78002_MAP = RegisterMap(
    device="MAX78002",
    apb_base=0x50000000,
    cnn_base=0x1000000,
    group_stride=0x1000000,
    global_words=0x40000,
    layer_stride=0x100,
    max_layers=128,
    layer_regs=_MAX78002_LAYER_REGS,
    # The streaming registers form arrays over the (8) streaming layers.
    stream_regs={"STREAM1": 0x2000, "STREAM2": 0x2008, "FMAX": 0x2010},
    reg_ifrm=0x42018,
    reg_mlat=0x44000,
    bram_base=0x1180000,
    tram_base=0x1200000,
    mram_base=0x1400000,
    sram_base=0x1800000,
    tram_stride=16384 * 4,
    tram_size=12288,
    mask_stride=8192 * 16,
    mask_width_small=4 * 1024,
    mask_width_large=4 * 1024 + 4 * 256,
    mask_instances_each=4,
    mask_instance_large=1024,
    mask_instance_small=256,
    bias_size=2048,
    instance_size=8192,
    instance_width=5120,
    write_ptr_shift=15,
    pad_cnt_shift=13,
    pad_ena_shift=15,
    cnt_diff_shift=16,
    cnt_inc_shift=4,
    mp_stride_shift=4,
    xpch_max_shift=12,
    mcnt_sad_shift=None,
    rd_ahead_shift=17,
    cprime_max_shift=18,
    rprime_max_shift=22,
    shift_cnt_shift=26,
    ctl_pipeline_shift=5,
    bist_zero_both=1 << 12 | 1 << 11 | 1 << 10 | 1 << 7,
    bist_zero=1 << 12 | 1 << 11 | 1 << 7,
    bist_zero_wait=1 << 25,
    bist={
        "Data SRAM": (1 << 12 | 1 << 0, 1 << 18, 1 << 14),
        "Mask SRAM": (1 << 13 | 1 << 2, 1 << 19, 1 << 15),
        "Tornado SRAM": (1 << 13 | 1 << 12 | 1 << 4, 1 << 20, 1 << 16),
        "Bias Rfile": (1 << 12 | 1 << 11 | 1 << 10 | 1 << 6, 1 << 21, 1 << 17),
    },
)

REGISTER_MAPS = {m.device: m for m in (MAX78000_MAP, MAX78002_MAP)}
