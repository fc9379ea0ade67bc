"""What a MAX78002 snoop unit decides from the data-memory writes it sees: a device fact, read by
the virtual device (which runs the units, vdevice/snoop.py) and by the planner (which places the
outputs a unit watches so that it decides what the YAML declares, placement/snoop.py). Two
units per quadrant, each watching the accelerator's data-memory writes and able to stop the run,
gate a layer's link to another layer, and count, sum and keep the largest of the words it
matches.

No public document describes these registers; the vendor's code generator only writes the raw
words a YAML gives (`snoop:`, 32 values) and its tests pair those words with the layer sequence
they expect (`simulated_sequence`, `snoop_sequence`) and with the accumulator values the unit
must hold afterwards. The fields below are what those 22 tests determine (source "INF" in
`vdevice/regmap`); docs/vdevice.md lists each field with the tests that fix it. C1 bits 24-28 (2 in
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

from dataclasses import field

import numpy as np

from edgesynth.lean_dataclass import dataclass

REGISTERS = ("A1", "A2", "D1", "D2", "X1", "X2", "C1", "C2", "ACC", "HIT", "MAX", "AM")
WORD_SPACE = 0x200000  # bit 21 of a snoop address: data memory
KNOWN_C1 = 0x3F | 0xFFF000 | 0xE0000000 | 0x1F000000  # bits the tests set (see above)
KNOWN_C2 = 0xFF | 0x200 | 0xF000


def compare(code: int, value: np.ndarray, low: int, high: int) -> np.ndarray:
    """A comparison code (bit 0 >= low, bit 1 == low, bit 2 <= high, bit 3 == high)."""
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

    @property
    def whole_words(self) -> bool:
        return bool(self.c1 >> 31 & 1)

    @property
    def lane(self) -> int:
        """The byte lane compared when not whole words."""
        return self.c1 >> 29 & 3

    @property
    def address_code(self) -> int:
        return self.c1 >> 12 & 0xF

    @property
    def data_code(self) -> int:
        return self.c1 >> 16 & 0xF

    @property
    def count_code(self) -> int:
        return self.c1 >> 20 & 0xF

    @property
    def watched_layer(self) -> int | None:
        """The one layer whose writes the unit watches (C2 bit 9), None: every layer."""
        return self.c2 & 0xFF if self.c2 >> 9 & 1 else None

    def address_window(self) -> tuple[int, int]:
        """The lowest and highest address the address comparison accepts."""
        code, r = self.address_code, self.regs
        low, high = 0, 0xFFFFFFFF
        if code & 1:
            low = max(low, r["A1"])
        if code & 2:
            low, high = max(low, r["A1"]), min(high, r["A1"])
        if code & 4:
            high = min(high, r["A2"])
        if code & 8:
            low, high = max(low, r["A2"]), min(high, r["A2"])
        return low, high

    def data_of(self, words: np.ndarray) -> np.ndarray:
        """What the data comparison sees of each word."""
        if self.whole_words:
            return words.astype(np.uint64)
        lane = self.lane
        return ((words >> np.uint32(8 * lane)) & np.uint32(0xFF)).astype(np.uint64)

    def observe(self, layer: int, address: np.ndarray, words: np.ndarray) -> None:
        """A layer's writes, in the order the hardware makes them (address, 32-bit word)."""
        if not self.enabled:
            return
        if self.watched_layer not in (None, layer):
            return
        r = self.regs
        address = address.astype(np.uint64)
        in_window = compare(self.address_code, address, r["A1"], r["A2"])
        data = self.data_of(words)
        match = in_window & compare(self.data_code, data, r["D1"], r["D2"])
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
        count_code = self.count_code
        if count_code:
            if in_window.any():
                count = np.array([int(hits.size)], dtype=np.uint64)
                if not compare(count_code, count, r["X1"], r["X2"])[0]:
                    self.triggered.add(layer)
        elif hits.size:
            self.triggered.add(layer)

    def unknown_bits(self) -> int:
        return (self.c1 & ~KNOWN_C1) | (self.c2 & ~KNOWN_C2) << 32


def units_from_words(words: list[int]) -> list[SnoopUnit]:
    """The enabled units a YAML's `snoop` words configure (unit 1's registers in the vendor's
    order, then unit 2's; every quadrant the network uses gets the same two)."""
    units = []
    for n in (1, 2):
        values = list(words[12 * (n - 1) : 12 * n]) + [0] * 12
        regs = dict(zip(REGISTERS, (int(v) for v in values), strict=False))
        if regs["C1"] & 1:
            units.append(SnoopUnit(0, n, regs))
    return units
