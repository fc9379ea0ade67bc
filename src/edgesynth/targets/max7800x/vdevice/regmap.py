"""The accelerator's address map and registers, by name, as data, with the source of each fact.

Sources (see docs/vdevice.md):
- UG: the MAX78000 user guide's CNN register descriptions (CNNx16_n_* names, bit positions),
  read in the public transcription ekut-es/netdeployonnx `devices/max78000/cnn_registers.py`.
- TC: the vendor's register names and indices, bases and strides
  (ai8x-synthesis `izer/tornadocnn.py`, read for facts).
- BE: bit positions the vendor's code generator writes on MAX78002, whose user-guide register
  descriptions we have not seen (ai8x-synthesis `izer/backend/max7800x.py`, read for facts).
- SEED: the AHB memory address tables of the seed document 000.
- INF: inferred from the vendor's own tests where no description is public (the MAX78002 snoop
  units: the register words of its 22 snoop tests against the layer sequences and accumulator
  values those tests expect; see vdevice/snoop.py).
"""

from __future__ import annotations

import numpy as np

from edgesynth.targets.max7800x.snoop_unit import REGISTERS
from edgesynth.targets.max7800x.vdevice.record import Factory, FrozenRecord

UG = "UG"
TC = "TC"
BE = "BE"
SEED = "SEED"
INF = "INF"


class Field(FrozenRecord):
    """A register field: bits lsb..lsb+width-1, what they mean and where that is documented."""

    name: str
    lsb: int
    width: int
    meaning: str
    source: str = UG

    def get(self, value: int) -> int:
        return (int(value) >> self.lsb) & ((1 << self.width) - 1)


class Register(FrozenRecord):
    """A register: its fields and its number (or word offset)."""

    name: str
    fields: tuple[Field, ...]
    source: str = UG
    index: int = 0  # register number (layer registers) or word offset (global registers)

    def field(self, name: str) -> Field:
        for entry in self.fields:
            if entry.name == name:
                return entry
        raise KeyError(f"{self.name} has no field {name}")

    def decode(self, value: int) -> dict[str, int]:
        return {f.name: f.get(value) for f in self.fields}


def _f(name: str, lsb: int, width: int, meaning: str, source: str = UG) -> Field:
    return Field(name, lsb, width, meaning, source)


# ---------------------------------------------------------------------------------------------
# Global (per quadrant) registers
# ---------------------------------------------------------------------------------------------

CTRL_FIELDS = (
    _f("cnn_en", 0, 1, "start processing (0 -> 1 edge)"),
    _f("rdy_sel", 1, 2, "APB wait states"),
    _f("clk_en", 3, 1, "data processing clock enable"),
    _f("calcmax", 4, 1, "global max pooling select / external ready (MAX78002)"),
    _f("pool_en", 5, 1, "global pooling enable; MAX78002: pipeline disable", UG + "+" + BE),
    _f("bigdata", 6, 1, "global big-data (CHW) input format"),
    _f("apbclk_en", 7, 1, "APB clock always on"),
    _f("oneshot", 8, 1, "one layer per cnn_en edge"),
    _f("ext_sync", 9, 3, "external sync source quadrant select"),
    _f("cnn_irq", 12, 1, "interrupt: processing done"),
    _f("poolrnd", 13, 1, "average pooling rounds (else truncates)"),
    _f("stream_en", 14, 1, "streaming mode"),
    _f("fifo_en", 15, 1, "first layer reads the input FIFOs"),
    _f("mlat_ld", 16, 1, "load the mlator address counter"),
    _f("mlatch_sel", 17, 2, "mlator byte lane"),
    _f("lilbuf", 19, 1, "streaming circular read buffers"),
    _f("mexpress", 20, 1, "packed kernel-memory loading"),
    _f("simple1b", 21, 1, "simple 1-bit weight logic"),
    _f("ffifo_en", 22, 1, "fast FIFO (RISC-V) feeds the first layer"),
    _f("fifogrp", 23, 1, "all FIFO bytes to the first 4 processors"),
    _f("fclk_dly", 24, 6, "FIFO clock delay"),
    _f(
        "timeshft",
        30,
        1,
        "MAX78000: pooling wait state; MAX78002: binary (+1/-1) weights",
        UG + "+" + BE,
    ),
    _f("qupac", 31, 1, "x16 parallel (quad fast FIFO) mode"),
)

SRAM_FIELDS = (
    _f("extacc", 0, 1, "extended access time"),
    _f("rmargin_en", 1, 1, "read margin enable"),
    _f("rmargin", 2, 4, "read margin"),
    _f("ra", 6, 2, "read assist voltage"),
    _f("wneg_vol", 8, 2, "write negative voltage"),
    _f("wneg_en", 10, 1, "write negative voltage enable"),
    _f("wpulse", 11, 3, "write pulse width"),
    _f("ds", 15, 1, "memories in deep sleep"),
    _f("pd", 16, 1, "memories powered down"),
    _f("lsdram", 19, 1, "data RAM light sleep"),
    _f("lsmram", 20, 1, "mask RAM light sleep"),
    _f("lstram", 21, 1, "TRAM light sleep"),
    _f("lsbram", 22, 1, "bias RAM light sleep"),
)

