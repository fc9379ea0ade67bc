"""Bias memory: which quadrant holds each layer's bias values, at which offset, and the bytes.

Each quadrant has one bias memory (512 bytes on the MAX78000, 2048 on the MAX78002). A regular
convolution reads all its bias values from one quadrant; the vendor places layers like
first-fit-decreasing bin packing (flattened layers first on the MAX78000, then layers restricted
to one quadrant, then by size) into the least-used allowed quadrant. Depthwise layers (and the
first layer with --fast-fifo-quad) need their values in every quadrant they use, one byte per
processor, and are placed first, in layer order.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer, ffs, fls, popcount

_UNSET = -(2**62)


@dataclass
class BiasMemory:
    """Bias bytes per quadrant and each layer's place."""

    values: list[np.ndarray]  # per quadrant: the used bytes (uint8)
    offsets: dict[int, list[int | None]] = field(default_factory=dict)  # layer -> per quadrant
    group: dict[int, int | str | None] = field(default_factory=dict)  # quadrant, "all" or None
    used: list[int] = field(default_factory=list)  # bytes used per quadrant


def _has_bias(h: HwLayer) -> bool:
    return h.bias is not None and bool(np.any(h.bias != 0))


def plan_bias(
    hw: list[HwLayer], chip: Chip, groups_used: list[int], fast_fifo_quad: bool
) -> BiasMemory:
    size = chip.regs.bias_size
    groups = chip.groups
    values = np.full((groups, size), _UNSET, dtype=np.int64)
    top = [0] * groups
    offsets: dict[int, list[int | None]] = {h.index: [None] * groups for h in hw}
    where: dict[int, int | str | None] = {h.index: None for h in hw}
    start = hw[0].index if hw else 0

    def overflow(h: HwLayer, group: int) -> EdgesynthError:
        return EdgesynthError(
            f"bias memory of quadrant {group} exhausted ({size} bytes, {top[group]} used so "
            "far); use fewer output channels with bias, or spread the layers over quadrants "
            "with `bias_quadrant`.",
            layer=h.index,
            layer_name=h.layer.spec.name,
        )

    def add_byte(h: HwLayer, group: int, value: int | None) -> None:
        if top[group] >= size:
            raise overflow(h, group)
        if value is not None and value != _UNSET:
            values[group, top[group]] = value & 0xFF
        top[group] += 1

    packing: list[tuple[HwLayer, list[int], int]] = []
    for h in hw:
        if h.bias is None or h.bias_source != h.index:
            continue
        if len(h.bias) != h.output_chan:
            raise EdgesynthError(
                f"the layer has {h.output_chan} output channels but {len(h.bias)} bias values.",
                layer=h.index,
                layer_name=h.layer.spec.name,
            )
        if not _has_bias(h):
            continue
        quad = fast_fifo_quad and h.index == start
        if h.groups == 1 and not quad:
            length = h.output_chan + ffs(h.output_processor_map) % chip.shared * h.out_expand
            if h.index == 0 and h.streaming and not chip.device.supports_stream_bias:
                length += 1  # the vendor's work-around for a streaming first layer (MAX78000)
            allowed = _allowed_groups(h, groups_used)
            packing.append((h, allowed, length))
            continue

        # Depthwise (and the quad-FIFO first layer): values in every quadrant used.
        where[h.index] = "all"
        used_groups = 0
        for g in range(groups):
            if chip.group_bits(h.processor_map, g):
                if h.broadcast:
                    top[g] = (top[g] + 3) & ~3
                offsets[h.index][g] = top[g]
                used_groups += 1
        if h.groups == 1:  # --fast-fifo-quad: channel i in quadrant i % 4
            for i, b in enumerate(h.bias):
                add_byte(h, i % 4, int(b))
            continue
        last_group = _depthwise_bytes(h, chip, used_groups, add_byte)
        while top[last_group] > 0 and values[last_group, top[last_group] - 1] == _UNSET:
            top[last_group] -= 1

    def order(item: tuple[HwLayer, list[int], int]) -> int:
        h, allowed, length = item
        if not chip.device.supports_stream_bias and h.flatten:  # MAX78000: flatten first
            return -1
        if len(allowed) == 1:
            return 0
        return size - length

    for h, allowed, length in sorted(packing, key=order):
        if h.calcx4:
            group = allowed[int(np.argmin([(top[t] + 3) & ~3 for t in allowed]))]
            top[group] = (top[group] + 3) & ~3
        else:
            group = allowed[int(np.argmin([top[t] for t in allowed]))]
        if top[group] + length > size:
            raise EdgesynthError(
                f"bias memory exhausted: the layer needs {length} bytes, the best of its "
                f"quadrants {allowed} (quadrant {group}) has {size - top[group]} of {size} "
                "left. Use fewer output channels with bias or assign `bias_quadrant`s.",
                layer=h.index,
                layer_name=h.layer.spec.name,
            )
        where[h.index] = group
        offsets[h.index] = [top[group]] * groups
        top[group] += length

    for h, _, _ in packing:
        group = where[h.index]
        assert isinstance(group, int)
        base = offsets[h.index][group]
        assert base is not None
        target = ffs(h.output_processor_map) % chip.shared * h.out_expand
        if h.index == 0 and h.streaming and not chip.device.supports_stream_bias:
            values[group, base] = 0
            target += 1
        values[group, base + target : base + target + h.output_chan] = h.bias & 0xFF

    for h in hw:  # layers sharing identical bias values
        if h.bias_source != h.index:
            offsets[h.index] = list(offsets.get(h.bias_source, [None] * groups))
            where[h.index] = where.get(h.bias_source)

    out = []
    for g in range(groups):
        used = values[g, : top[g]]
        out.append(np.where(used == _UNSET, 0, used).astype(np.uint8))
    return BiasMemory(values=out, offsets=offsets, group=where, used=top)


