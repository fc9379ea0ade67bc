"""The kernel memory image as the generated cnn_load_weights() writes it.

The loader walks a table of blocks: each block is a run of consecutive used kernel words of one
processor, given as (address, word count, words). In "mexpress" mode (the default) the 9 bytes
of each kernel word are packed back to back, four to a 32-bit word, and the block's address is
the kernel word index times 4: a byte write to that address (+1) sets the hardware's address
counter, and the words follow. Without mexpress each kernel word takes four 32-bit writes.
"""

from __future__ import annotations

import numpy as np

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.plan.kernels import FREE, KernelMemory, calcx4_columns


@dataclass
class KernelBlock:
    """Kernel-memory words the generated C writes from one address."""

    address: int  # absolute; mexpress: the encoded start address
    words: np.ndarray  # uint32 data words

    @property
    def length(self) -> int:
        return int(self.words.size)


def kernel_blocks(
    memory: KernelMemory, chip: Chip, mexpress: bool, zero_sram: bool
) -> list[KernelBlock]:
    regs = chip.regs
    blocks: list[KernelBlock] = []
    for p in range(chip.max_proc):
        cols = np.flatnonzero(memory.owner[p] != FREE)
        if cols.size == 0:
            continue
        data = memory.data[p, cols]
        if zero_sram:  # memories were cleared by the self-test: skip all-zero kernels
            keep = data.any(axis=1)
            cols, data = cols[keep], data[keep]
            if cols.size == 0:
                continue
        phys = cols.copy()
        owners = memory.owner[p, cols]
        for layer, (start, count) in memory.calcx4.items():
            sel = owners == layer
            if sel.any():
                phys[sel] = calcx4_columns(cols[sel], start, count, chip)
        order = np.argsort(phys, kind="stable")
        phys, data = phys[order], data[order]
        breaks = np.flatnonzero(np.diff(phys) != 1) + 1
        base = regs.apb_base + regs.kernel(p, chip.per_group)
        for run, block in zip(np.split(phys, breaks), np.split(data, breaks), strict=True):
            address = base + int(run[0]) * 16
            if mexpress:
                stride = regs.mask_stride
                encoded = address & ~(stride - 1) & 0xFFFFFFFF | (address & (stride - 1)) >> 2
                flat = block.reshape(-1)
                padded = np.zeros(-(-flat.size // 4) * 4, dtype=np.uint8)
                padded[: flat.size] = flat
                words = padded.view(">u4").astype(np.uint32)
                blocks.append(KernelBlock(encoded, words))
            else:
                b = block.astype(np.uint32)
                words = np.zeros((b.shape[0], 4), dtype=np.uint32)
                words[:, 0] = b[:, 0]
                words[:, 1] = b[:, 1] << 24 | b[:, 2] << 16 | b[:, 3] << 8 | b[:, 4]
                words[:, 2] = b[:, 5] << 24 | b[:, 6] << 16 | b[:, 7] << 8 | b[:, 8]
                blocks.append(KernelBlock(address, words.reshape(-1)))
    return blocks