TEST_FIELDS_85 = (
    _f("sbistrun", 0, 1, "data SRAM BIST"),
    _f("sramz", 1, 1, "zero data SRAM"),
    _f("mbistrun", 2, 1, "mask RAM BIST"),
    _f("mramz", 3, 1, "zero mask RAM"),
    _f("tbistrun", 4, 1, "TRAM BIST"),
    _f("tramz", 5, 1, "zero TRAM"),
    _f("bbistrun", 6, 1, "bias RAM BIST"),
    _f("bramz", 7, 1, "zero bias RAM"),
    _f("bistsel", 8, 6, "BIST status select"),
)

TEST_FIELDS_87 = (
    _f("sbistrun", 0, 1, "data SRAM BIST", TC),
    _f("mbistrun", 2, 1, "mask RAM BIST", TC),
    _f("tbistrun", 4, 1, "TRAM BIST", TC),
    _f("bbistrun", 6, 1, "bias RAM BIST", TC),
    _f("zero_run", 7, 1, "zeroize ('Clear registers' sets it with bits 11, 12)", TC),
    _f("zero_bias", 10, 1, "zeroize the bias memory too ('BIST_ZERO_BOTH')", TC),
    _f("sel", 11, 3, "memory select for BIST/zeroize", TC),
    _f("zero_done", 25, 1, "zeroize complete (read only)", TC),
)

LCNT_FIELDS_85 = (_f("lcnt", 0, 5, "last layer processed"),)
LCNT_FIELDS_87 = (
    _f("lcnt", 0, 7, "last layer processed", BE),
    _f("layer_start", 8, 7, "first layer processed", BE),
)

IFRM_FIELDS_85 = (_f("ifrm", 0, 17, "streaming input frame size in FIFO bytes/words"),)
IFRM_FIELDS_87 = (_f("ifrm", 0, 22, "streaming input frame size in FIFO bytes/words", TC),)

# ---------------------------------------------------------------------------------------------
# Layer registers
# ---------------------------------------------------------------------------------------------

ONED_FIELDS = (
    _f("tscnt_max", 0, 4, "time slots - 1 (passthrough, 1x1, element-wise, mask sharing)"),
    _f("oned_sad", 4, 4, "1-D mask start byte within the 9-byte mask word"),
    _f("oned_width", 8, 4, "1-D mask width (1 = 1x1 / single byte masks)"),
    _f("oned_en", 12, 1, "1-D processing"),
    _f("ewise_en", 13, 1, "element-wise operation"),
    _f("ewise_func", 14, 2, "element-wise function: 0 sub, 1 add, 2 or, 3 xor"),
    _f("prepool", 16, 1, "pool each operand before the element-wise operation"),
    _f("two_d_conv", 17, 1, "convolve the element-wise result"),
    _f("ewise_cnt", 18, 4, "element-wise operands - 1"),
)

LCTRL0_FIELDS = (
    _f("sslave", 0, 4, "x4 groups share the first processor's receptive field"),
    _f("mslave", 4, 1, "all 16 processors share processor 0's receptive field"),
    _f("master", 5, 1, "this quadrant computes its own sum of products"),
    _f("parallel", 6, 1, "big data (CHW): 4 bytes of one channel per word"),
    _f("pool_en", 7, 1, "pooling"),
    _f("maxpl_en", 8, 1, "max pooling (else average)"),
    _f("act_en", 9, 1, "ReLU"),
    _f("cpad_only", 10, 1, "pad columns only"),
    _f("sramlsrc", 11, 1, "SRAM writes take the global data busses"),
    _f("cnnsi_en", 12, 4, "sum in the other quadrants' partial sums"),
    _f("bigdwrt", 16, 1, "write 32-bit accumulators"),
)
LCTRL0_FIELDS_87_EXTRA = (
    _f("rd_ahead", 17, 1, "read ahead", BE),
    _f("cprime_max", 18, 4, "kernel columns - 1", BE),
    _f("rprime_max", 22, 4, "kernel rows - 1", BE),
    _f("shift_cnt", 26, 3, "read-ahead shift count", BE),
    _f("dw_broadcast", 29, 1, "depthwise: broadcast (input processors = output processors)", BE),
    _f("bypass", 30, 1, "kernel bypass", BE),
)

POST_FIELDS = (
    _f("bptr_sad", 0, 12, "bias memory start address"),
    _f("bptr_en", 12, 1, "add bias (x128)"),
    _f("scale_reg", 13, 4, "output shift amount"),
    _f("scale_shft", 17, 1, "shift direction: 1 right, 0 left"),
    _f("xpmp_cnt", 18, 4, "flatten: high bits of the multi-pass count"),
    _f("mask_size", 22, 2, "weight bits: 0 8-bit, 1 1-bit, 2 2-bit, 3 4-bit"),
    _f("ts_en", 24, 1, "time slot mode"),
    _f("onexone_en", 25, 1, "with ts_en: 1x1 convolution (else passthrough)"),
    _f("out_abs", 26, 1, "absolute value of the output"),
    _f("flatten_en", 27, 1, "flatten (extended multi-pass count)"),
    _f("deconv_en", 28, 1, "transposed convolution (zero stuffing)"),
)
POST_FIELDS_87_EXTRA = (
    _f("calcx4", 29, 1, "x4 kernel memory interleave", BE),
    _f("dw_en", 30, 1, "depthwise convolution", BE),
    _f("tcalc", 31, 1, "read-ahead time calculation", BE),
)

