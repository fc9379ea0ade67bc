"""Gati's 256-bit layer instructions: field tables as data, encode, decode, pretty print.

Every instruction is one 256-bit word. Bit 0 is the least significant bit of the opcode; in a
byte blob each word takes 32 bytes, little-endian (byte 0 holds bits 7..0). The field tables
below are the single definition that `encode`, `decode` and `format_table` share; bit ranges
follow the Gati configuration-block definitions (CONV 0x0, TailBlock 0x1, OutputBlock 0x2,
FC 0x3, START 0xF). The seed names an element-wise block (add, subtract, multiply of two
tensors) but gives it no instruction: ELTWISE (0x4) and its fields are edgesynth's choice
(docs/gati.md). Bits no field covers are reserved and must be zero.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from edgesynth.errors import EdgesynthError

INST_BITS = 256
INST_BYTES = INST_BITS // 8

OP_CONV = 0x0
OP_TAIL = 0x1
OP_OUTPUT = 0x2
OP_FC = 0x3
OP_ELTWISE = 0x4  # edgesynth's choice: the seed's element-wise block has no documented opcode
OP_START = 0xF

# TailBlock enumerations. ACT_RELU and the pool types are Gati's; sigmoid and tanh are
# edgesynth's codes for the element-wise sigmoid/tanh module (see docs/gati.md).
ACT_RELU = 0x0
ACT_SIGMOID = 0x1
ACT_TANH = 0x2
ACT_NAMES = {ACT_RELU: "relu", ACT_SIGMOID: "sigmoid", ACT_TANH: "tanh"}

POOL_MAX = 0x0
POOL_AVERAGE = 0x1
POOL_GLOBAL_AVG = 0x2
POOL_NAMES = {POOL_MAX: "max", POOL_AVERAGE: "avg", POOL_GLOBAL_AVG: "global_avg"}

# ELTWISE.Operation codes (edgesynth's choice, docs/gati.md)
ELT_ADD = 0x0
ELT_SUB = 0x1
ELT_MUL = 0x2
ELT_NAMES = {ELT_ADD: "add", ELT_SUB: "sub", ELT_MUL: "mul"}

# PadSides bit vector (CONV and TailBlock): one bit per side of the feature map.
PAD_LEFT = 1 << 0
PAD_BOTTOM = 1 << 1
PAD_RIGHT = 1 << 2
PAD_TOP = 1 << 3


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def max(self) -> int:
        return (1 << self.width) - 1

    @property
    def mask(self) -> int:
        return self.max << self.lsb


@dataclass(frozen=True)
class Format:
    name: str
    opcode: int
    fields: tuple[Field, ...]
    by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})

    @property
    def used_mask(self) -> int:
        mask = 0
        for f in self.fields:
            mask |= f.mask
        return mask

    @property
    def reserved_mask(self) -> int:
        return ((1 << INST_BITS) - 1) & ~self.used_mask


def _fmt(name: str, opcode: int, table: list[tuple[str, int, int]]) -> Format:
    return Format(name, opcode, tuple(Field(n, lsb, w) for n, lsb, w in table))


# (name, lsb, width)
CONV = _fmt(
    "CONV",
    OP_CONV,
    [
        ("Opcode", 0, 4),
        ("IW", 4, 10),
        ("IH", 14, 10),
        ("OW", 24, 10),
        ("OH", 34, 10),
        ("IC", 44, 10),
        ("KN", 54, 10),
        ("KW", 64, 4),
        ("KH", 68, 4),
        ("Stride", 72, 4),
        ("Pad", 76, 3),
        ("PadSides", 79, 4),
        ("ImageStartAddress", 83, 32),
        ("ImageEndAddress", 115, 32),
        ("WeightStartAddress", 147, 32),
        ("WeightEndAddress", 179, 32),
    ],
)

FC = _fmt(
    "FC",
    OP_FC,
    [
        ("Opcode", 0, 4),
        ("WeightRows", 4, 16),
        ("WeightCols", 20, 16),
        ("InputRows", 36, 16),
        ("DropoutConstant", 52, 8),
        ("Flatten", 60, 1),
        ("ImageDim", 61, 20),
        ("ImageStartAddress", 81, 32),
        ("ImageEndAddr", 113, 32),
        ("WeightStartAddress", 145, 32),
        ("WeightEndAddress", 177, 32),
        ("Vec2MatCols", 209, 16),
    ],
)

OUTPUT = _fmt(
    "OutputBlock",
    OP_OUTPUT,
    [
        ("Opcode", 0, 4),
        ("AccumulantAddr", 4, 32),
        ("OutputAddr", 36, 32),
        ("ChannelItr", 68, 12),
        ("KernelItr", 80, 12),
        ("ImageDimOutput", 92, 16),
        ("ImageDimAcc", 108, 16),
        ("AccEn", 124, 1),
        ("DispatchEn", 125, 1),
        ("DispatchID", 126, 32),
        ("OnChipAcc", 158, 1),
    ],
)

START = _fmt(
    "START",
    OP_START,
    [
        ("Opcode", 0, 4),
        ("LayerNumber", 4, 12),
        ("TotalLayers", 16, 12),
    ],
)

TAIL = _fmt(
    "TailBlock",
    OP_TAIL,
    [
        ("Opcode", 0, 4),
        ("BNEn", 4, 1),
        ("BNChannels", 5, 10),
        ("BNStartAddress", 15, 32),
        ("BNEndAddress", 47, 32),
        ("ActEn", 79, 1),
        ("ActType", 80, 4),
        ("ActParam", 84, 8),
        ("QuantEn", 92, 1),
        ("QuantScale", 93, 16),
        ("QuantShift", 109, 5),
        ("PoolEn", 114, 1),
        ("PoolType", 115, 3),
        ("PoolWidth", 118, 10),
        ("PoolHeight", 128, 10),
        ("PoolStride", 138, 4),
        ("PoolPadding", 142, 4),
        ("PoolCeil", 146, 1),
        ("PoolModCount", 147, 4),
        ("PoolPadSides", 151, 4),
        ("BiasEn", 155, 1),
        ("BiasWidth", 156, 8),
        ("BiasStartAddress", 164, 32),
        ("BiasEndAddress", 196, 32),
    ],
)

# edgesynth's choice (docs/gati.md): two NHW8C8 int8 maps of IC channels and IH x IW pixels,
# A and B; each operand is first brought to a common scale by its own multiply and shift
# (x * Scale + 2**(Shift - 1)) >> Shift (round half up, no saturation), then combined by
# Operation (A + B, A - B or A * B); the 32-bit result goes to the tail blocks like a CONV's sums.
ELTWISE = _fmt(
    "ELTWISE",
    OP_ELTWISE,
    [
        ("Opcode", 0, 4),
        ("Operation", 4, 4),
        ("IW", 8, 10),
        ("IH", 18, 10),
        ("IC", 28, 10),
        ("AStartAddress", 38, 32),
        ("AEndAddress", 70, 32),
        ("BStartAddress", 102, 32),
        ("BEndAddress", 134, 32),
        ("AScale", 166, 16),
        ("AShift", 182, 5),
        ("BScale", 187, 16),
        ("BShift", 203, 5),
    ],
)

FORMATS: dict[int, Format] = {f.opcode: f for f in (CONV, TAIL, OUTPUT, FC, ELTWISE, START)}
FORMATS_BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS.values()}


@dataclass
class Instruction:
    """One decoded (or to-be-encoded) instruction: its format and every field's value."""

    fmt: Format
    fields: dict[str, int]

    @property
    def name(self) -> str:
        return self.fmt.name

    def __getitem__(self, key: str) -> int:
        return self.fields[key]


