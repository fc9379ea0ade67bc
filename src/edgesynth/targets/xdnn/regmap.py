"""edgesynth's xDNN CSR register map, as data: what the encoder writes and what the decoder and
the functional model read. Nothing here encodes or decodes; it only says where fields live.

From the seed: interrupt status 0x0008, interrupt mask 0x000c, the eight image completion vector
registers 0x0030-0x004c, bit 11 of the CNN command register ("free reserved download region"),
the Script Memory Push as the last write of every command, and the image-memory address
offsets 0x60 and 0x6c (the input and output IMEM base addresses). Everything else is
edgesynth's own documented choice (docs/xdnn.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    signed: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True)
class Register:
    name: str
    address: int
    fields: tuple[Field, ...]
    scripted: bool = True  # written into the script memory (False: InitOnce / host registers)

    @property
    def used_mask(self) -> int:
        m = 0
        for f in self.fields:
            m |= f.mask << f.lsb
        return m


def _whole(name: str, signed: bool = False) -> tuple[Field, ...]:
    return (Field(name, 0, 32, signed),)


# -- host and InitOnce registers (never in the script memory) -------------------------------
INT_STATUS = Register("INT_STATUS", 0x0008, _whole("status"), scripted=False)  # seed
INT_MASK = Register("INT_MASK", 0x000C, _whole("mask"), scripted=False)  # seed
SCRIPT_PUSH = Register("SCRIPT_PUSH", 0x0010, (Field("push", 0, 1),))  # seed (name); edgesynth
CNN_COMMAND = Register(
    "CNN_COMMAND",
    0x0014,
    (
        Field("opcode", 0, 4),
        Field("relu", 4, 1),
        Field("bias_enable", 5, 1),
        Field("per_channel", 6, 1),  # seed: "Per-Output channel" vs "Global" (command options)
        Field("fc_mode", 7, 1),  # seed: fully-connected mode bit of the command options
        Field("eltwise_add", 8, 1),
        Field("eltwise_bn", 9, 1),
        Field("bypass_perf_opt", 10, 1),
        Field("free_download", 11, 1),  # seed: bit 11 "Free Reserved Download Region"
        Field("data_8bit", 12, 1),  # results saturate to 8 bits (an 8-bit program)
        Field("command_id", 16, 16),
    ),
)
JOB_SUBMIT = Register("JOB_SUBMIT", 0x0018, (Field("image", 0, 8),), scripted=False)
DDR_IMAGE_BASE_LO = Register("DDR_IMAGE_BASE_LO", 0x0020, _whole("address"), scripted=False)
DDR_IMAGE_BASE_HI = Register("DDR_IMAGE_BASE_HI", 0x0024, _whole("address"), scripted=False)
DDR_FILTER_BASE_LO = Register("DDR_FILTER_BASE_LO", 0x0028, _whole("address"), scripted=False)
DDR_FILTER_BASE_HI = Register("DDR_FILTER_BASE_HI", 0x002C, _whole("address"), scripted=False)
COMPLETION = tuple(  # seed: Image Completion Vector registers 0-7 at 0x30-0x4c
    Register(f"COMPLETION_{i}", 0x0030 + 4 * i, _whole("images"), scripted=False) for i in range(8)
)

# -- per-command registers (programmed into the script memory) ------------------------------
GEOMETRY = Register(
    "GEOMETRY",
    0x0050,
    (
        Field("kernel_w", 0, 4),
        Field("kernel_h", 4, 4),
        Field("stride_w", 8, 4),
        Field("stride_h", 12, 4),
        Field("pad_w", 16, 4),
        Field("pad_h", 20, 4),
        Field("dilation_w", 24, 4),
        Field("dilation_h", 28, 4),
    ),
)
IN_SIZE = Register("IN_SIZE", 0x0054, (Field("in_w", 0, 10), Field("in_h", 16, 10)))
IN_DEPTH = Register("IN_DEPTH", 0x0058, (Field("in_c", 0, 12),))
OUT_SIZE = Register("OUT_SIZE", 0x005C, (Field("out_w", 0, 10), Field("out_h", 16, 10)))
IMEM_IN_ADDR = Register("IMEM_IN_ADDR", 0x0060, (Field("in_addr", 0, 24),))  # seed offset
OUT_DEPTH = Register("OUT_DEPTH", 0x0064, (Field("out_c", 0, 12),))
IMEM_IN_B_ADDR = Register("IMEM_IN_B_ADDR", 0x0068, (Field("in_b_addr", 0, 24),))
IMEM_OUT_ADDR = Register("IMEM_OUT_ADDR", 0x006C, (Field("out_addr", 0, 24),))  # seed offset
SCALE_SHIFT = Register(
    "SCALE_SHIFT",
    0x0070,
    (Field("preshift", 0, 6), Field("scale", 8, 8), Field("postshift", 16, 4)),  # seed widths
)
BIAS_VALUE = Register("BIAS_VALUE", 0x0074, (Field("bias", 0, 16, signed=True),))  # seed width
FILTER_OFFSET = Register("FILTER_OFFSET", 0x0078, _whole("filter_offset"))
QUANT_OFFSET = Register("QUANT_OFFSET", 0x007C, _whole("quant_offset"))
DDR_IMAGE_OFFSET = Register("DDR_IMAGE_OFFSET", 0x0080, _whole("ddr_offset"))
ROWS = Register("ROWS", 0x0084, (Field("start_row", 0, 10), Field("end_row", 16, 10)))

REGISTERS: tuple[Register, ...] = (
    INT_STATUS,
    INT_MASK,
    SCRIPT_PUSH,
    CNN_COMMAND,
    JOB_SUBMIT,
    DDR_IMAGE_BASE_LO,
    DDR_IMAGE_BASE_HI,
    DDR_FILTER_BASE_LO,
    DDR_FILTER_BASE_HI,
    *COMPLETION,
    GEOMETRY,
    IN_SIZE,
    IN_DEPTH,
    OUT_SIZE,
    IMEM_IN_ADDR,
    OUT_DEPTH,
    IMEM_IN_B_ADDR,
    IMEM_OUT_ADDR,
    SCALE_SHIFT,
    BIAS_VALUE,
    FILTER_OFFSET,
    QUANT_OFFSET,
    DDR_IMAGE_OFFSET,
    ROWS,
)
BY_ADDRESS: dict[int, Register] = {r.address: r for r in REGISTERS}
BY_NAME: dict[str, Register] = {r.name: r for r in REGISTERS}

# -- opcodes (edgesynth) and the registers each command programs, in write order ------------
OPCODES: dict[str, int] = {
    "XNConv": 1,
    "XNMaxPool": 2,
    "XNAvgPool": 3,
    "XNEltwise": 4,
    "XNGather": 5,  # download: DDR image -> IMEM
    "XNUpload": 6,  # upload: IMEM -> DDR output image
}
OPNAMES: dict[int, str] = {v: k for k, v in OPCODES.items()}

_IMAGE = (IN_SIZE, IN_DEPTH, OUT_SIZE, IMEM_IN_ADDR, OUT_DEPTH)
COMMAND_REGISTERS: dict[str, tuple[Register, ...]] = {
    "XNConv": (
        GEOMETRY,
        *_IMAGE,
        IMEM_OUT_ADDR,
        SCALE_SHIFT,
        BIAS_VALUE,
        FILTER_OFFSET,
        QUANT_OFFSET,
    ),
    "XNMaxPool": (GEOMETRY, *_IMAGE, IMEM_OUT_ADDR),
    "XNAvgPool": (GEOMETRY, *_IMAGE, IMEM_OUT_ADDR, SCALE_SHIFT),
    "XNEltwise": (IN_SIZE, IN_DEPTH, IMEM_IN_ADDR, IMEM_IN_B_ADDR, IMEM_OUT_ADDR),
    "XNGather": (IN_SIZE, IN_DEPTH, IMEM_OUT_ADDR, DDR_IMAGE_OFFSET, ROWS),
    "XNUpload": (IN_SIZE, IN_DEPTH, IMEM_IN_ADDR, DDR_IMAGE_OFFSET),
}

# -- InitOnce: written once before the script, in this order --------------------------------
INIT_REGISTERS: tuple[Register, ...] = (
    DDR_IMAGE_BASE_LO,
    DDR_IMAGE_BASE_HI,
    DDR_FILTER_BASE_LO,
    DDR_FILTER_BASE_HI,
    INT_MASK,
    INT_STATUS,
    *COMPLETION,
)