EN_FIELDS = (
    _f("pro_en", 0, 16, "processors reading input"),
    _f("mask_en", 16, 16, "processors applying their kernels"),
)

STRM0_FIELDS_85 = (_f("strm_isval", 0, 14, "stream start count"),)
STRM0_FIELDS_87 = (
    _f("strm_isval", 0, 15, "stream start count", BE),
    _f("fifo_go", 25, 1, "start when the FIFO has data", BE),
)
STRM1_FIELDS_85 = (
    _f("strm_invol", 0, 4, "stream input volume offset"),
    _f("strm_dsval1", 4, 5, "in-row delta count"),
    _f("strm_dsval2", 16, 12, "multi-row delta count"),
)
STRM1_FIELDS_87 = (
    _f("strm_invol", 0, 4, "stream input volume offset", BE),
    _f("strm_dsval1", 4, 5, "in-row delta count", BE),
    _f("strm_dsval2", 16, 14, "multi-row delta count", BE),
)
FBUF_FIELDS_85 = (_f("fbuf_max", 0, 17, "streaming circular buffer size (words)"),)
FBUF_FIELDS_87 = (_f("fbuf_max", 0, 18, "streaming circular buffer size (words)", BE),)


def _count_fields_85(axis: str) -> tuple[Field, ...]:
    return (
        _f(f"{axis}cnt_max", 0, 10, f"last {axis} index including both pads"),
        _f(f"{axis}cnt_pad", 16, 2, f"pad {axis}s at each side"),
    )


def _count_fields_87(axis: str) -> tuple[Field, ...]:
    return (
        _f(f"{axis}cnt_max", 0, 11, f"start {axis} of the last pooling window", BE),
        _f(f"{axis}cnt_pad", 13, 2, f"pad {axis}s at each side - 1", BE),
        _f(f"{axis}cnt_pad_en", 15, 1, f"pad {axis}s", BE),
        _f(f"{axis}cnt_diff", 16, 16, "words from the last window to the next start", BE),
    )


def _ptr(name: str, bits: int, meaning: str, source: str = UG) -> tuple[Field, ...]:
    return (_f(name, 0, bits, meaning, source),)


LAYER_REGS_85 = (
    Register("RCNT", _count_fields_85("r"), index=0),
    Register("CCNT", _count_fields_85("c"), index=1),
    Register("ONED", ONED_FIELDS, index=2),
    Register("PRCNT", (_f("prcnt_max", 0, 4, "pool rows - 1"),), index=3),
    Register("PCCNT", (_f("pccnt_max", 0, 4, "pool columns - 1"),), index=4),
    Register("STRIDE", (_f("stride", 0, 4, "stride - 1 (pooling, else convolution)"),), index=5),
    Register("WPTR_BASE", _ptr("wptr_base", 17, "output write pointer base"), index=6),
    Register("WPTR_TOFF", _ptr("wptr_toff", 17, "write pointer step per time slot"), index=7),
    Register(
        "WPTR_MOFF", _ptr("wptr_moff", 17, "write pointer step per 4 output channels"), index=8
    ),
    Register("WPTR_CHOFF", _ptr("wptr_choff", 17, "write pointer step per output pass"), index=9),
    Register("RPTR_BASE", _ptr("rptr_base", 17, "input read pointer (words)"), index=10),
    Register("LCTRL0", LCTRL0_FIELDS, index=11),
    Register(
        "MCNT",
        (
            _f("mcnt_max", 0, 16, "last mask address (bit address: word x 8 + bit)"),
            _f("mcnt_sad", 16, 16, "first mask address"),
        ),
        index=12,
    ),
    Register(
        "TPTR",
        (
            _f("tptr_max", 0, 11, "TRAM pointer rollover"),
            _f("tptr_sad", 16, 11, "TRAM start"),
        ),
        index=13,
    ),
    Register("EN", EN_FIELDS, index=14),
    Register("POST", POST_FIELDS, index=15),
    Register("STRM0", STRM0_FIELDS_85, index=16),
    Register("STRM1", STRM1_FIELDS_85, index=17),
    Register("FBUF", FBUF_FIELDS_85, index=18),
    Register(
        "LCTRL1",
        (
            _f("inpchexp", 0, 4, "input passes - 1 (multi-pass)"),
            _f("wptr_inc", 4, 4, "extra write pointer increment per output pixel"),
            _f("xpch_max", 8, 9, "output channel slots per pass - 1, times weight bits"),
        ),
        index=20,
    ),
)

