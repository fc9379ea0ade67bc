"""The known-answer check: the data-memory words the output layers must leave behind.

Every output layer (and the final one) writes HWC: four 8-bit channels per word (or one 32-bit
channel), one memory instance per four processors, the passes of a multi-pass output interleaved
per pixel. The check lists each expected word with a byte mask for words only partly written;
`sample_output` groups the words into runs of consecutive addresses with the same mask:
(address, mask, length, words...), 0-terminated. This is also the corpus's kat.npz.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer, ffs

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.plan.settings import PlanSettings

FULL = 0xFFFFFFFF


@dataclass
class KatBlock:
    """Known-answer words the generated C checks from one address, under a mask."""

    address: int
    mask: int
    words: np.ndarray  # uint32


@dataclass
class LayerWords:
    """The words a layer writes, in the vendor's order: the first processor of each word's
    memory instance, the word's offset in that instance (`out_offset` included), the bytes the
    layer writes in it (mask) and their value."""

    processor: np.ndarray
    word: np.ndarray
    mask: np.ndarray
    value: np.ndarray


def layer_words(
    output: np.ndarray,
    omap: int,
    out_offset: int,
    out_bits: int,
    out_expand: int,
    out_expand_thresh: int,
    write_gap: int,
    shared: int,
) -> LayerWords:
    """Where a layer's output lands in data memory: HWC, channel c of a pass on the c-th
    processor of `omap`, four 8-bit channels per word (or one 32-bit channel per word), the
    passes interleaved per pixel, `write_gap` words between written words."""
    out = np.asarray(output, dtype=np.int64)
    chans = out.shape[0]
    pixels = out[0].size
    flat = out.reshape(chans, pixels)
    start = ffs(omap) & ~(shared - 1)
    next_map = omap >> start
    out_size = out_bits // 8
    width = out_expand * out_size
    gap = write_gap + 1

    # Walk the channels once (the same for every pixel): which word holds which channels.
    groups: list[tuple[int, int, list[int]]] = []  # (proc, expand, channel per byte/word slot)
    c = 0
    poffs = start
    this_map = next_map
    while c < chans:
        if c % out_expand_thresh == 0:
            poffs, this_map = start, next_map
        expand = c // out_expand_thresh
        proc = poffs & ~(shared - 1)
        slots = []
        for _ in range(4):
            if this_map & 1:
                slots.append(c)
                c += 1
            else:
                slots.append(-1)
            this_map >>= 1
        groups.append((proc, expand, slots))
        poffs += 4

    parts: list[tuple[int, np.ndarray, int, np.ndarray]] = []  # (proc, word, mask, value)
    doffs = np.arange(pixels)
    for proc, expand, slots in groups:
        used = [i for i, ch in enumerate(slots) if ch >= 0]
        if not used:
            continue
        this_c = slots[used[0]]
        top = max(ch for ch in slots if ch >= 0) + 1
        num_bytes = min(top - this_c, chans - this_c)
        words = out_offset // 4 + (doffs * width + expand * out_size) * gap
        if out_size == 1:
            value = np.zeros(pixels, dtype=np.int64)
            for i, ch in enumerate(slots):
                if 0 <= ch < chans:
                    value |= (flat[ch] & 0xFF) << (8 * i)
            first = ffs(omap >> proc) % 4
            if num_bytes == 4:
                mask = FULL
            else:
                mask = ((1 << (8 * num_bytes)) - 1) << (first * 8)
            parts.append((proc, words, mask, value & mask))
        else:
            for i in range(min(num_bytes, out_size)):
                ch = slots[i]
                value = flat[ch] & FULL if 0 <= ch < chans else np.zeros(pixels, np.int64)
                parts.append((proc, words + i, FULL, value))  # one word per channel
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return LayerWords(empty, empty, empty, empty)
    return LayerWords(
        processor=np.concatenate([np.full(pixels, p, dtype=np.int64) for p, _, _, _ in parts]),
        word=np.concatenate([w for _, w, _, _ in parts]),
        mask=np.concatenate([np.full(pixels, m, dtype=np.int64) for _, _, m, _ in parts]),
        value=np.concatenate([v for _, _, _, v in parts]),
    )


def expected_words(h: HwLayer, s: PlanSettings, output: np.ndarray) -> list[tuple[int, int, int]]:
    """(mask, address, value) of every word layer `h` writes, in the vendor's order."""
    chip = s.chip
    regs = chip.regs
    written = layer_words(
        output,
        h.output_processor_map,
        h.out_offset,
        h.output_width,
        h.out_expand,
        h.out_expand_thresh,
        h.write_gap,
        chip.shared,
    )
    proc = written.processor
    instance = (proc % chip.per_group) * regs.instance_size | (
        proc // chip.per_group
    ) * regs.group_stride // 4
    addrs = regs.apb_base + regs.sram_base + (instance + written.word) * 4
    return list(zip(written.mask.tolist(), addrs.tolist(), written.value.tolist(), strict=True))


def kat_blocks(entries: list[tuple[int, int, int]], max_count: int | None) -> list[KatBlock]:
    """Sort by mask, then address; group runs of consecutive words with the same mask."""
    data = sorted(entries)
    blocks: list[KatBlock] = []
    current: list[int] = []
    mask = addr = next_addr = None
    for total, (m, a, v) in enumerate(data, start=1):
        if m != mask or a != next_addr:
            if current:
                blocks.append(KatBlock(addr, mask, np.asarray(current, dtype=np.uint32)))
            current, mask, addr, next_addr = [], m, a, a
        current.append(v)
        next_addr += 4
        if max_count is not None and total > max_count:
            break
    if current:
        blocks.append(KatBlock(addr, mask, np.asarray(current, dtype=np.uint32)))
    return blocks


def sample_output_array(blocks: list[KatBlock]) -> np.ndarray:
    parts: list[np.ndarray] = []
    for b in blocks:
        parts.append(np.array([b.address, b.mask, b.words.size], dtype=np.uint32))
        parts.append(b.words)
    parts.append(np.zeros(1, dtype=np.uint32))
    return np.concatenate(parts)
