"""An ordered list of register writes, as the generated code makes them."""

from __future__ import annotations

from dataclasses import field

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.regmap import RegisterMap


@dataclass(frozen=True)
class Write:
    """One register or memory write of the generated C."""

    address: int  # absolute
    value: int
    comment: str = ""
    verify: bool = True  # may be read back (--verify-writes); not for self-clearing registers


@dataclass(frozen=True)
class Wait:
    """Spin until (*address & mask) == value (a quadrant's register clear)."""

    address: int
    mask: int
    value: int
    comment: str = ""


@dataclass(frozen=True)
class Check:
    """Fail (return CNN_FAIL) unless (*address & mask) == value (a memory self-test result)."""

    address: int
    mask: int
    value: int
    comment: str = ""


@dataclass(frozen=True)
class Fill:
    """Clear `size` bytes from `address` with memset() (--init-tram)."""

    address: int
    size: int
    comment: str = ""


@dataclass(frozen=True)
class Note:
    """A comment line in the generated code (no write)."""

    text: str


@dataclass
class Writes:
    """Register writes in program order. Zero values are not written unless forced (the
    registers reset to zero), or unless every register is to be written (--write-zero-registers).
    """

    regs: RegisterMap
    write_zero: bool = False
    items: list[Write | Wait | Check | Fill | Note] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.items.append(Note(text))

    @property
    def writes(self) -> list[Write]:
        return [item for item in self.items if isinstance(item, Write)]

    def raw(
        self, address: int, value: int, comment: str = "", force: bool = False, verify: bool = True
    ) -> None:
        if value != 0 or force or self.write_zero:
            self.items.append(Write(address, value & 0xFFFFFFFF, comment, verify))

    def ctl(
        self,
        group: int,
        reg: int,
        value: int,
        comment: str = "",
        force: bool = False,
        verify: bool = True,
    ) -> None:
        self.raw(self.regs.apb_base + self.regs.ctl(group, reg), value, comment, force, verify)

    def lreg(
        self,
        group: int,
        layer: int,
        reg: str,
        value: int,
        comment: str = "",
        force: bool = False,
        verify: bool = True,
    ) -> None:
        address = self.regs.apb_base + self.regs.lreg(group, reg, layer)
        self.raw(address, value, comment, force, verify)

    def fifo(self, offset: int, value: int, comment: str = "", force: bool = False) -> None:
        self.raw(self.regs.apb_base + offset, value, comment, force)

    def wait(self, group: int, reg: int, mask: int, value: int, comment: str = "") -> None:
        self.items.append(
            Wait(self.regs.apb_base + self.regs.ctl(group, reg), mask, value, comment)
        )

    def check(self, group: int, reg: int, mask: int, value: int, comment: str = "") -> None:
        self.items.append(
            Check(self.regs.apb_base + self.regs.ctl(group, reg), mask, value, comment)
        )
