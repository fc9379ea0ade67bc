"""DWP and META packets: byte layout, round trip, malformed streams refused with the offset."""

from __future__ import annotations

import struct

import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati import dwp


def test_dwp_packet_bytes() -> None:
    pkt = dwp.encode_dwp(0x100, b"\x01\x02\x03\x04\x05")
    sop, size, addr = struct.unpack_from("<III", pkt)
    assert (sop, size, addr) == (0xFFFFFFFF, 8, 0x100)  # payload padded to a 32-bit word
    assert pkt[12:] == b"\x01\x02\x03\x04\x05\x00\x00\x00"
    assert len(pkt) == dwp.DWP_HEADER_BYTES + 8


def test_meta_packet_bytes() -> None:
    pkt = dwp.encode_meta(dwp.META_INST_ORIGIN, 0x40)
    assert pkt[:6] == b"\xff" * 6  # META SOP, 48 bits
    assert pkt[6:8] == b"\0\0"
    assert struct.unpack_from("<II", pkt, 8) == (3, 0x40)
    assert len(pkt) == dwp.META_BYTES


def test_stream_round_trip() -> None:
    packets: list[dwp.Packet] = [
        dwp.MetaPacket(dwp.META_RESET),
        dwp.MetaPacket(dwp.META_PAYLOAD_SIZE, 12 + 64 + 12 + 4),
        dwp.MetaPacket(dwp.META_INST_ORIGIN, 0),
        dwp.DwpPacket(0, bytes(range(64))),
        dwp.DwpPacket(0x40, b"\xff\xff\xff\xff"),  # payload that looks like a SOP
        dwp.MetaPacket(dwp.META_DISPATCH, dwp.DISPATCH_UART),
    ]
    data = dwp.encode_stream(packets)
    back = dwp.parse_stream(data)
    assert [type(p) for p in back] == [type(p) for p in packets]
    offsets = [p.offset for p in back]
    assert offsets == [0, 16, 32, 48, 48 + 76, 48 + 76 + 16]
    for a, b in zip(packets, back, strict=True):
        if isinstance(a, dwp.MetaPacket):
            assert isinstance(b, dwp.MetaPacket)
            assert (a.type, a.value) == (b.type, b.value)
        else:
            assert isinstance(b, dwp.DwpPacket)
            assert (a.address, a.payload) == (b.address, b.payload)
    assert dwp.payload_bytes(back) == 12 + 64 + 12 + 4


def _stream() -> bytes:
    return dwp.encode_meta(dwp.META_RESET) + dwp.encode_dwp(0x20, bytes(8))


def test_bad_sop() -> None:
    data = bytearray(_stream())
    data[16] = 0xFE
    with pytest.raises(EdgesynthError, match=r"byte offset 0x10: bad SOP 0xfffffffe"):
        dwp.parse_stream(bytes(data))
    with pytest.raises(EdgesynthError, match=r"byte offset 0x0: bad SOP 0x00000000"):
        dwp.parse_stream(bytes(16))


def test_truncated_payload_and_header() -> None:
    data = _stream()
    with pytest.raises(EdgesynthError, match=r"byte offset 0x10: truncated payload \(4 of 8"):
        dwp.parse_stream(data[:-4])
    with pytest.raises(EdgesynthError, match=r"byte offset 0x10: truncated DWP header"):
        dwp.parse_stream(data[:26])
    with pytest.raises(EdgesynthError, match=r"byte offset 0x10: truncated packet \(2 trailing"):
        dwp.parse_stream(data[:18])
    with pytest.raises(EdgesynthError, match=r"byte offset 0x0: truncated META packet"):
        dwp.parse_stream(data[:12])


def test_misaligned_address_and_size() -> None:
    bad_addr = struct.pack("<III", 0xFFFFFFFF, 4, 0x22) + bytes(4)
    with pytest.raises(EdgesynthError, match=r"byte offset 0x18: DRAM address 0x22 is not 32-bit"):
        dwp.parse_stream(dwp.encode_meta(dwp.META_RESET) + bad_addr)
    bad_size = struct.pack("<III", 0xFFFFFFFF, 6, 0x20) + bytes(8)
    with pytest.raises(EdgesynthError, match=r"byte offset 0x4: data size 6 is not a multiple"):
        dwp.parse_stream(bad_size)
    with pytest.raises(EdgesynthError, match="not 32-bit aligned"):
        dwp.encode_dwp(0x21, b"")


def test_bad_meta() -> None:
    data = bytearray(dwp.encode_meta(dwp.META_RESET))
    data[8] = 9
    with pytest.raises(EdgesynthError, match=r"byte offset 0x8: unknown META type 0x9"):
        dwp.parse_stream(bytes(data))
    data = bytearray(dwp.encode_meta(dwp.META_RESET))
    data[7] = 1
    with pytest.raises(EdgesynthError, match=r"byte offset 0x6: META reserved bits"):
        dwp.parse_stream(bytes(data))
    data = bytearray(dwp.encode_meta(dwp.META_DISPATCH))
    data[12] = 2
    with pytest.raises(EdgesynthError, match="DISPATCH channel 2"):
        dwp.parse_stream(bytes(data))
    with pytest.raises(EdgesynthError, match="unknown META type"):
        dwp.encode_meta(7)


def _read(reader, data: bytes) -> list[tuple[int, ...] | bytes] | str:  # type: ignore[no-untyped-def]
    """What a reader makes of `data`: each packet's fields, or its error message."""
    try:
        packets = reader(data)
    except EdgesynthError as err:
        return str(err)
    return [
        (p.offset, p.type, p.value) if hasattr(p, "type") else (p.offset, p.address, p.payload)
        for p in packets
    ]


def test_the_functional_models_own_reader_agrees_with_the_parser() -> None:
    """The functional model reads streams with its own decoder (executor/dwp.py, from the Gati
    document): on valid and malformed streams alike it finds the same packets or refuses with
    the same message as the tools' parser."""
    from edgesynth.targets.gati.executor import dwp as funcsim_dwp

    good = dwp.encode_stream(
        [
            dwp.MetaPacket(dwp.META_RESET),
            dwp.MetaPacket(dwp.META_INST_ORIGIN, 0x40),
            dwp.DwpPacket(0, bytes(range(64))),
            dwp.DwpPacket(0x40, b"\xff\xff\xff\xff"),
            dwp.MetaPacket(dwp.META_DISPATCH, dwp.DISPATCH_UART),
        ]
    )
    stream = _stream()
    cases = [good, stream, stream[:-4], stream[:26], stream[:18], stream[:12], bytes(16)]
    cases.append(struct.pack("<III", 0xFFFFFFFF, 4, 0x22) + bytes(4))
    cases.append(struct.pack("<III", 0xFFFFFFFF, 6, 0x20) + bytes(8))
    for offset, value in ((8, 9), (7, 1), (12, 2)):
        meta = bytearray(dwp.encode_meta(dwp.META_DISPATCH))
        meta[offset] = value
        cases.append(bytes(meta))
    results = [(_read(dwp.parse_stream, c), _read(funcsim_dwp.read_stream, c)) for c in cases]
    for k, (theirs, ours) in enumerate(results):
        assert ours == theirs, k
    assert sum(isinstance(r, str) for r, _ in results) == len(cases) - 2