def _allowed_groups(h: HwLayer, groups_used: list[int]) -> list[int]:
    configured = h.layer.bias_group
    if configured is None or isinstance(configured, str):
        return list(groups_used)
    if isinstance(configured, int):
        return [configured]
    return list(configured)


def _depthwise_bytes(h: HwLayer, chip: Chip, used_groups: int, add_byte) -> int:
    """One bias byte per processor (and output pass) in each quadrant the layer uses."""
    per_group = chip.per_group
    full = (1 << per_group) - 1
    map_used = h.processor_map
    if not h.broadcast:  # the first gap moves to the end of the first quadrant
        start = ffs(map_used)
        first_group = start // per_group
        map_used &= ~(full << first_group * per_group)
        map_used |= (h.processor_map & (full << first_group * per_group)) >> start % per_group
    start_proc = ffs(map_used)
    last_proc = fls(map_used)
    if h.broadcast:
        last_proc = ((last_proc + 16) & ~0x0F) - 1
    if h.broadcast or used_groups > 1:
        start_proc &= ~full
    padded = np.asarray(h.bias, dtype=np.int64)
    leftover = h.out_expand * h.out_expand_thresh - len(padded)
    if leftover:
        padded = np.append(padded, np.full(leftover, _UNSET))
    padded = padded.reshape(h.out_expand, -1)
    if padded.shape[1] != popcount(h.processor_map):
        raise EdgesynthError(
            "a depthwise layer needs one processor per channel and pass.",
            layer=h.index,
            layer_name=h.layer.spec.name,
        )
    for proc in range(start_proc, last_proc + 1):
        if not map_used >> proc & 1:
            padded = np.insert(padded, proc, np.full(h.out_expand, _UNSET), axis=1)
    group = 0
    for expand in range(h.out_expand):
        for p in range(start_proc, last_proc + 1):
            group = p // per_group
            src = (p & ~0x0F) + (p % 4) * 4 + (p % 16) // 4 if h.broadcast else p
            k = src - start_proc
            value = int(padded[expand, k]) if k < padded.shape[1] else None
            add_byte(h, group, value)
    return group
