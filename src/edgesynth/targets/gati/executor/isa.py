"""The functional model's own reading of Gati's 256-bit instructions.

Written from the Gati document (`../shared/seeds/001_...`: the configuration block's
`` `define `` lists, one `msb:lsb` range per field), never from the encoder (`isa.py`): a field
the encoder puts in the wrong bits decodes to another value here, or sets a bit this table calls
reserved, and the functional model's result (so the compile-time proof) notices. The ranges are
kept in the document's own notation so that the table reads against it line by line.

An instruction is 32 bytes, little-endian: byte 0 holds bits 7..0; bits 3..0 are the opcode.
Bits no field covers are reserved ("the remaining bits can be assumed to be reserved"): a set
one is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from edgesynth.errors import EdgesynthError

INST_BYTES = 32

# opcode -> (block name, {field: "msb:lsb"}), as the seed's `define lists give them
TABLES: dict[int, tuple[str, dict[str, str]]] = {
    0x0: (
        "CONV",
        {
            "IW": "13:4",
            "IH": "23:14",
            "OW": "33:24",
            "OH": "43:34",
            "IC": "53:44",
            "KN": "63:54",
            "KW": "67:64",
            "KH": "71:68",
            "Stride": "75:72",
            "Pad": "78:76",
            "PadSides": "82:79",
            "ImageStartAddress": "114:83",
            "ImageEndAddress": "146:115",
            "WeightStartAddress": "178:147",
            "WeightEndAddress": "210:179",
        },
    ),
    0x1: (
        "TailBlock",
        {
            "BNEn": "4:4",
            "BNChannels": "14:5",
            "BNStartAddress": "46:15",
            "BNEndAddress": "78:47",
            "ActEn": "79:79",
            "ActType": "83:80",
            "ActParam": "91:84",
            "QuantEn": "92:92",
            "QuantScale": "108:93",
            "QuantShift": "113:109",
            "PoolEn": "114:114",
            "PoolType": "117:115",
            "PoolWidth": "127:118",
            "PoolHeight": "137:128",
            "PoolStride": "141:138",
            "PoolPadding": "145:142",
            "PoolCeil": "146:146",
            "PoolModCount": "150:147",
            "PoolPadSides": "154:151",
            "BiasEn": "155:155",
            "BiasWidth": "163:156",
            "BiasStartAddress": "195:164",
            "BiasEndAddress": "227:196",
        },
    ),
    0x2: (
        "OutputBlock",
        {
            "AccumulantAddr": "35:4",
            "OutputAddr": "67:36",
            "ChannelItr": "79:68",
            "KernelItr": "91:80",
            "ImageDimOutput": "107:92",
            "ImageDimAcc": "123:108",
            "AccEn": "124:124",
            "DispatchEn": "125:125",
            "DispatchID": "157:126",
            "OnChipAcc": "158:158",
        },
    ),
    0x3: (
        "FC",
        {
            "WeightRows": "19:4",
            "WeightCols": "35:20",
            "InputRows": "51:36",
            "DropoutConstant": "59:52",
            "Flatten": "60:60",
            "ImageDim": "80:61",
            "ImageStartAddress": "112:81",
            "ImageEndAddr": "144:113",
            "WeightStartAddress": "176:145",
            "WeightEndAddress": "208:177",
            "Vec2MatCols": "224:209",
        },
    ),
    0xF: ("START", {"LayerNumber": "15:4", "TotalLayers": "27:16"}),
}
OPCODE_RANGE = "3:0"

# The element-wise block: the seed describes it (add, subtract, multiply of two tensors) but
# gives it no opcode or fields. These are edgesynth's choice (docs/gati.md, "ELTWISE"), kept
# apart from the seed's tables above; they are transcribed from that page, not from isa.py.
CHOSEN: dict[int, tuple[str, dict[str, str]]] = {
    0x4: (
        "ELTWISE",
        {
            "Operation": "7:4",
            "IW": "17:8",
            "IH": "27:18",
            "IC": "37:28",
            "AStartAddress": "69:38",
            "AEndAddress": "101:70",
            "BStartAddress": "133:102",
            "BEndAddress": "165:134",
            "AScale": "181:166",
            "AShift": "186:182",
            "BScale": "202:187",
            "BShift": "207:203",
        },
    ),
}
# every block the functional model reads: the seed's and edgesynth's
FORMATS: dict[int, tuple[str, dict[str, str]]] = {**TABLES, **CHOSEN}

# TailBlock codes: ACT_RELU and the pool types are the seed's; sigmoid (1) and tanh (2) are
# edgesynth's codes for the element-wise module (docs/gati.md).
ACT_RELU, ACT_SIGMOID, ACT_TANH = 0x0, 0x1, 0x2
POOL_MAX, POOL_AVERAGE, POOL_GLOBAL_AVG = 0x0, 0x1, 0x2
POOL_TYPES = {POOL_MAX: "max", POOL_AVERAGE: "avg", POOL_GLOBAL_AVG: "global_avg"}
ACT_TYPES = {ACT_RELU: "relu", ACT_SIGMOID: "sigmoid", ACT_TANH: "tanh"}
# ELTWISE.Operation (edgesynth's codes, docs/gati.md)
ELT_ADD, ELT_SUB, ELT_MUL = 0x0, 0x1, 0x2
ELT_OPS = {ELT_ADD: "add", ELT_SUB: "sub", ELT_MUL: "mul"}
# PadSides / PoolPadSides: the seed's "left, bottom, right, top", from the least significant bit
PAD_LEFT, PAD_BOTTOM, PAD_RIGHT, PAD_TOP = 1, 2, 4, 8


def _span(bits: str) -> tuple[int, int]:
    """`msb:lsb` -> (lsb, width)."""
    msb, lsb = (int(b) for b in bits.split(":"))
    return lsb, msb - lsb + 1


_SPANS: dict[int, dict[str, tuple[int, int]]] = {
    op: {name: _span(bits) for name, bits in fields.items()} for op, (_, fields) in FORMATS.items()
}


def _covered(op: int) -> int:
    mask = (1 << _span(OPCODE_RANGE)[1]) - 1
    for lsb, width in _SPANS[op].values():
        mask |= ((1 << width) - 1) << lsb
    return mask


_RESERVED = {op: ((1 << 8 * INST_BYTES) - 1) & ~_covered(op) for op in FORMATS}


@dataclass(frozen=True)
class Inst:
    """One decoded instruction: its block name and every field's value."""

    name: str
    fields: Mapping[str, int]

    def __getitem__(self, key: str) -> int:
        return self.fields[key]


def decode(raw: bytes, address: int) -> Inst:
    """The instruction in `raw` (32 bytes) fetched from DRAM `address`."""
    where = f"DRAM address {address:#x}"
    if len(raw) != INST_BYTES:
        raise EdgesynthError(f"{where}: an instruction is {INST_BYTES} bytes, got {len(raw)}")
    word = int.from_bytes(raw, "little")
    lsb, width = _span(OPCODE_RANGE)
    op = (word >> lsb) & ((1 << width) - 1)
    if op not in FORMATS:
        raise EdgesynthError(f"{where}: unknown opcode {op:#x}")
    name = FORMATS[op][0]
    reserved = word & _RESERVED[op]
    if reserved:
        low = (reserved & -reserved).bit_length() - 1
        raise EdgesynthError(f"{where}: {name} has reserved bit {low} set (reserved bits are 0)")
    values = {f: (word >> lo) & ((1 << w) - 1) for f, (lo, w) in _SPANS[op].items()}
    return Inst(name, values)
