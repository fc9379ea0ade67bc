"""The MAX78002's snoop units on the virtual device: every enabled unit of a run, configured from
the firmware's register writes, shown each layer's writes in the hardware's order. What a unit
decides is `snoop_unit` (a device fact the planner reads too).
"""

from __future__ import annotations

import numpy as np

from edgesynth.targets.max7800x.snoop_unit import REGISTERS, WORD_SPACE, SnoopUnit
from edgesynth.targets.max7800x.vdevice.record import Record


class SnoopUnits(Record):
    """Every configured unit of a run; empty when the firmware enables none."""

    units: list[SnoopUnit]

    def __bool__(self) -> bool:
        return any(u.enabled for u in self.units)

    def observe(self, layer: int, instance: np.ndarray, word: np.ndarray, data: np.ndarray) -> None:
        address = WORD_SPACE | instance.astype(np.int64) << 15 | word.astype(np.int64)
        for unit in self.units:
            unit.observe(layer, address, data)

    def stop_after(self, layer: int) -> bool:
        return any(u.enabled and u.stops and layer in u.triggered for u in self.units)

    def gates_links(self) -> bool:
        return any(u.enabled and u.gates_links for u in self.units)

    def link_taken(self, layer: int) -> bool:
        return any(u.enabled and u.gates_links and layer in u.triggered for u in self.units)

    def lines(self) -> list[str]:
        """Each enabled unit: where it triggered and its accumulators after the run."""
        out = []
        for u in self.units:
            if not u.enabled:
                continue
            r = u.regs
            when = ", ".join(str(layer) for layer in sorted(u.triggered)) or "no layer"
            out.append(
                f"snoop unit {u.unit} of quadrant {u.group}: triggered in {when}; ACC "
                f"0x{r['ACC']:08x} HIT {r['HIT']} MAX 0x{r['MAX']:08x} AM 0x{r['AM']:06x}"
            )
        return out

    def notes(self) -> list[str]:
        odd = [u for u in self.units if u.enabled and u.unknown_bits()]
        if not odd:
            return []
        u = odd[0]
        return [
            f"snoop unit {u.unit} of quadrant {u.group} sets control bits the model does not "
            f"know (C1 0x{u.c1:08x}, C2 0x{u.c2:08x}); only the fields the vendor's snoop tests "
            "determine are modelled"
        ]


def read_units(global_regs: dict[tuple[int, int], int], offsets: dict[str, int]) -> SnoopUnits:
    """The enabled units as the firmware configured them: `offsets` maps SNP{n}_{name} to its
    offset in the quadrant's global registers (empty on a device without units); unwritten
    registers read 0."""
    if not offsets:  # a device without snoop units
        return SnoopUnits([])
    groups = sorted({g for g, _ in global_regs})
    units = []
    for g in groups:
        for n in (1, 2):
            regs = {
                name: int(global_regs.get((g, offsets[f"SNP{n}_{name}"]), 0)) for name in REGISTERS
            }
            if regs["C1"] & 1:
                units.append(SnoopUnit(g, n, regs))
    return SnoopUnits(units)


def write_order(instance: np.ndarray, word: np.ndarray, pixels: int) -> tuple[np.ndarray, ...]:
    """The distinct words a layer wrote, in the hardware's order: pixel by pixel, each
    pixel's instances in turn. `instance`/`word` are (channels x pixels) flattened."""
    q = instance.reshape(-1, pixels).T.ravel()
    w = word.reshape(-1, pixels).T.ravel()
    key = q.astype(np.int64) << 32 | w.astype(np.int64)
    _, first = np.unique(key, return_index=True)
    first.sort()
    return q[first], w[first]