def _check_fields(fmt: Format, values: Mapping[str, int], context: str) -> None:
    prefix = f"{context}: " if context else ""
    for key, value in values.items():
        f = fmt.by_name.get(key)
        if f is None:
            raise EdgesynthError(f"{prefix}{fmt.name} has no field `{key}`")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise EdgesynthError(f"{prefix}{fmt.name}.{key} must be an integer, got {value!r}")
        if value < 0 or value > f.max:
            raise EdgesynthError(
                f"{prefix}{fmt.name}.{key} = {value} does not fit its {f.width}-bit field "
                f"(bits {f.msb}:{f.lsb}, 0..{f.max})"
            )
        if key == "Opcode" and value != fmt.opcode:
            raise EdgesynthError(f"{prefix}{fmt.name}.Opcode must be {fmt.opcode:#x}")


def make(fmt: Format, context: str = "", **values: int) -> Instruction:
    """An instruction of `fmt` with the given fields (others zero), checked to fit."""
    _check_fields(fmt, values, context)
    full = {f.name: 0 for f in fmt.fields}
    full.update({k: int(v) for k, v in values.items()})
    full["Opcode"] = fmt.opcode
    return Instruction(fmt, full)


def encode(inst: Instruction, context: str = "") -> int:
    """The 256-bit word of `inst`; a value that does not fit its field is an error."""
    _check_fields(inst.fmt, inst.fields, context)
    word = 0
    for f in inst.fmt.fields:
        value = inst.fields.get(f.name, 0)
        if f.name == "Opcode":
            value = inst.fmt.opcode
        word |= int(value) << f.lsb
    return word


