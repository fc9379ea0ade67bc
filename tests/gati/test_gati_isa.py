"""Instruction fields: bit positions, round trips at min/max/random values, overflow errors."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati import isa

# The seed's bit ranges, transcribed as (name, msb, lsb), checked against isa.py's tables.
SEED_RANGES = {
    "CONV": [
        ("Opcode", 3, 0), ("IW", 13, 4), ("IH", 23, 14), ("OW", 33, 24), ("OH", 43, 34),
        ("IC", 53, 44), ("KN", 63, 54), ("KW", 67, 64), ("KH", 71, 68), ("Stride", 75, 72),
        ("Pad", 78, 76), ("PadSides", 82, 79), ("ImageStartAddress", 114, 83),
        ("ImageEndAddress", 146, 115), ("WeightStartAddress", 178, 147),
        ("WeightEndAddress", 210, 179),
    ],
    "FC": [
        ("Opcode", 3, 0), ("WeightRows", 19, 4), ("WeightCols", 35, 20),
        ("InputRows", 51, 36), ("DropoutConstant", 59, 52), ("Flatten", 60, 60),
        ("ImageDim", 80, 61), ("ImageStartAddress", 112, 81), ("ImageEndAddr", 144, 113),
        ("WeightStartAddress", 176, 145), ("WeightEndAddress", 208, 177),
        ("Vec2MatCols", 224, 209),
    ],
    "OutputBlock": [
        ("Opcode", 3, 0), ("AccumulantAddr", 35, 4), ("OutputAddr", 67, 36),
        ("ChannelItr", 79, 68), ("KernelItr", 91, 80), ("ImageDimOutput", 107, 92),
        ("ImageDimAcc", 123, 108), ("AccEn", 124, 124), ("DispatchEn", 125, 125),
        ("DispatchID", 157, 126), ("OnChipAcc", 158, 158),
    ],
    "START": [("Opcode", 3, 0), ("LayerNumber", 15, 4), ("TotalLayers", 27, 16)],
    "TailBlock": [
        ("Opcode", 3, 0), ("BNEn", 4, 4), ("BNChannels", 14, 5), ("BNStartAddress", 46, 15),
        ("BNEndAddress", 78, 47), ("ActEn", 79, 79), ("ActType", 83, 80),
        ("ActParam", 91, 84), ("QuantEn", 92, 92), ("QuantScale", 108, 93),
        ("QuantShift", 113, 109), ("PoolEn", 114, 114), ("PoolType", 117, 115),
        ("PoolWidth", 127, 118), ("PoolHeight", 137, 128), ("PoolStride", 141, 138),
        ("PoolPadding", 145, 142), ("PoolCeil", 146, 146), ("PoolModCount", 150, 147),
        ("PoolPadSides", 154, 151), ("BiasEn", 155, 155), ("BiasWidth", 163, 156),
        ("BiasStartAddress", 195, 164), ("BiasEndAddress", 227, 196),
    ],
}  # fmt: skip
OPCODES = {"CONV": 0x0, "TailBlock": 0x1, "OutputBlock": 0x2, "FC": 0x3, "START": 0xF}

ALL_FIELDS = [(fmt, f) for fmt in isa.FORMATS.values() for f in fmt.fields if f.name != "Opcode"]


def test_tables_match_the_seed() -> None:
    """Every format but ELTWISE is the seed's; ELTWISE is edgesynth's choice (docs/gati.md)."""
    assert set(isa.FORMATS_BY_NAME) - {"ELTWISE"} == set(SEED_RANGES)
    for name, ranges in SEED_RANGES.items():
        fmt = isa.FORMATS_BY_NAME[name]
        assert fmt.opcode == OPCODES[name]
        assert [(f.name, f.msb, f.lsb) for f in fmt.fields] == ranges


def test_fields_do_not_overlap_and_fit_256_bits() -> None:
    for fmt in isa.FORMATS.values():
        seen = 0
        for f in fmt.fields:
            assert seen & f.mask == 0, f"{fmt.name}.{f.name} overlaps"
            seen |= f.mask
        assert seen < 1 << isa.INST_BITS


@pytest.mark.parametrize(("fmt", "field"), ALL_FIELDS, ids=lambda v: getattr(v, "name", ""))
def test_field_round_trip(fmt: isa.Format, field: isa.Field) -> None:
    rng = random.Random(f"{fmt.name}.{field.name}")
    for value in (0, field.max, rng.randrange(field.max + 1)):
        inst = isa.make(fmt, **{field.name: value})
        word = isa.encode(inst)
        # exactly the field's bits (and the opcode) are set
        assert word & ~(field.mask | 0xF) == 0
        assert (word >> field.lsb) & field.max == value
        assert word & 0xF == fmt.opcode
        raw = isa.to_bytes(word)
        assert len(raw) == 32
        back = isa.decode(raw)
        assert back.fmt is fmt
        assert back.fields == inst.fields
        assert back[field.name] == value


@pytest.mark.parametrize("fmt", list(isa.FORMATS.values()), ids=lambda f: f.name)
def test_all_fields_at_once(fmt: isa.Format) -> None:
    rng = random.Random(fmt.name)
    for _ in range(20):
        values = {f.name: rng.randrange(f.max + 1) for f in fmt.fields if f.name != "Opcode"}
        inst = isa.make(fmt, **values)
        back = isa.decode(isa.encode_bytes(inst))
        assert back.fields == {"Opcode": fmt.opcode, **values}


@pytest.mark.parametrize(("fmt", "field"), ALL_FIELDS, ids=lambda v: getattr(v, "name", ""))
def test_value_that_does_not_fit_is_an_error(fmt: isa.Format, field: isa.Field) -> None:
    with pytest.raises(EdgesynthError, match=rf"{fmt.name}\.{field.name} = {field.max + 1} "):
        isa.make(fmt, **{field.name: field.max + 1})
    with pytest.raises(EdgesynthError, match=f"{field.width}-bit field"):
        isa.make(fmt, **{field.name: -1})
    inst = isa.make(fmt)
    inst.fields[field.name] = field.max + 1  # bypassing make: encode checks again
    with pytest.raises(EdgesynthError, match=field.name):
        isa.encode(inst)


def test_unknown_field_and_context() -> None:
    with pytest.raises(EdgesynthError, match="CONV has no field `Foo`"):
        isa.make(isa.CONV, Foo=1)
    with pytest.raises(EdgesynthError, match=r"^ONNX node `conv1`: CONV\.IC = 1024"):
        isa.make(isa.CONV, "ONNX node `conv1`", IC=1024)


def test_little_endian_word_layout() -> None:
    word = isa.encode_bytes(isa.make(isa.START, LayerNumber=0x123, TotalLayers=0xABC))
    # bits 3:0 opcode F, 15:4 = 0x123, 27:16 = 0xABC -> 0x0ABC123F
    assert word[:4] == bytes([0x3F, 0x12, 0xBC, 0x0A])
    assert word[4:] == bytes(28)


def test_unknown_opcode_reserved_bits_and_truncation() -> None:
    for op in (0x5, 0x7, 0xE):
        with pytest.raises(EdgesynthError, match=rf"byte offset 0x40: unknown opcode {op:#x}"):
            isa.decode(op.to_bytes(32, "little"), offset=0x40)
    # START uses bits 27:0; bit 28 is reserved
    with pytest.raises(EdgesynthError, match="reserved bit 28"):
        isa.decode(((1 << 28) | 0xF).to_bytes(32, "little"))
    # TailBlock uses up to bit 227; bit 255 is reserved
    with pytest.raises(EdgesynthError, match="reserved bit 255"):
        isa.decode(((1 << 255) | 0x1).to_bytes(32, "little"))
    blob = isa.encode_bytes(isa.make(isa.START, TotalLayers=1)) * 2
    with pytest.raises(EdgesynthError, match="byte offset 0x20: truncated instruction"):
        isa.decode_blob(blob[:50])
    assert len(isa.decode_blob(blob)) == 2


def test_table_printer_shares_the_definition() -> None:
    inst = isa.make(isa.OUTPUT, OutputAddr=0x1000, KernelItr=3, DispatchEn=1)
    text = isa.format_table(inst)
    lines = text.splitlines()
    assert lines[0] == "OutputBlock"
    assert [ln.split()[0] for ln in lines[2:]] == [f.name for f in isa.OUTPUT.fields]
    assert "OutputAddr        67:36  0x00001000" in text
    assert "KernelItr         91:80  3" in text
    assert "DispatchEn          125  1" in text


@pytest.mark.parametrize("fmt", list(isa.FORMATS.values()), ids=lambda f: f.name)
def test_the_functional_models_own_table_reads_every_field_the_encoder_writes(
    fmt: isa.Format,
) -> None:
    """Two transcriptions of the Gati document, the encoder's (isa.py) and the functional
    model's (executor/isa.py), agree on every field: each field alone, at its extremes, read
    back by the functional model's decoder, under the same name and nothing else set."""
    from edgesynth.targets.gati.executor import isa as funcsim_isa

    name, spans = funcsim_isa.FORMATS[fmt.opcode]
    assert name == fmt.name
    assert set(spans) == {f.name for f in fmt.fields} - {"Opcode"}
    for field in fmt.fields:
        if field.name == "Opcode":
            continue
        for value in (1, field.max):
            inst = isa.make(fmt, **{field.name: value})
            back = funcsim_isa.decode(isa.encode_bytes(inst), 0)
            assert back.name == fmt.name
            assert dict(back.fields) == {k: v for k, v in inst.fields.items() if k != "Opcode"}


