"""Decoder: `script.bin` bytes -> a Script, every command by field name. Malformed input is
refused with the byte offset.

The functional model reads programs through this decoder, so it keeps its own tables, as data:
the file header and the CSR register map, written from the seed (`../shared/seeds/004_...`:
interrupt status 0x0008, mask 0x000c, completion vectors 0x30-0x4c, CNN command bit 11, the IMEM
input/output base offsets 0x60/0x6c, the 6-bit pre-shift, 8-bit scale, 4-bit post-shift and
16-bit bias) and from docs/xdnn.md for what the seed leaves to edgesynth. It never imports the
encoder's register map (`regmap.py`) or file constants: a field the encoder puts in the wrong
bits decodes to another value here, or sets a bit this table calls reserved, and the proof
notices (tests/test_import_rules.py keeps it so).
"""

from __future__ import annotations

import struct

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn.scriptmodel import Script, ScriptCommand

# -- the file: header (magic, u32 version, DSP pixels, IMEM bytes, write count), then writes ---
MAGIC = b"XDNNSCR1"
VERSION = 1
HEADER_BYTES = 24
RECORD_BYTES = 8  # u32 register address, u32 value

# -- the register map: address -> (name, in the script memory?, {field: "msb:lsb"}) ----------
# A field written "s15:0" is signed (two's complement). Registers outside the script memory
# (InitOnce and host registers) come before the first command.
WHOLE = "31:0"
REGISTERS: dict[int, tuple[str, bool, dict[str, str]]] = {
    0x0008: ("INT_STATUS", False, {"status": WHOLE}),
    0x000C: ("INT_MASK", False, {"mask": WHOLE}),
    0x0010: ("SCRIPT_PUSH", True, {"push": "0:0"}),
    0x0014: (
        "CNN_COMMAND",
        True,
        {
            "opcode": "3:0",
            "relu": "4:4",
            "bias_enable": "5:5",
            "per_channel": "6:6",
            "fc_mode": "7:7",
            "eltwise_add": "8:8",
            "eltwise_bn": "9:9",
            "bypass_perf_opt": "10:10",
            "free_download": "11:11",
            "data_8bit": "12:12",
            "command_id": "31:16",
        },
    ),
    0x0018: ("JOB_SUBMIT", False, {"image": "7:0"}),
    0x0020: ("DDR_IMAGE_BASE_LO", False, {"address": WHOLE}),
    0x0024: ("DDR_IMAGE_BASE_HI", False, {"address": WHOLE}),
    0x0028: ("DDR_FILTER_BASE_LO", False, {"address": WHOLE}),
    0x002C: ("DDR_FILTER_BASE_HI", False, {"address": WHOLE}),
    **{0x0030 + 4 * i: (f"COMPLETION_{i}", False, {"images": WHOLE}) for i in range(8)},
    0x0050: (
        "GEOMETRY",
        True,
        {
            "kernel_w": "3:0",
            "kernel_h": "7:4",
            "stride_w": "11:8",
            "stride_h": "15:12",
            "pad_w": "19:16",
            "pad_h": "23:20",
            "dilation_w": "27:24",
            "dilation_h": "31:28",
        },
    ),
    0x0054: ("IN_SIZE", True, {"in_w": "9:0", "in_h": "25:16"}),
    0x0058: ("IN_DEPTH", True, {"in_c": "11:0"}),
    0x005C: ("OUT_SIZE", True, {"out_w": "9:0", "out_h": "25:16"}),
    0x0060: ("IMEM_IN_ADDR", True, {"in_addr": "23:0"}),
    0x0064: ("OUT_DEPTH", True, {"out_c": "11:0"}),
    0x0068: ("IMEM_IN_B_ADDR", True, {"in_b_addr": "23:0"}),
    0x006C: ("IMEM_OUT_ADDR", True, {"out_addr": "23:0"}),
    0x0070: ("SCALE_SHIFT", True, {"preshift": "5:0", "scale": "15:8", "postshift": "19:16"}),
    0x0074: ("BIAS_VALUE", True, {"bias": "s15:0"}),
    0x0078: ("FILTER_OFFSET", True, {"filter_offset": WHOLE}),
    0x007C: ("QUANT_OFFSET", True, {"quant_offset": WHOLE}),
    0x0080: ("DDR_IMAGE_OFFSET", True, {"ddr_offset": WHOLE}),
    0x0084: ("ROWS", True, {"start_row": "9:0", "end_row": "25:16"}),
}
PUSH = "SCRIPT_PUSH"
COMMAND = "CNN_COMMAND"