def to_bytes(word: int) -> bytes:
    return word.to_bytes(INST_BYTES, "little")


def encode_bytes(inst: Instruction, context: str = "") -> bytes:
    return to_bytes(encode(inst, context))


def decode(word: int | bytes, offset: int | None = None) -> Instruction:
    """Decode one word; unknown opcodes and set reserved bits are errors naming the offset."""
    where = f"byte offset {offset:#x}: " if offset is not None else ""
    if isinstance(word, bytes | bytearray | memoryview):
        if len(word) != INST_BYTES:
            raise EdgesynthError(
                f"{where}an instruction is {INST_BYTES} bytes, got {len(word)} (truncated)"
            )
        word = int.from_bytes(bytes(word), "little")
    if word < 0 or word >> INST_BITS:
        raise EdgesynthError(f"{where}instruction word wider than {INST_BITS} bits")
    opcode = word & 0xF
    fmt = FORMATS.get(opcode)
    if fmt is None:
        raise EdgesynthError(f"{where}unknown opcode {opcode:#x}")
    reserved = word & fmt.reserved_mask
    if reserved:
        low = (reserved & -reserved).bit_length() - 1
        raise EdgesynthError(f"{where}{fmt.name} has reserved bit {low} set (reserved bits are 0)")
    values = {f.name: (word >> f.lsb) & f.max for f in fmt.fields}
    return Instruction(fmt, values)


def decode_blob(blob: bytes, base_offset: int = 0) -> list[Instruction]:
    """Decode a blob of consecutive 32-byte words; offsets in errors are `base_offset`-based."""
    if len(blob) % INST_BYTES:
        whole = len(blob) - len(blob) % INST_BYTES
        raise EdgesynthError(
            f"byte offset {base_offset + whole:#x}: truncated instruction "
            f"({len(blob) % INST_BYTES} of {INST_BYTES} bytes)"
        )
    return [
        decode(blob[i : i + INST_BYTES], base_offset + i) for i in range(0, len(blob), INST_BYTES)
    ]


ADDRESS_FIELDS = frozenset(
    f.name
    for fmt in FORMATS.values()
    for f in fmt.fields
    if "Addr" in f.name or f.name == "DispatchID"
)


def format_value(name: str, value: int) -> str:
    if name == "Opcode":
        return f"{value:#x}"
    if name in ADDRESS_FIELDS:
        return f"{value:#010x}"
    return str(value)


def table_rows(inst: Instruction) -> Iterator[tuple[str, str, str]]:
    """(field, bits, value) rows in the format's field order."""
    for f in inst.fmt.fields:
        bits = f"{f.msb}:{f.lsb}" if f.width > 1 else f"{f.lsb}"
        yield f.name, bits, format_value(f.name, inst.fields[f.name])


def format_table(inst: Instruction, title: str = "") -> str:
    """A plain-text table of named fields, one per line."""
    rows = list(table_rows(inst))
    w_name = max(len(r[0]) for r in [*rows, ("Field", "", "")])
    w_bits = max(len(r[1]) for r in [*rows, ("", "Bits", "")])
    head = title or inst.fmt.name
    lines = [head, f"  {'Field':<{w_name}}  {'Bits':>{w_bits}}  Value"]
    lines += [f"  {n:<{w_name}}  {b:>{w_bits}}  {v}" for n, b, v in rows]
    return "\n".join(lines)
