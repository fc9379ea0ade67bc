"""Pretty-print an instruction blob or a DWP stream, instruction by instruction."""

from __future__ import annotations

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati import device, dwp, isa

FORMATS = ("auto", "blob", "dwp")


def detect(data: bytes) -> str:
    """A DWP stream starts with a SOP word; a blob never does (START's top nibble is zero)."""
    return "dwp" if data[:4] == b"\xff\xff\xff\xff" else "blob"


def describe_blob(blob: bytes, base_offset: int = 0, address: int | None = None) -> list[str]:
    lines = []
    for k, inst in enumerate(isa.decode_blob(blob, base_offset)):
        where = f"@{base_offset + k * isa.INST_BYTES:#08x}"
        if address is not None:
            where += f" (DRAM {address + k * isa.INST_BYTES:#010x})"
        lines.append(
            isa.format_table(inst, f"#{k} {where} {inst.name} (opcode {inst.fmt.opcode:#x})")
        )
    return lines


def describe_stream(data: bytes) -> list[str]:
    packets = dwp.parse_stream(data)
    lines = []
    origin = device.INST_ORIGIN
    for p in packets:
        if isinstance(p, dwp.MetaPacket) and p.type == dwp.META_INST_ORIGIN:
            origin = p.value
    blob_packet = None
    for p in packets:
        if isinstance(p, dwp.MetaPacket):
            lines.append(f"@{p.offset:#08x} META {p.type_name:<12} value={p.value:#x} ({p.value})")
        else:
            kind = ""
            if p.address == origin and blob_packet is None:
                blob_packet, kind = p, " (instructions)"
            lines.append(f"@{p.offset:#08x} DWP  address={p.address:#010x} size={p.size}{kind}")
    if blob_packet is not None:
        lines.append("")
        lines += describe_blob(blob_packet.payload, blob_packet.payload_offset, blob_packet.address)
    return lines


def describe(data: bytes, fmt: str = "auto") -> str:
    if fmt not in FORMATS:
        raise EdgesynthError(f"unknown format `{fmt}` (one of {', '.join(FORMATS)})")
    if not data:
        raise EdgesynthError("the file is empty")
    kind = detect(data) if fmt == "auto" else fmt
    lines = describe_stream(data) if kind == "dwp" else describe_blob(data)
    return "\n".join(lines)
