"""The script image (`script.bin`) as data: what the encoder writes and the decoder reads.

File layout (edgesynth; little-endian):
- header, 24 bytes: magic `XDNNSCR1`, u32 format version (1), u32 DSP pixels of the engine,
  u32 IMEM bytes, u32 number of CSR writes;
- the CSR writes, 8 bytes each: u32 register address, u32 value. First the InitOnce writes
  (DDR bases, interrupt mask, interrupt status and completion vectors cleared), then for each
  command its CNN_COMMAND write, its registers (`regmap.COMMAND_REGISTERS`) and the Script
  Memory Push that ends it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAGIC = b"XDNNSCR1"
VERSION = 1
HEADER_BYTES = 24
RECORD_BYTES = 8


@dataclass
class ScriptCommand:
    op: str  # XNConv | XNMaxPool | XNAvgPool | XNEltwise | XNGather | XNUpload
    fields: dict[str, int]  # every field of every register the command writes, by name
    offset: int = 0  # byte offset of its CNN_COMMAND write in the file (decoded files)


@dataclass
class Script:
    dsp_pixels: int
    imem_bytes: int
    init: list[tuple[str, int]]  # (register name, value) in write order
    commands: list[ScriptCommand] = field(default_factory=list)
