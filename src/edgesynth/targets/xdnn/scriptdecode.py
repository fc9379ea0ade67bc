"""Decoder: `script.bin` bytes -> a Script, every command by field name. Malformed input is
refused with the byte offset. Written from the file format and the register map; it does not
use the encoder."""

from __future__ import annotations

import struct

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import regmap as rm
from edgesynth.targets.xdnn.scriptmodel import (
    HEADER_BYTES,
    MAGIC,
    RECORD_BYTES,
    VERSION,
    Script,
    ScriptCommand,
)


def _bad(offset: int, message: str, source: str) -> EdgesynthError:
    return EdgesynthError(f"byte {offset}: {message}", file=source)


def unpack_register(reg: rm.Register, word: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in reg.fields:
        v = (word >> f.lsb) & f.mask
        if f.signed and v >> (f.width - 1):
            v -= 1 << f.width
        out[f.name] = v
    return out


def decode(data: bytes, source: str = "script.bin") -> Script:
    if len(data) < HEADER_BYTES:
        raise _bad(len(data), f"truncated header ({len(data)} of {HEADER_BYTES} bytes)", source)
    if data[:8] != MAGIC:
        raise _bad(0, f"not an xDNN script image (magic {data[:8]!r}, expected {MAGIC!r})", source)
    version, pixels, imem, count = struct.unpack_from("<IIII", data, 8)
    if version != VERSION:
        raise _bad(8, f"format version {version}; this reader knows {VERSION}", source)
    want = HEADER_BYTES + count * RECORD_BYTES
    if len(data) != want:
        raise _bad(
            min(len(data), want),
            f"the header announces {count} writes ({want} bytes), the file has {len(data)} bytes",
            source,
        )
    records = np.frombuffer(data, dtype="<u4", offset=HEADER_BYTES).reshape(-1, 2)
    script = Script(pixels, imem, [])
    i = 0
    n = len(records)

    def off(k: int) -> int:
        return HEADER_BYTES + k * RECORD_BYTES

    def reg_at(k: int) -> rm.Register:
        addr, word = int(records[k, 0]), int(records[k, 1])
        reg = rm.BY_ADDRESS.get(addr)
        if reg is None:
            raise _bad(off(k), f"write to unknown register 0x{addr:04x}", source)
        if word & ~reg.used_mask & 0xFFFFFFFF:
            raise _bad(off(k), f"{reg.name} = 0x{word:08x} sets reserved bits", source)
        return reg

    while i < n and not reg_at(i).scripted:
        reg = reg_at(i)
        script.init.append((reg.name, int(records[i, 1])))
        i += 1
    while i < n:
        reg = reg_at(i)
        if reg is not rm.CNN_COMMAND:
            raise _bad(off(i), f"a command must start with CNN_COMMAND, not {reg.name}", source)
        start = i
        fields = unpack_register(rm.CNN_COMMAND, int(records[i, 1]))
        op = rm.OPNAMES.get(fields["opcode"])
        if op is None:
            raise _bad(off(i), f"unknown opcode {fields['opcode']}", source)
        del fields["opcode"]
        expected = rm.COMMAND_REGISTERS[op]
        seen: set[str] = set()
        i += 1
        while True:
            if i >= n:
                raise _bad(off(i), f"{op} at byte {off(start)} has no Script Memory Push", source)
            reg = reg_at(i)
            if reg is rm.SCRIPT_PUSH:
                if int(records[i, 1]) != 1:
                    raise _bad(off(i), "SCRIPT_PUSH must be written with 1", source)
                i += 1
                break
            if reg not in expected:
                raise _bad(off(i), f"{op} does not use {reg.name}", source)
            if reg.name in seen:
                raise _bad(off(i), f"{reg.name} written twice in one command", source)
            seen.add(reg.name)
            fields.update(unpack_register(reg, int(records[i, 1])))
            i += 1
        missing = [r.name for r in expected if r.name not in seen]
        if missing:
            raise _bad(off(start), f"{op} never sets {', '.join(missing)}", source)
        script.commands.append(ScriptCommand(op, fields, off(start)))
    return script


def describe(script: Script) -> str:
    lines = [
        f"xDNN script: engine with {script.dsp_pixels} DSP pixels, {script.imem_bytes} bytes "
        f"of IMEM, {len(script.commands)} commands",
        "InitOnce:",
    ]
    for name, value in script.init:
        lines.append(f"    {name:<20} 0x{value:08x}")
    for c in script.commands:
        lines.append(f"{c.fields.get('command_id', '?')} {c.op}  (byte {c.offset})")
        for k, v in c.fields.items():
            shown = hex(v) if "addr" in k or "offset" in k else v
            lines.append(f"    {k:<20} {shown}")
    return "\n".join(lines)