LAYER_REGS_87 = (
    Register(
        "NXTLYR",
        (
            _f("next_layer", 0, 7, "next layer (with link_en)", BE),
            _f("link_en", 7, 1, "continue with next_layer", BE),
            _f("stop", 8, 1, "stop after this layer", BE),
        ),
        TC,
        index=0,
    ),
    Register("RCNT", _count_fields_87("r"), TC, index=1),
    Register("CCNT", _count_fields_87("c"), TC, index=2),
    Register("ONED", ONED_FIELDS, TC, index=3),
    Register(
        "PRCNT",
        (
            _f("prcnt_max", 0, 4, "(pool rows - 1) x dilation", BE),
            _f("prcnt_inc", 4, 4, "pool row dilation - 1", BE),
        ),
        TC,
        index=4,
    ),
    Register(
        "PCCNT",
        (
            _f("pccnt_max", 0, 4, "(pool columns - 1) x dilation", BE),
            _f("pccnt_inc", 4, 4, "pool column dilation - 1", BE),
        ),
        TC,
        index=5,
    ),
    Register(
        "STRIDE",
        (
            _f("stride", 0, 4, "stride - 1 (pooling, else convolution)", BE),
            _f("mp_stride", 4, 12, "words per pooling stride step (multi-pass, operands)", BE),
        ),
        TC,
        index=6,
    ),
    Register("WPTR_BASE", _ptr("wptr_base", 21, "output write pointer base", BE), TC, index=7),
    Register(
        "WPTR_TOFF", _ptr("wptr_toff", 21, "write pointer step per time slot", BE), TC, index=8
    ),
    Register(
        "WPTR_MOFF",
        _ptr("wptr_moff", 21, "write pointer step per 4 output channels", BE),
        TC,
        index=9,
    ),
    Register(
        "WPTR_CHOFF", _ptr("wptr_choff", 21, "write pointer step per output pass", BE), TC, index=10
    ),
    Register("RPTR_BASE", _ptr("rptr_base", 21, "input read pointer (words)", BE), TC, index=11),
    Register("LCTRL0", LCTRL0_FIELDS + LCTRL0_FIELDS_87_EXTRA, TC, index=12),
    Register(
        "LCTRL1",
        (
            _f("inpchexp", 0, 4, "input passes - 1 (multi-pass)", BE),
            _f("wptr_inc", 4, 8, "extra write pointer increment per output pixel", BE),
            _f("xpch_max", 12, 9, "output channel slots per pass - 1, times weight bits", BE),
        ),
        TC,
        index=13,
    ),
    Register("MCNT1", _ptr("mcnt_max", 19, "last mask address", BE), TC, index=14),
    Register("MCNT2", _ptr("mcnt_sad", 19, "first mask address", BE), TC, index=15),
    Register("OCHAN", _ptr("ochan_max", 16, "output channels - 1", BE), TC, index=16),
    Register(
        "TPTR",
        (
            _f("tptr_max", 0, 14, "TRAM pointer rollover", BE),
            _f("tptr_sad", 16, 14, "TRAM start", BE),
        ),
        TC,
        index=17,
    ),
    Register("EN", EN_FIELDS, TC, index=18),
    Register("POST", POST_FIELDS + POST_FIELDS_87_EXTRA, TC, index=19),
)

STREAM_REGS_87 = (
    Register("STRM0", STRM0_FIELDS_87, TC, index=0),
    Register("STRM1", STRM1_FIELDS_87, TC, index=1),
    Register("FBUF", FBUF_FIELDS_87, TC, index=2),
)

FIFO_CTL_FIELDS = (
    _f("rdy_sel", 0, 2, "wait states", TC),
    _f("fifo_cpl", 11, 1, "FIFO complete (MAX78000)", TC),
    _f("fifo_en", 12, 4, "FIFOs in use (one bit per quadrant)", TC),
)


# ---------------------------------------------------------------------------------------------
# Address map
# ---------------------------------------------------------------------------------------------

# Region codes returned by `classify`.
UNKNOWN, GLOBAL, LAYER, STREAM, BIAS, TRAM, MRAM, SRAM, FIFO_CTL, FIFO_DATA, AON, FAST_FIFO = range(
    12
)
REGION_NAMES = (
    "unknown",
    "global",
    "layer",
    "stream",
    "bias",
    "tram",
    "mram",
    "sram",
    "fifo_ctl",
    "fifo_data",
    "aon",
    "fast_fifo",
)


