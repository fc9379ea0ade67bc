"""The MAX78002's snoop units: two per quadrant, each watching the accelerator's data-memory
writes and able to stop the run, gate a layer's link to another layer, and count, sum and keep
the largest of the words it matches.

No public document describes these registers; the vendor's code generator only writes the raw
words a YAML gives (`snoop:`, 32 values) and its tests pair those words with the layer sequence
they expect (`simulated_sequence`, `snoop_sequence`) and with the accumulator values the unit
must hold afterwards. The fields below are what those 22 tests determine (source "INF" in
`regmap`); docs/vdevice.md lists each field with the tests that fix it. C1 bits 24-28 (2 in
every test, 10 in the vendor's `--snoop-loop`) and C2 bits 12-15 (3 or 4) change nothing the
tests can see and are not modelled; a run that sets bits no test sets says so.

- A1/A2 compare the word address of each write: 0x200000 | instance << 15 | word (instance =
  4-processor data-memory instance 0-15, word within it); D1/D2 the data written; X1/X2 the
  number of matching writes of a layer.
- C1: bit 0 enable; bit 1 stop the run after a layer in which the unit triggered; bit 2 a
  layer's link (NXTLYR) is taken only when the unit triggered during that layer; bit 3 add each
  matching data to ACC; bit 4 count matches in HIT; bit 5 keep the largest matching data in MAX
  and its address in AM; bits 12-15, 16-19, 20-23 the address, data and count comparisons (per
  code: bit 0 >= R1, bit 1 == R1, bit 2 <= R2, bit 3 == R2, all that are set must hold; 0: no
  condition); bit 31 compare whole words, else the byte lane in bits 29-30.
- A unit triggers in a layer when a write matches address and data; with a count comparison,
  instead, when a layer that wrote inside the address window ends with a number of matching
  writes the comparison rejects (test-snoop-xval runs on, test-snoop-noxval stops).
- C2: bits 0-7 a layer number, bit 9 watch only that layer's writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgesynth.targets.max7800x.vdevice.regmap import SNOOP_NAMES

WORD_SPACE = 0x200000  # bit 21 of a snoop address: data memory
KNOWN_C1 = 0x3F | 0xFFF000 | 0xE0000000 | 0x1F000000  # bits the tests set (see above)
KNOWN_C2 = 0xFF | 0x200 | 0xF000


def _compare(code: int, value: np.ndarray, low: int, high: int) -> np.ndarray:
    ok = np.ones(value.shape, dtype=bool)
    if code & 1:
        ok &= value >= low
    if code & 2:
        ok &= value == low
    if code & 4:
        ok &= value <= high
    if code & 8:
        ok &= value == high
    return ok


@dataclass
class SnoopUnit:
    """One unit's registers (by name: A1 A2 D1 D2 X1 X2 C1 C2 ACC HIT MAX AM)."""

    group: int
    unit: int  # 1 or 2
    regs: dict[str, int]
    triggered: set[int] = field(default_factory=set)  # layers in which the unit triggered

    @property
    def c1(self) -> int:
        return self.regs["C1"]

    @property
    def c2(self) -> int:
        return self.regs["C2"]

    @property
    def enabled(self) -> bool:
        return bool(self.c1 & 1)

    @property
    def stops(self) -> bool:
        return bool(self.c1 >> 1 & 1)

    @property
    def gates_links(self) -> bool:
        return bool(self.c1 >> 2 & 1)

    def _data(self, words: np.ndarray) -> np.ndarray:
        if self.c1 >> 31 & 1:
            return words.astype(np.uint64)
        lane = self.c1 >> 29 & 3
        return ((words >> np.uint32(8 * lane)) & np.uint32(0xFF)).astype(np.uint64)

    def observe(self, layer: int, address: np.ndarray, words: np.ndarray) -> None:
        """A layer's writes, in the order the hardware makes them (address, 32-bit word)."""
        if not self.enabled:
            return
        if self.c2 >> 9 & 1 and (self.c2 & 0xFF) != layer:
            return
        r = self.regs
        address = address.astype(np.uint64)
        in_window = _compare(self.c1 >> 12 & 0xF, address, r["A1"], r["A2"])
        data = self._data(words)
        match = in_window & _compare(self.c1 >> 16 & 0xF, data, r["D1"], r["D2"])
        hits = data[match]
        if self.c1 >> 3 & 1:
            r["ACC"] = int((r["ACC"] + int(hits.sum())) & 0xFFFFFFFF)
        if self.c1 >> 4 & 1:
            r["HIT"] = (r["HIT"] + int(hits.size)) & 0xFFFFFFFF
        if self.c1 >> 5 & 1 and hits.size:
            best = int(np.argmax(hits))  # the first of equal largest values
            if int(hits[best]) > r["MAX"]:
                r["MAX"] = int(hits[best])
                r["AM"] = int(address[match][best])
        count_code = self.c1 >> 20 & 0xF
        if count_code:
            if in_window.any():
                count = np.array([int(hits.size)], dtype=np.uint64)
                if not _compare(count_code, count, r["X1"], r["X2"])[0]:
                    self.triggered.add(layer)
        elif hits.size:
            self.triggered.add(layer)

    def unknown_bits(self) -> int:
        return (self.c1 & ~KNOWN_C1) | (self.c2 & ~KNOWN_C2) << 32


@dataclass
class SnoopUnits:
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
                name: int(global_regs.get((g, offsets[f"SNP{n}_{name}"]), 0))
                for name in SNOOP_NAMES
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
