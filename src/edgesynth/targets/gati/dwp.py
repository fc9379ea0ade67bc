"""DRAM Write Protocol (DWP) packets and the META packets that control the FPGA.

A stream is a sequence of little-endian 32-bit words:

* DWP packet: SOP 0xFFFFFFFF, DS (payload size in bytes), DRAM address, then DS bytes of
  payload. DS and the address are multiples of 4 (DWP is a 32-bit protocol).
* META packet (16 bytes): the 48-bit META SOP 0xFFFFFFFFFFFF, 16 reserved zero bits, the META
  type word, the value word. A DWP packet can never look like one: its DS word is a multiple
  of 4, so its low 16 bits are never 0xFFFF.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from edgesynth.errors import EdgesynthError

DWP_SOP = 0xFFFFFFFF
DWP_HEADER_BYTES = 12
WORD_BYTES = 4
META_SOP = 0xFFFFFFFFFFFF
META_BYTES = 16

META_RESET = 0x0
META_DISPATCH = 0x1
META_PAYLOAD_SIZE = 0x2
META_INST_ORIGIN = 0x3
META_NAMES = {
    META_RESET: "RESET",
    META_DISPATCH: "DISPATCH",
    META_PAYLOAD_SIZE: "PAYLOAD_SIZE",
    META_INST_ORIGIN: "INST_ORIGIN",
}
DISPATCH_RAH = 0x0
DISPATCH_UART = 0x1


@dataclass(frozen=True)
class DwpPacket:
    address: int
    payload: bytes
    offset: int = 0  # byte offset of the packet's SOP in the stream it was parsed from

    @property
    def size(self) -> int:
        return len(self.payload)

    @property
    def payload_offset(self) -> int:
        return self.offset + DWP_HEADER_BYTES


@dataclass(frozen=True)
class MetaPacket:
    type: int
    value: int = 0
    offset: int = 0

    @property
    def type_name(self) -> str:
        return META_NAMES.get(self.type, f"{self.type:#x}")


Packet = DwpPacket | MetaPacket


def _check_word(value: int, what: str) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise EdgesynthError(f"{what} {value:#x} does not fit 32 bits")


def encode_dwp(address: int, payload: bytes) -> bytes:
    """One DWP packet; the payload is zero-padded to a whole number of 32-bit words."""
    _check_word(address, "DRAM address")
    if address % WORD_BYTES:
        raise EdgesynthError(f"DRAM address {address:#x} is not 32-bit aligned")
    pad = (-len(payload)) % WORD_BYTES
    body = bytes(payload) + b"\0" * pad
    _check_word(len(body), "data size")
    return struct.pack("<III", DWP_SOP, len(body), address) + body


def encode_meta(meta_type: int, value: int = 0) -> bytes:
    if meta_type not in META_NAMES:
        raise EdgesynthError(f"unknown META type {meta_type:#x}")
    _check_word(value, "META value")
    return META_SOP.to_bytes(6, "little") + b"\0\0" + struct.pack("<II", meta_type, value)


def encode_stream(packets: Iterable[Packet]) -> bytes:
    out = bytearray()
    for p in packets:
        if isinstance(p, MetaPacket):
            out += encode_meta(p.type, p.value)
        else:
            out += encode_dwp(p.address, p.payload)
    return bytes(out)


def parse_stream(data: bytes) -> list[Packet]:
    """Split a stream into packets; a malformed one is an error naming its byte offset."""
    packets: list[Packet] = []
    pos = 0
    n = len(data)
    while pos < n:
        if n - pos < WORD_BYTES:
            raise EdgesynthError(
                f"byte offset {pos:#x}: truncated packet ({n - pos} trailing bytes, no SOP)"
            )
        (sop,) = struct.unpack_from("<I", data, pos)
        if sop != DWP_SOP:
            raise EdgesynthError(
                f"byte offset {pos:#x}: bad SOP {sop:#010x} (expected {DWP_SOP:#010x})"
            )
        if n - pos < 8:
            raise EdgesynthError(f"byte offset {pos:#x}: truncated packet header")
        (second,) = struct.unpack_from("<I", data, pos + 4)
        if second & 0xFFFF == 0xFFFF:
            packets.append(_parse_meta(data, pos))
            pos += META_BYTES
            continue
        if n - pos < DWP_HEADER_BYTES:
            raise EdgesynthError(
                f"byte offset {pos:#x}: truncated DWP header ({n - pos} of "
                f"{DWP_HEADER_BYTES} bytes)"
            )
        size, address = struct.unpack_from("<II", data, pos + 4)
        if size % WORD_BYTES:
            raise EdgesynthError(
                f"byte offset {pos + 4:#x}: data size {size} is not a multiple of 4 bytes"
            )
        if address % WORD_BYTES:
            raise EdgesynthError(
                f"byte offset {pos + 8:#x}: DRAM address {address:#x} is not 32-bit aligned"
            )
        start = pos + DWP_HEADER_BYTES
        if n - start < size:
            raise EdgesynthError(
                f"byte offset {pos:#x}: truncated payload ({n - start} of {size} bytes "
                f"for address {address:#x})"
            )
        packets.append(DwpPacket(address, bytes(data[start : start + size]), pos))
        pos = start + size
    return packets


def _parse_meta(data: bytes, pos: int) -> MetaPacket:
    if len(data) - pos < META_BYTES:
        raise EdgesynthError(
            f"byte offset {pos:#x}: truncated META packet ({len(data) - pos} of {META_BYTES} bytes)"
        )
    if data[pos + 6 : pos + 8] != b"\0\0":
        raise EdgesynthError(f"byte offset {pos + 6:#x}: META reserved bits are not zero")
    meta_type, value = struct.unpack_from("<II", data, pos + 8)
    if meta_type not in META_NAMES:
        raise EdgesynthError(f"byte offset {pos + 8:#x}: unknown META type {meta_type:#x}")
    if meta_type == META_DISPATCH and value not in (DISPATCH_RAH, DISPATCH_UART):
        raise EdgesynthError(
            f"byte offset {pos + 12:#x}: DISPATCH channel {value} is neither RAH (0) nor UART (1)"
        )
    return MetaPacket(meta_type, value, pos)


def payload_bytes(packets: Sequence[Packet]) -> int:
    """Total bytes of the DWP packets (headers included), what PAYLOAD_SIZE announces."""
    return sum(DWP_HEADER_BYTES + p.size for p in packets if isinstance(p, DwpPacket))