class DeviceMap(FrozenRecord):
    """Where everything of one device lives on the AHB/APB bus."""

    name: str
    max_layers: int
    group_base: int  # quadrant 0 control registers
    group_stride: int
    global_regs: dict[int, Register]  # byte offset from the quadrant base
    layer_base: int  # byte offset of layer register block from the quadrant base
    layer_stride: int  # bytes between layers
    reg_stride: int  # bytes between register numbers
    layer_regs: tuple[Register, ...]
    stream_base: int | None  # MAX78002: separate per-stream block
    stream_reg_stride: int
    stream_layers: int
    stream_regs: tuple[Register, ...]
    bias_offset: int
    bias_words: int  # 8-bit entries (one per 32-bit word) per quadrant
    tram_offset: int
    tram_proc_stride: int
    tram_words: int
    mram_offset: int
    mram_proc_stride: int  # bytes of address space per processor (16 per 72-bit word)
    mram_words_large: int
    mram_words_small: int
    sram_base: int  # absolute address of quadrant 0, processors 0-3
    sram_group_stride: int
    sram_quad_stride: int  # bytes of address space per 4 processors
    sram_words: int  # real words per 4 processors
    write_ptr_shift: int  # WPTR_BASE bits above this select the 4-processor instance
    fifo_base: int = 0x50000000
    fifo_count: int = 4
    aon_ctl: int = 0x50001000
    fast_fifo_base: int = 0x400C0400
    sources: dict[str, str] = Factory(dict)

    @property
    def layer_reg_by_name(self) -> dict[str, Register]:
        return {r.name: r for r in self.layer_regs}

    def group_address(self, group: int) -> int:
        return self.group_base + group * self.group_stride

    def layer_reg_address(self, group: int, layer: int, name: str) -> int:
        reg = self.layer_reg_by_name.get(name)
        if reg is not None:
            return (
                self.group_address(group)
                + self.layer_base
                + reg.index * self.reg_stride
                + layer * self.layer_stride
            )
        for sreg in self.stream_regs:
            if sreg.name == name and self.stream_base is not None:
                return (
                    self.group_address(group)
                    + self.stream_base
                    + sreg.index * self.stream_reg_stride
                    + layer * 4
                )
        raise KeyError(name)

    def sram_address(self, quad: int, word: int) -> int:
        """AHB address of `word` in the data memory of processors 4*quad .. 4*quad+3."""
        group, local = divmod(quad, 4)
        return (
            self.sram_base
            + group * self.sram_group_stride
            + local * self.sram_quad_stride
            + (4 * word)
        )

    def mram_address(self, processor: int, word: int) -> int:
        group, local = divmod(processor, 16)
        return (
            self.group_address(group) + self.mram_offset + local * self.mram_proc_stride + 16 * word
        )

    def mram_words(self, processor: int) -> int:
        return self.mram_words_large if processor % 16 == 0 else self.mram_words_small


