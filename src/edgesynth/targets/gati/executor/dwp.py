"""The functional model's own DWP decoder: a stream of packets into DRAM writes and META
commands.

Written from the Gati document (`../shared/seeds/001_...`: "SOP (Start Of Packet), DS (Data
Size), and DRAM Address, followed by variable length data"; `DWP_SOP 'hffffffff`,
`DWP_HEADER_BYTES 12`, `META_SOP 'hffffffffffff` and the `META_TYPE_*` / `META_CONST_DISPATCH_*`
values), never from the stream encoder (`dwp.py`). Words are little-endian 32-bit. A META
packet is 16 bytes: the 48-bit META SOP, 16 zero bits, the type word, the value word; a DWP
packet's DS is a multiple of 4, so its low 16 bits never read 0xFFFF.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from edgesynth.errors import EdgesynthError

SOP = 0xFFFFFFFF
HEADER_BYTES = 12  # SOP, DS, address
META_SOP = 0xFFFFFFFFFFFF
META_SOP_BYTES = 6
META_BYTES = 16
WORD = 4  # "DWP is a 32bit protocol"

RESET, DISPATCH, PAYLOAD_SIZE, INST_ORIGIN = 0x0, 0x1, 0x2, 0x3
META_TYPES = {
    RESET: "RESET",
    DISPATCH: "DISPATCH",
    PAYLOAD_SIZE: "PAYLOAD_SIZE",
    INST_ORIGIN: "INST_ORIGIN",
}
DISPATCH_CHANNELS = (0x0, 0x1)  # RAH, UART


@dataclass(frozen=True)
class Write:
    """A DWP packet: `payload` written at DRAM `address` (or, sent back, tagged with it)."""

    address: int
    payload: bytes
    offset: int = 0  # byte offset of its SOP in the stream

    @property
    def size(self) -> int:
        return len(self.payload)


@dataclass(frozen=True)
class Meta:
    type: int
    value: int
    offset: int

    @property
    def type_name(self) -> str:
        return META_TYPES[self.type]


def _bad(pos: int, message: str) -> EdgesynthError:
    return EdgesynthError(f"byte offset {pos:#x}: {message}")


def read_stream(data: bytes) -> list[Write | Meta]:
    """Every packet of `data`, in order; a malformed one is refused with its byte offset."""
    out: list[Write | Meta] = []
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < WORD:
            raise _bad(pos, f"truncated packet ({n - pos} trailing bytes, no SOP)")
        (sop,) = struct.unpack_from("<I", data, pos)
        if sop != SOP:
            raise _bad(pos, f"bad SOP {sop:#010x} (expected {SOP:#010x})")
        if n - pos < 2 * WORD:
            raise _bad(pos, "truncated packet header")
        if int.from_bytes(data[pos : pos + META_SOP_BYTES], "little") == META_SOP:
            out.append(_meta(data, pos))
            pos += META_BYTES
            continue
        if n - pos < HEADER_BYTES:
            raise _bad(pos, f"truncated DWP header ({n - pos} of {HEADER_BYTES} bytes)")
        size, address = struct.unpack_from("<II", data, pos + WORD)
        if size % WORD:
            raise _bad(pos + 4, f"data size {size} is not a multiple of 4 bytes")
        if address % WORD:
            raise _bad(pos + 8, f"DRAM address {address:#x} is not 32-bit aligned")
        start = pos + HEADER_BYTES
        if n - start < size:
            raise _bad(
                pos, f"truncated payload ({n - start} of {size} bytes for address {address:#x})"
            )
        out.append(Write(address, bytes(data[start : start + size]), pos))
        pos = start + size
    return out


def _meta(data: bytes, pos: int) -> Meta:
    if len(data) - pos < META_BYTES:
        raise _bad(pos, f"truncated META packet ({len(data) - pos} of {META_BYTES} bytes)")
    reserved = pos + META_SOP_BYTES
    if data[reserved : pos + 8] != b"\0\0":
        raise _bad(reserved, "META reserved bits are not zero")
    kind, value = struct.unpack_from("<II", data, pos + 8)
    if kind not in META_TYPES:
        raise _bad(pos + 8, f"unknown META type {kind:#x}")
    if kind == DISPATCH and value not in DISPATCH_CHANNELS:
        raise _bad(pos + 12, f"DISPATCH channel {value} is neither RAH (0) nor UART (1)")
    return Meta(kind, value, pos)