# -- commands: opcode -> (operation, the registers it must write before its push) -------------
_IMAGE = ("IN_SIZE", "IN_DEPTH", "OUT_SIZE", "IMEM_IN_ADDR", "OUT_DEPTH")
_QUANT = ("SCALE_SHIFT", "BIAS_VALUE", "FILTER_OFFSET", "QUANT_OFFSET")
COMMANDS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("XNConv", ("GEOMETRY", *_IMAGE, "IMEM_OUT_ADDR", *_QUANT)),
    2: ("XNMaxPool", ("GEOMETRY", *_IMAGE, "IMEM_OUT_ADDR")),
    3: ("XNAvgPool", ("GEOMETRY", *_IMAGE, "IMEM_OUT_ADDR", "SCALE_SHIFT")),
    4: ("XNEltwise", ("IN_SIZE", "IN_DEPTH", "IMEM_IN_ADDR", "IMEM_IN_B_ADDR", "IMEM_OUT_ADDR")),
    5: ("XNGather", ("IN_SIZE", "IN_DEPTH", "IMEM_OUT_ADDR", "DDR_IMAGE_OFFSET", "ROWS")),
    6: ("XNUpload", ("IN_SIZE", "IN_DEPTH", "IMEM_IN_ADDR", "DDR_IMAGE_OFFSET")),
}


def _span(bits: str) -> tuple[int, int, bool]:
    """`msb:lsb` (or `smsb:lsb`, signed) -> (lsb, width, signed)."""
    signed = bits.startswith("s")
    msb, lsb = (int(b) for b in bits.lstrip("s").split(":"))
    return lsb, msb - lsb + 1, signed


_SPANS = {a: {f: _span(b) for f, b in fields.items()} for a, (_, _, fields) in REGISTERS.items()}
_USED = {a: sum(((1 << w) - 1) << lo for lo, w, _ in spans.values()) for a, spans in _SPANS.items()}


def _bad(offset: int, message: str, source: str) -> EdgesynthError:
    return EdgesynthError(f"byte {offset}: {message}", file=source)


def unpack(address: int, word: int) -> dict[str, int]:
    """Every field of the register at `address`, by name."""
    out: dict[str, int] = {}
    for name, (lsb, width, signed) in _SPANS[address].items():
        v = (word >> lsb) & ((1 << width) - 1)
        if signed and v >> (width - 1):
            v -= 1 << width
        out[name] = v
    return out


def _header(data: bytes, source: str) -> tuple[Script, np.ndarray]:
    """The script's engine facts and its (address, value) records."""
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
    return Script(pixels, imem, []), records


class _Reader:
    """The records one by one, each checked against the register map."""

    def __init__(self, records: np.ndarray, source: str) -> None:
        self.records, self.source, self.i = records, source, 0

    def offset(self, k: int | None = None) -> int:
        return HEADER_BYTES + (self.i if k is None else k) * RECORD_BYTES

    def more(self) -> bool:
        return self.i < len(self.records)

    def peek(self) -> tuple[str, bool, int, int]:
        """(register name, scripted, address, value) of the current record."""
        if not self.more():
            raise _bad(self.offset(), "the script ends inside a command", self.source)
        addr, word = int(self.records[self.i, 0]), int(self.records[self.i, 1])
        if addr not in REGISTERS:
            raise _bad(self.offset(), f"write to unknown register 0x{addr:04x}", self.source)
        name, scripted, _ = REGISTERS[addr]
        if word & ~_USED[addr] & 0xFFFFFFFF:
            raise _bad(self.offset(), f"{name} = 0x{word:08x} sets reserved bits", self.source)
        return name, scripted, addr, word

    def bad(self, message: str, k: int | None = None) -> EdgesynthError:
        return _bad(self.offset(k), message, self.source)


def _command(r: _Reader) -> ScriptCommand:
    """One command: its CNN_COMMAND write, its registers, the Script Memory Push."""
    start = r.i
    name, _, addr, word = r.peek()
    if name != COMMAND:
        raise r.bad(f"a command must start with {COMMAND}, not {name}")
    fields = unpack(addr, word)
    opcode = fields.pop("opcode")
    if opcode not in COMMANDS:
        raise r.bad(f"unknown opcode {opcode}")
    op, expected = COMMANDS[opcode]
    seen: set[str] = set()
    r.i += 1
    while True:
        if not r.more():
            raise r.bad(f"{op} at byte {r.offset(start)} has no Script Memory Push")
        name, _, addr, word = r.peek()
        if name == PUSH:
            if word != 1:
                raise r.bad(f"{PUSH} must be written with 1")
            r.i += 1
            break
        if name not in expected:
            raise r.bad(f"{op} does not use {name}")
        if name in seen:
            raise r.bad(f"{name} written twice in one command")
        seen.add(name)
        fields.update(unpack(addr, word))
        r.i += 1
    missing = [m for m in expected if m not in seen]
    if missing:
        raise r.bad(f"{op} never sets {', '.join(missing)}", start)
    return ScriptCommand(op, fields, r.offset(start))


def decode(data: bytes, source: str = "script.bin") -> Script:
    script, records = _header(data, source)
    r = _Reader(records, source)
    while r.more() and not r.peek()[1]:
        name, _, _, word = r.peek()
        script.init.append((name, word))
        r.i += 1
    while r.more():
        script.commands.append(_command(r))
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