MAX78000_MAP = DeviceMap(
    name="MAX78000",
    max_layers=32,
    group_base=0x50100000,
    group_stride=0x400000,
    global_regs={
        0x0: Register("CTRL", CTRL_FIELDS, index=0),
        0x4: Register("SRAM", SRAM_FIELDS, index=1),
        0x8: Register("LCNT_MAX", LCNT_FIELDS_85, index=2),
        0xC: Register("TEST", TEST_FIELDS_85, index=3),
        0x990: Register("IFRM", IFRM_FIELDS_85, index=0x990 // 4),
        0x1000: Register("MLAT", (_f("mlatdat", 0, 32, "packed channel data"),), index=0x400),
    },
    layer_base=0x10,
    layer_stride=4,
    reg_stride=0x80,
    layer_regs=LAYER_REGS_85,
    stream_base=None,
    stream_reg_stride=0,
    stream_layers=0,
    stream_regs=(),
    bias_offset=0x8000,
    bias_words=512,
    tram_offset=0x10000,
    tram_proc_stride=0x4000,
    tram_words=3072,
    mram_offset=0x80000,
    mram_proc_stride=0x4000,
    mram_words_large=768,
    mram_words_small=768,
    sram_base=0x50400000,
    sram_group_stride=0x400000,
    sram_quad_stride=0x8000,
    sram_words=8192,
    write_ptr_shift=13,
    sources={
        "global registers": "UG register table (CTRL 0x0, SRAM 0x4, LCNT_MAX 0x8, TEST 0xC, "
        "IFRM 0x990, MLAT 0x1000)",
        "layer registers": "UG: CNNx16_n_Ly_* at 0x10 + 0x80 x register + 4 x layer; TC: "
        "register numbers LREG_RCNT..LREG_LCTL2",
        "memories": "SEED AHB tables: data 0x50400000 (+0x8000 per 4 processors, +0x400000 "
        "per quadrant), bias 0x50108000, TRAM 0x50110000, kernel 0x50180000 (+0x4000 per "
        "processor, 16 bytes per 72-bit word)",
        "fifos": "TC: C_FIFO_BASE 0 (FIFO_CTL, FIFO_STAT, FIFO data registers from word 2), "
        "AON_CTL word 1024, FAST_FIFO_BASE 0x400c0400",
    },
)

# The snoop units' registers, in the vendor's order (TC: REG_SNP1_A1 .. REG_SNP2_AM). Their
# control fields are not published; INF marks what the vendor's snoop tests determine (their
# register words, expected layer sequences and expected accumulators; see snoop_unit.py).
SNOOP_FIELDS = {
    "C1": (
        _f("enable", 0, 1, "unit on", INF),
        _f("stop", 1, 1, "stop the run after a layer in which the unit triggered", INF),
        _f("link", 2, 1, "take a layer's link only when the unit triggered in it", INF),
        _f("acc", 3, 1, "add matching data to ACC", INF),
        _f("hit", 4, 1, "count matches in HIT", INF),
        _f("max", 5, 1, "keep the largest matching data in MAX, its address in AM", INF),
        _f("addr_cmp", 12, 4, "address vs A1/A2: bit0 >=A1, bit1 ==A1, bit2 <=A2, bit3 ==A2", INF),
        _f("data_cmp", 16, 4, "data vs D1/D2 (same codes)", INF),
        _f("count_cmp", 20, 4, "a layer's matches vs X1/X2 (same codes)", INF),
        _f("lane", 29, 2, "byte lane compared when not whole words", INF),
        _f("word", 31, 1, "compare whole 32-bit words", INF),
    ),
    "C2": (
        _f("layer", 0, 8, "the layer watched when layer_only", INF),
        _f("layer_only", 9, 1, "watch only one layer's writes", INF),
    ),
}

MAX78002_MAP = DeviceMap(
    name="MAX78002",
    max_layers=128,
    group_base=0x51000000,
    group_stride=0x1000000,
    global_regs={
        0x0: Register("CTRL", CTRL_FIELDS, index=0),
        0x4: Register("SRAM", SRAM_FIELDS, index=1),
        0x8: Register("LCNT_MAX", LCNT_FIELDS_87, TC, index=2),
        0xC: Register("TEST", TEST_FIELDS_87, TC, index=3),
        0x108060: Register("IFRM", IFRM_FIELDS_87, TC, index=0x42018),
        0x110000: Register(
            "MLAT", (_f("mlatdat", 0, 32, "packed channel data", TC),), TC, index=0x44000
        ),
        **{
            0x108080 + 4 * i: Register(
                f"SNP{1 + i // 12}_{name}",
                SNOOP_FIELDS.get(name, (_f("value", 0, 32, "snoop register", TC),)),
                TC,
                index=0x42020 + i,
            )
            for i, name in enumerate(REGISTERS * 2)  # the vendor's order
        },
    },
    layer_base=0x100000,
    layer_stride=0x100,
    reg_stride=4,
    layer_regs=LAYER_REGS_87,
    stream_base=0x108000,
    stream_reg_stride=0x20,
    stream_layers=8,
    stream_regs=STREAM_REGS_87,
    bias_offset=0x180000,
    bias_words=2048,
    tram_offset=0x200000,
    tram_proc_stride=0x10000,
    tram_words=12288,
    mram_offset=0x400000,
    mram_proc_stride=0x20000,
    mram_words_large=4 * 1024 + 4 * 256,
    mram_words_small=4 * 1024,
    sram_base=0x51800000,
    sram_group_stride=0x1000000,
    sram_quad_stride=0x20000,
    sram_words=20480,
    write_ptr_shift=15,
    sources={
        "global registers": "TC: REG_CTL 0, REG_SRAM 1, REG_LCNT_MAX 2, REG_SRAM_TEST 3, "
        "REG_IFRM 0x42018, REG_SNP* 0x42020.., REG_MLAT 0x44000 (word offsets)",
        "layer registers": "TC: C_CNN_BASE 0x1000000 + C_CNN x 4 + register x 4 + layer x "
        "LREG_OFFS (0x100); stream registers 0x2000/0x2008/0x2010 words + layer",
        "memories": "TC: C_BRAM_BASE +0x180000, C_TRAM_BASE +0x200000, C_MRAM_BASE "
        "+0x400000 (MASK_OFFS 8192 x 16 bytes per processor), C_SRAM_BASE +0x800000 "
        "(0x20000 per 4 processors; 5 x 4096 real words)",
    },
)

MAPS = {m.name: m for m in (MAX78000_MAP, MAX78002_MAP)}


class Classified(FrozenRecord):
    """Per-write decoding of addresses: region code plus region-specific coordinates."""

    region: np.ndarray  # int8 region code
    group: np.ndarray  # quadrant (registers, bias, TRAM, kernel memory)
    index: np.ndarray  # layer, processor (0-63), 4-processor instance (0-15), FIFO number
    offset: np.ndarray  # register number / byte offset / word offset within the region


def classify(dmap: DeviceMap, addr: np.ndarray) -> Classified:
    """Decode every address of a trace (vectorized). A trace is mostly runs of writes to
    consecutive words (the loaders' blocks) or to one address (a FIFO), so where runs are few
    the first and last write of each run are decoded (`decode`): a run to one address takes
    its first write's coordinates; a run over consecutive words whose two ends lie in one
    memory block (the same region, quadrant and processor or instance, coordinates apart by
    the run's length) counts its coordinates from its first word; the writes of every other
    run are decoded one by one."""
    a = _addresses(addr)
    n = a.size
    step = a[1:] - a[:-1]
    ends = (step != 0) & (step != 4)  # the last write of a run: the step changes after it
    ends[1:] |= step[1:] != step[:-1]
    last_writes = np.flatnonzero(ends)
    if (last_writes.size + 1) * 4 > n:
        return decode(dmap, a)
    heads = np.concatenate(([0], last_writes + 1))
    tails = np.concatenate((last_writes, [n - 1]))
    first, last = decode(dmap, a[heads]), decode(dmap, a[tails])
    length = tails - heads + 1
    moves = step[np.minimum(heads, n - 2)] == 4  # (a run of one write stays)
    moves &= length > 1
    index_step = np.where(moves, _INDEX_STEP[first.region], 0)
    offset_step = np.where(moves, _OFFSET_STEP[first.region], 0)
    counted = (
        (_COUNTED[first.region] | ~moves)
        & (last.region == first.region)
        & (last.group == first.group)
        & (last.index - first.index == index_step * (length - 1))
        & (last.offset - first.offset == offset_step * (length - 1))
    )
    return _expand(dmap, a, first, heads, length, counted, index_step, offset_step)


def _expand(
    dmap: DeviceMap,
    a: np.ndarray,
    first: Classified,
    heads: np.ndarray,
    length: np.ndarray,
    counted: np.ndarray,
    index_step: np.ndarray,
    offset_step: np.ndarray,
) -> Classified:
    """`classify`'s coordinates of every write: counted from its run's first write, or, in
    the runs not `counted`, decoded one by one."""
    within = np.arange(a.size, dtype=np.int32) - np.repeat(heads.astype(np.int32), length)
    region = np.repeat(first.region, length)
    group = np.repeat(first.group, length)
    index = np.repeat(first.index, length)
    offset = np.repeat(first.offset, length)
    if index_step.any():
        index += np.repeat(index_step.astype(np.int32), length) * within
    if offset_step.any():
        offset += np.repeat(offset_step.astype(np.int32), length) * within
    rest = np.flatnonzero(np.repeat(~counted, length))
    if rest.size:
        one = decode(dmap, a[rest])
        region[rest], group[rest], index[rest], offset[rest] = (
            one.region,
            one.group,
            one.index,
            one.offset,
        )
    return Classified(region, group, index, offset)


def _addresses(addr: np.ndarray) -> np.ndarray:
    """A trace's uint32 addresses as they are (half the memory of int64: offsets are taken
    only of addresses at or above their block's base), any others as int64."""
    a = np.asarray(addr)
    return a if a.dtype == np.uint32 else a.astype(np.int64)


def decode(dmap: DeviceMap, addr: np.ndarray) -> Classified:
    """Decode each address on its own (vectorized): a few passes over all of them pick each
    block's candidates; each region's tests and coordinates run on those. The coordinates are
    int32."""
    a = _addresses(addr)
    marks = _Marks(a.size)
    _mark_bus(marks, dmap, a)
    _mark_sram(marks, dmap, a)
    _mark_groups(marks, dmap, a)
    return Classified(marks.region, marks.group, marks.index, marks.offset)


# How a region's coordinates step from one word to the next of a run of consecutive words
# (`classify`): kernel memory by 4 byte offsets, the word memories by one word, the standard
# FIFOs by one FIFO; registers are decoded word by word.
_COUNTED = np.zeros(len(REGION_NAMES), dtype=bool)
_INDEX_STEP = np.zeros(len(REGION_NAMES), dtype=np.int32)
_OFFSET_STEP = np.zeros(len(REGION_NAMES), dtype=np.int32)
_COUNTED[[MRAM, TRAM, SRAM, BIAS, FIFO_DATA]] = True
_OFFSET_STEP[[MRAM, TRAM, SRAM, BIAS]] = (4, 1, 1, 1)
_INDEX_STEP[FIFO_DATA] = 1


class _Marks:
    """The region and coordinates of every address, filled region by region (the first
    region to claim an address keeps it)."""

    def __init__(self, n: int) -> None:
        self.region = np.zeros(n, dtype=np.int8)
        self.group = np.full(n, -1, dtype=np.int32)
        self.index = np.full(n, -1, dtype=np.int32)
        self.offset = np.full(n, -1, dtype=np.int32)
        self.unknown = np.ones(n, dtype=bool)  # region == UNKNOWN

    def mark(
        self,
        where: np.ndarray,
        sel: np.ndarray,
        code: int,
        g: np.ndarray | None = None,
        i: np.ndarray | int | None = None,
        o: np.ndarray | int | None = None,
    ) -> None:
        """The positions `where[sel]` that no earlier region claimed are `code`'s; g, i, o
        are given over `where` (or one value for all)."""
        keep = sel & self.unknown[where]
        pick = where[keep]
        self.unknown[pick] = False
        self.region[pick] = code
        for out, value in ((self.group, g), (self.index, i), (self.offset, o)):
            if value is not None:
                out[pick] = value[keep] if isinstance(value, np.ndarray) else value


def _mark_bus(marks: _Marks, dmap: DeviceMap, a: np.ndarray) -> None:
    """FIFOs and always-on control."""
    fifo_end = dmap.fifo_base + 8 + 4 * dmap.fifo_count
    fast = dmap.fast_fifo_base
    where = np.flatnonzero(
        ((a >= dmap.fifo_base) & (a < fifo_end))
        | (a == dmap.aon_ctl)
        | ((a >= fast) & (a < fast + 24))
    )
    s = a[where]
    aligned = s % 4 == 0
    marks.mark(where, s == dmap.fifo_base, FIFO_CTL, o=0)
    marks.mark(where, s == dmap.fifo_base + 4, FIFO_CTL, o=1)
    fifo_n = (s - dmap.fifo_base - 8) // 4
    marks.mark(where, (s >= dmap.fifo_base + 8) & (s < fifo_end) & aligned, FIFO_DATA, i=fifo_n)
    marks.mark(where, s == dmap.aon_ctl, AON)
    marks.mark(where, (s >= fast) & (s < fast + 24) & aligned, FAST_FIFO, o=(s - fast) // 4)


def _divmod(x: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """np.divmod of non-negative `x` by `d`: a shift and a mask for a power of two."""
    if d & (d - 1):
        return np.divmod(x, d)
    return x >> (d.bit_length() - 1), x & (d - 1)


def _mark_sram(marks: _Marks, dmap: DeviceMap, a: np.ndarray) -> None:
    """Data memory."""
    base, stride = dmap.sram_base, dmap.sram_group_stride
    where = np.flatnonzero((a >= base) & (a < base + 4 * stride) & (a & 3 == 0))
    g, within = _divmod(a[where] - base, stride)
    quad, byte = _divmod(within, dmap.sram_quad_stride)
    word = byte >> 2
    marks.mark(where, (quad < 4) & (word < dmap.sram_words), SRAM, g=g, i=g * 4 + quad, o=word)


def _mark_groups(marks: _Marks, dmap: DeviceMap, a: np.ndarray) -> None:
    """The per-quadrant blocks: global, layer and stream registers, bias, TRAM, kernels. Each
    block's tests run on the addresses in its range of offsets (`span`)."""
    base, stride = dmap.group_base, dmap.group_stride
    at = np.flatnonzero((a >= base) & (a < base + 4 * stride) & (a & 3 == 0))
    group, offset = _divmod(a[at] - base, stride)

    def span(start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, quadrants, offsets) of the addresses with start <= offset < end."""
        k = np.flatnonzero((offset >= start) & (offset < end))
        return at[k], group[k], offset[k]

    known = np.sort(np.fromiter(dmap.global_regs, dtype=np.int64))
    where, g, o = span(int(known[0]), int(known[-1]) + 1)
    o = o.astype(np.int64)
    # (a binary search in the few offsets: np.isin's lookup table would span them all, a
    # megabyte on the MAX78002, and its default sorts with np.unique, whose first call imports
    # numpy.ma: 8 ms of every proof)
    found = known[np.minimum(np.searchsorted(known, o), known.size - 1)] == o
    marks.mark(where, found, GLOBAL, g=g, o=o)
    valid_regs = np.array([r.index for r in dmap.layer_regs])
    if dmap.reg_stride > dmap.layer_stride:  # MAX78000: register-major
        where, g, o = span(
            dmap.layer_base, dmap.layer_base + (valid_regs.max() + 1) * dmap.reg_stride
        )
        reg_no, rest = _divmod(o - dmap.layer_base, dmap.reg_stride)
        layer = rest // dmap.layer_stride
    else:  # MAX78002: layer-major
        where, g, o = span(dmap.layer_base, dmap.layer_base + dmap.max_layers * dmap.layer_stride)
        layer, rest = _divmod(o - dmap.layer_base, dmap.layer_stride)
        reg_no = rest // dmap.reg_stride
    reg_no = reg_no.astype(np.int64)  # (few: the layer registers)
    is_layer = (layer < dmap.max_layers) & np.isin(reg_no, valid_regs, kind="table")
    marks.mark(where, is_layer, LAYER, g=g, i=layer, o=reg_no)
    if dmap.stream_base is not None:
        where, g, o = span(
            dmap.stream_base, dmap.stream_base + len(dmap.stream_regs) * dmap.stream_reg_stride
        )
        sreg, rest = _divmod(o - dmap.stream_base, dmap.stream_reg_stride)
        marks.mark(where, np.ones(where.size, dtype=bool), STREAM, g=g, i=rest // 4, o=sreg)
    where, g, o = span(dmap.bias_offset, dmap.bias_offset + 4 * dmap.bias_words)
    marks.mark(where, np.ones(where.size, dtype=bool), BIAS, g=g, o=(o - dmap.bias_offset) >> 2)
    _mark_memory(marks, span(dmap.tram_offset, dmap.tram_offset + 16 * dmap.tram_proc_stride),
                 dmap.tram_offset, dmap.tram_proc_stride, TRAM)  # fmt: skip
    _mark_memory(marks, span(dmap.mram_offset, dmap.mram_offset + 16 * dmap.mram_proc_stride),
                 dmap.mram_offset, dmap.mram_proc_stride, MRAM)  # fmt: skip


def _mark_memory(
    marks: _Marks,
    found: tuple[np.ndarray, np.ndarray, np.ndarray],
    start: int,
    stride: int,
    code: int,
) -> None:
    """TRAM (word offsets) or kernel memory (byte offsets) of 16 processors a quadrant."""
    where, g, o = found
    processor, rest = _divmod(o - start, stride)
    marks.mark(where, np.ones(where.size, dtype=bool), code, g=g, i=g * 16 + processor,
               o=rest >> 2 if code == TRAM else rest)  # fmt: skip
