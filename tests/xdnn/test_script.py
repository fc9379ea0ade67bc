"""script.bin: decode -> encode gives the same bytes; malformed images are refused with the
byte offset; field ranges are enforced."""

from __future__ import annotations

import struct

import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import regmap as rm
from edgesynth.targets.xdnn.executor.decode import decode
from edgesynth.targets.xdnn.script import encode, init_writes
from edgesynth.targets.xdnn.scriptmodel import HEADER_BYTES, Script, ScriptCommand


def _script() -> Script:
    s = Script(28, 4 << 20, init_writes(0x1000, 0x2000_0000_0))
    s.commands.append(
        ScriptCommand(
            "XNGather",
            {
                "command_id": 1,
                "in_w": 28,
                "in_h": 28,
                "in_c": 1,
                "out_addr": 0,
                "ddr_offset": 0,
                "start_row": 0,
                "end_row": 27,
            },
        )
    )
    s.commands.append(
        ScriptCommand(
            "XNConv",
            {
                "command_id": 2,
                "kernel_w": 3,
                "kernel_h": 3,
                "stride_w": 1,
                "stride_h": 1,
                "pad_w": 1,
                "pad_h": 1,
                "dilation_w": 1,
                "dilation_h": 1,
                "in_w": 28,
                "in_h": 28,
                "in_c": 1,
                "out_w": 28,
                "out_h": 28,
                "out_c": 6,
                "in_addr": 0,
                "out_addr": 0x7000,
                "preshift": 63,
                "scale": 255,
                "postshift": 15,
                "bias": -32768,
                "bias_enable": 1,
                "per_channel": 1,
                "relu": 1,
                "free_download": 1,
                "filter_offset": 0,
                "quant_offset": 0x80,
            },
        )
    )
    return s


def test_decode_then_encode_is_identical() -> None:
    data = encode(_script())
    decoded = decode(data)
    assert encode(decoded) == data
    conv = decoded.commands[1]
    assert conv.op == "XNConv" and conv.fields["bias"] == -32768
    assert conv.fields["free_download"] == 1  # CNN command bit 11 (seed)
    word = struct.unpack_from("<II", data, conv.offset)
    assert word[0] == rm.CNN_COMMAND.address and word[1] >> 11 & 1
    assert ("INT_MASK", 0) in decoded.init and dict(decoded.init)["DDR_FILTER_BASE_HI"] == 2


def test_seed_registers_sit_at_their_addresses() -> None:
    assert rm.INT_STATUS.address == 0x0008 and rm.INT_MASK.address == 0x000C
    assert [r.address for r in rm.COMPLETION] == list(range(0x30, 0x50, 4))
    assert rm.IMEM_IN_ADDR.address == 0x60 and rm.IMEM_OUT_ADDR.address == 0x6C
    assert next(f for f in rm.CNN_COMMAND.fields if f.name == "free_download").lsb == 11


def test_every_command_ends_with_the_push() -> None:
    data = encode(_script())
    records = [struct.unpack_from("<II", data, o) for o in range(HEADER_BYTES, len(data), 8)]
    assert records[-1] == (rm.SCRIPT_PUSH.address, 1)
    pushes = [i for i, (a, _) in enumerate(records) if a == rm.SCRIPT_PUSH.address]
    assert len(pushes) == 2


def _corrupt(data: bytes, record: int, addr: int | None = None, value: int | None = None):
    off = HEADER_BYTES + 8 * record
    a, v = struct.unpack_from("<II", data, off)
    return data[:off] + struct.pack(
        "<II", a if addr is None else addr, v if value is None else value
    ) + data[off + 8 :], off


def test_malformed_images_name_the_byte() -> None:
    data = encode(_script())
    with pytest.raises(EdgesynthError, match="byte 0: not an xDNN script"):
        decode(b"XXXXXXXX" + data[8:])
    with pytest.raises(EdgesynthError, match="the header announces"):
        decode(data[:-3])
    bad, off = _corrupt(data, 20, addr=0x0FF0)
    with pytest.raises(EdgesynthError, match=f"byte {off}: write to unknown register 0x0ff0"):
        decode(bad)
    bad, off = _corrupt(data, 21, value=0xF)  # the convolution's CNN_COMMAND: opcode 15
    with pytest.raises(EdgesynthError, match=f"byte {off}: unknown opcode 15"):
        decode(bad)
    bad, off = _corrupt(data, 23, value=0xFFFFFFFF)  # its IN_SIZE with reserved bits
    with pytest.raises(EdgesynthError, match=f"byte {off}: IN_SIZE = 0xffffffff sets reserved"):
        decode(bad)
    short = data[HEADER_BYTES - 4 :]  # drop the last record (the final push)
    count = (len(data) - HEADER_BYTES) // 8 - 1
    cut = data[: HEADER_BYTES - 4] + struct.pack("<I", count) + short[4:-8]
    with pytest.raises(EdgesynthError, match="has no Script Memory Push"):
        decode(cut)


def test_values_outside_their_fields_are_refused() -> None:
    s = _script()
    s.commands[1].fields["preshift"] = 64
    with pytest.raises(EdgesynthError, match="`preshift` = 64 does not fit the 6-bit field"):
        encode(s)
    s.commands[1].fields["preshift"] = 0
    s.commands[1].fields["bias"] = 32768
    with pytest.raises(EdgesynthError, match="`bias` = 32768"):
        encode(s)


def test_the_decoders_own_register_map_reads_every_field_the_encoder_writes() -> None:
    """Two transcriptions of the register map, the encoder's (regmap.py) and the decoder's the
    functional model reads programs with (executor/decode.py), agree: same registers at the same
    addresses, same opcodes and command registers, every field alone at its extremes read back
    under its name."""
    from edgesynth.targets.xdnn.executor import decode as sd
    from edgesynth.targets.xdnn.script import pack_register

    assert {a: (n, s) for a, (n, s, _) in sd.REGISTERS.items()} == {
        r.address: (r.name, r.scripted) for r in rm.REGISTERS
    }
    assert {op: name for op, (name, _) in sd.COMMANDS.items()} == rm.OPNAMES
    for name, regs in sd.COMMANDS.values():
        assert set(regs) == {r.name for r in rm.COMMAND_REGISTERS[name]}
    for reg in rm.REGISTERS:
        assert set(sd.REGISTERS[reg.address][2]) == {f.name for f in reg.fields}
        for f in reg.fields:
            lo, hi = (-(1 << (f.width - 1)), (1 << (f.width - 1)) - 1) if f.signed else (1, f.mask)
            for value in (lo, hi):
                values = {g.name: 0 for g in reg.fields} | {f.name: value}
                word = pack_register(reg, values, reg.name)
                assert sd.unpack(reg.address, word) == values, (reg.name, f.name)
