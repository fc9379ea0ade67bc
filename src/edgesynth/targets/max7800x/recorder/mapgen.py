"""The recorder's C header, written from the register map (`regmap.py`) and the trace format
(`vdevice/trace.py`): which address ranges are the accelerator's, which writes complete a
status the generated code waits on, and the phase markers.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgesynth.targets.max7800x import regmap as rm
from edgesynth.targets.max7800x.vdevice.trace import MARKER_BASE, PHASES

PAGE = 4096
GROUPS = 4  # quadrants of every device
# The APB peripheral space the MSDK stand-in (templates/msdk/mxc.h.j2) addresses; writable
# memory for the recorder, except the page of the fast FIFO, whose writes are recorded.
PERIPHERAL_BASE = 0x40000000
PERIPHERAL_SIZE = 0x00100000


@dataclass(frozen=True)
class StatusRule:
    """A write of `request` bits to `address` completes at once: `done` bits are set."""

    address: int
    request: int
    done: int
    what: str


def accelerator_window() -> tuple[int, int]:
    """[start, end) covering every register and memory of every device, page aligned."""
    start = min(m.apb_base for m in rm.REGISTER_MAPS.values())
    end = max(m.apb_base + m.sram_base + GROUPS * m.group_stride for m in rm.REGISTER_MAPS.values())
    return start, -(-end // PAGE) * PAGE


def status_rules(device: str) -> list[StatusRule]:
    """Register clears (MAX78002) and memory self-tests: the waits of cnn_init()."""
    rules = []
    m = rm.REGISTER_MAPS[device]
    for g in range(GROUPS):
        address = m.apb_base + m.ctl(g, rm.REG_SRAM_TEST)
        if m.bist_zero is not None and m.bist_zero_wait is not None:
            rules.append(StatusRule(address, m.bist_zero, m.bist_zero_wait, "clear"))
        for name, (start, done, _error) in m.bist.items():
            rules.append(StatusRule(address, start, done, f"{name} self-test"))
    return rules


def header(device: str, core_clock: int) -> str:
    """recorder_map.h for a project of `device`."""
    start, end = accelerator_window()
    fifo_page = rm.FAST_FIFO_BASE_ADDRESS & ~(PAGE - 1)
    lines = [
        "/* Written by edgesynth (recorder/mapgen.py) from regmap.py and vdevice/trace.py. */",
        "#ifndef RECORDER_MAP_H",
        "#define RECORDER_MAP_H",
        "#include <stdint.h>",
        f"#define REC_PAGE {PAGE}UL",
        f"#define REC_CORE_CLOCK {core_clock}UL",
        f"#define REC_PERIPHERAL_BASE 0x{PERIPHERAL_BASE:08x}UL",
        f"#define REC_PERIPHERAL_SIZE 0x{PERIPHERAL_SIZE:08x}UL",
        "/* address ranges whose writes are recorded: [start, end) */",
        "static const uintptr_t rec_windows[][2] = {",
        f"  {{0x{start:08x}UL, 0x{end:08x}UL}}, /* the accelerator, both devices */",
        f"  {{0x{fifo_page:08x}UL, 0x{fifo_page + PAGE:08x}UL}}, /* the fast FIFO */",
        "};",
        "/* writes that complete at once: address, request bits, done bits */",
        "static const uint32_t rec_status[][3] = {",
    ]
    for r in status_rules(device):
        lines.append(
            f"  {{0x{r.address:08x}u, 0x{r.request:08x}u, 0x{r.done:08x}u}}, /* {r.what} */"
        )
    lines += ["};", "/* phase markers, in the order the recorder calls the project's functions */"]
    for i, name in enumerate(PHASES):
        lines.append(f"#define REC_MARK_{name.upper()} 0x{MARKER_BASE + i:08x}u")
    lines += ["#endif", ""]
    return "\n".join(lines)