SEED = Path(__file__).resolve().parents[2].parent / "shared" / "seeds" / "001_efcc578116bbc6b0.txt"


@pytest.mark.corpus
def test_the_functional_models_tables_are_the_seeds() -> None:
    """The functional model's instruction table and DWP constants, read against the Gati
    document's own `define lines (../shared/seeds/001_...)."""
    from edgesynth.targets.gati.executor import dwp as funcsim_dwp
    from edgesynth.targets.gati.executor import isa as funcsim_isa

    if not SEED.is_file():
        pytest.fail(f"the Gati document is missing: expected it at {SEED}")
    text = SEED.read_text()
    ranges: dict[str, dict[str, str]] = {}
    for block, name, bits in re.findall(r"`define ([A-Za-z]+)_(\w+) (\d+:\d+)", text):
        ranges.setdefault(block, {})[name] = bits
    opcodes = {b: int(v, 16) for b, v in re.findall(r"`define OP_(\w+) 'h([0-9a-f]+)", text)}
    assert {v[0] for v in funcsim_isa.TABLES.values()} == set(ranges) == set(opcodes)
    for op, (block, fields) in funcsim_isa.TABLES.items():
        assert opcodes[block] == op, block
        assert ranges[block] == {"Opcode": funcsim_isa.OPCODE_RANGE, **fields}, block
    values = {k: int(v, 16) for k, v in re.findall(r"`define (\w+) 'h([0-9a-f]+)", text)}
    assert values["DWP_SOP"] == funcsim_dwp.SOP
    assert "`define DWP_HEADER_BYTES 12" in text and funcsim_dwp.HEADER_BYTES == 12
    assert values["META_SOP"] == funcsim_dwp.META_SOP
    for code, name in funcsim_dwp.META_TYPES.items():
        assert values[f"META_TYPE_{name}"] == code
    assert tuple(values[f"META_CONST_DISPATCH_{c}"] for c in ("RAH", "UART")) == (
        funcsim_dwp.DISPATCH_CHANNELS
    )
    assert values["ACT_RELU"] == funcsim_isa.ACT_RELU
    for code, name in ((funcsim_isa.POOL_MAX, "MAX"), (funcsim_isa.POOL_AVERAGE, "AVERAGE")):
        assert values[f"POOL_{name}"] == code
    assert values["POOL_GLOBAL_AVG"] == funcsim_isa.POOL_GLOBAL_AVG
