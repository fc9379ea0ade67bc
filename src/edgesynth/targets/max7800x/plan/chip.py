"""The accelerator as the planner sees it: device facts, address map and processor geometry.

`--max-proc N` shrinks the processor array the vendor tool plans for (N processors, at most 16
per quadrant); everything else comes from the device description and the register map.
"""

from __future__ import annotations

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.regmap import REGISTER_MAPS, RegisterMap


@dataclass(frozen=True)
class Chip:
    """The device as the planner sees it: its facts, register map and the processors it may use."""

    device: Device
    regs: RegisterMap
    max_proc: int  # processors the plan may use
    per_group: int  # processors per quadrant
    groups: int  # quadrants
    shared: int = 4  # processors sharing one data memory instance

    @classmethod
    def of(cls, device: Device, max_proc: int | None = None) -> Chip:
        total = max_proc or device.processors
        per_group = min(total, device.processors_per_group)
        return cls(
            device=device,
            regs=REGISTER_MAPS[device.name],
            max_proc=total,
            per_group=per_group,
            groups=-(-total // per_group),
        )

    @property
    def max_channels(self) -> int:
        return 16 * self.max_proc

    def mask_large(self, processor: int) -> bool:
        """The first processor of each quadrant has the larger kernel memory (MAX78002)."""
        return processor % self.per_group == 0

    def mask_width(self, processor: int) -> int:
        """Kernel words (9 bytes each) in `processor`'s kernel memory."""
        r = self.regs
        return r.mask_width_large if self.mask_large(processor) else r.mask_width_small

    def group_mask(self, group: int) -> int:
        """The processor-map bits of one quadrant."""
        return ((1 << self.per_group) - 1) << (group * self.per_group)

    def group_bits(self, processor_map: int, group: int) -> int:
        return (processor_map >> (group * self.per_group)) & ((1 << self.per_group) - 1)
