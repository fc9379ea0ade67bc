"""Encoder: a Script (init registers and commands by field) -> the `script.bin` bytes."""

from __future__ import annotations

import struct

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import regmap as rm
from edgesynth.targets.xdnn.scriptmodel import MAGIC, VERSION, Script, ScriptCommand


def pack_register(reg: rm.Register, values: dict[str, int], what: str) -> int:
    word = 0
    for f in reg.fields:
        v = int(values.get(f.name, 0))
        lo, hi = (-(1 << (f.width - 1)), (1 << (f.width - 1)) - 1) if f.signed else (0, f.mask)
        if not lo <= v <= hi:
            raise EdgesynthError(
                f"{what}: `{f.name}` = {v} does not fit the {f.width}-bit field of "
                f"{reg.name} ({lo}..{hi})"
            )
        word |= (v & f.mask) << f.lsb
    return word


def command_writes(cmd: ScriptCommand) -> list[tuple[int, int]]:
    what = f"command {cmd.fields.get('command_id', '?')} ({cmd.op})"
    if cmd.op not in rm.OPCODES:
        raise EdgesynthError(f"{what}: no opcode for {cmd.op}")
    head = {**cmd.fields, "opcode": rm.OPCODES[cmd.op]}
    writes = [(rm.CNN_COMMAND.address, pack_register(rm.CNN_COMMAND, head, what))]
    for reg in rm.COMMAND_REGISTERS[cmd.op]:
        writes.append((reg.address, pack_register(reg, cmd.fields, what)))
    writes.append((rm.SCRIPT_PUSH.address, 1))
    return writes


def encode(script: Script) -> bytes:
    writes: list[tuple[int, int]] = []
    for name, value in script.init:
        reg = rm.BY_NAME[name]
        writes.append((reg.address, pack_register(reg, {reg.fields[0].name: value}, name)))
    for cmd in script.commands:
        writes.extend(command_writes(cmd))
    head = MAGIC + struct.pack("<IIII", VERSION, script.dsp_pixels, script.imem_bytes, len(writes))
    return head + b"".join(struct.pack("<II", a, v) for a, v in writes)


def init_writes(image_base: int, filter_base: int) -> list[tuple[str, int]]:
    """InitOnce: DDR bases, every interrupt unmasked, status and completion vectors cleared
    (write-one-to-clear)."""
    out = [
        ("DDR_IMAGE_BASE_LO", image_base & 0xFFFFFFFF),
        ("DDR_IMAGE_BASE_HI", image_base >> 32),
        ("DDR_FILTER_BASE_LO", filter_base & 0xFFFFFFFF),
        ("DDR_FILTER_BASE_HI", filter_base >> 32),
        ("INT_MASK", 0),
        ("INT_STATUS", 0xFF),
    ]
    out += [(r.name, 0xFFFFFFFF) for r in rm.COMPLETION]
    return out
