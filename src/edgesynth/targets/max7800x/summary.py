"""What `edgesynth compile -t all` shows of a planned MAX7800x program: the kernel memory its
weights take and the data memory its tensors take, against the chip's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.device import Device
    from edgesynth.targets.max7800x.placement import Placement
    from edgesynth.targets.max7800x.plan.plan import Plan

KERNEL_WORD_BYTES = 9  # one 72-bit kernel word: a 3x3 kernel of 8-bit weights


def kernel_memory(plan: Plan) -> tuple[int, int]:
    """(bytes of kernel memory the layers hold, bytes of kernel memory in the processors)."""
    from edgesynth.targets.max7800x.plan.kernels import FREE

    s = plan.settings
    used = int(np.count_nonzero(s.kernels.owner != FREE))
    words = sum(s.chip.mask_width(p) for p in range(s.chip.max_proc))
    return used * KERNEL_WORD_BYTES, words * KERNEL_WORD_BYTES


def data_memory_used(placement: Placement | None, device: Device) -> int | None:
    """Bytes of data memory the placed tensors cover (each instance's byte ranges, overlaps
    counted once); None where the description placed every layer (no placement chosen)."""
    if placement is None:
        return None
    from edgesynth.targets.max7800x.placement.report import tensors

    instances = device.processors // device.processors_sharing_memory
    marked = np.zeros((instances, device.instance_bytes), dtype=bool)
    for t in tensors(placement):
        for p in range(device.processors):
            if t.processors >> p & 1:
                marked[p // device.processors_sharing_memory, t.first_byte : t.end_byte] = True
    return int(marked.sum())
