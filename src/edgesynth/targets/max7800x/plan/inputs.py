"""The sample input as the generated load_input() delivers it.

Without FIFOs the input is copied into data memory: HWC packs up to four channels (one memory
instance's processors) into each 32-bit word, pixel by pixel, with the passes of a multi-pass
input interleaved; CHW gives each channel its own memory instance, four pixels per word. With
FIFOs, each FIFO (one per quadrant) receives words in the same packing, written in turn.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x import regmap as rm
from edgesynth.targets.max7800x.compat.fifo_input import quadrant_packed_lanes
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer, popcount

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.plan.settings import PlanSettings


@dataclass
class InputBlock:
    """One block of the sample input the generated C writes: its address and words."""

    address: int  # absolute
    words: np.ndarray  # uint32
    label: int  # the vendor's SAMPLE_INPUT_<label>
    comments: list[str] = field(default_factory=list)


@dataclass
class InputPlan:
    """How the sample input reaches the accelerator: memory copies or FIFO streams."""

    blocks: list[InputBlock]  # memory copies, or the FIFOs' streams (label = FIFO number)
    fifo: bool = False
    fast_fifo: bool = False
    fifo_addresses: list[int] = field(default_factory=list)  # data register per stream
    status_address: int = 0
    status_masks: list[int] = field(default_factory=list)
    synthesize: int | None = None  # --synthesize-input increment
    synthesize_words: int = 0
    synthesize_mask: int | None = None
    chw: bool = False


def _bytes(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.int64) & 0xFF


def _pack4(b: np.ndarray) -> np.ndarray:
    """Little-endian words from bytes along the last axis (length 4)."""
    return (b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16 | b[..., 3] << 24).astype(np.uint32)


def plan_input(s: PlanSettings, sample: np.ndarray) -> InputPlan:
    h = s.by_index[s.first]
    chans, rows, cols = h.input_chan, h.input_dim[0], h.input_dim[1]
    data = np.asarray(sample, dtype=np.int64)
    if data.ndim < 3:
        data = data.reshape(data.shape[0], -1, 1)
    if data.shape[1] * data.shape[2] == rows * cols:
        data = data.reshape(data.shape[0], rows, cols)
    else:  # the first layer reads another buffer (`in_sequences`): load the sample as it is
        rows, cols = data.shape[1], data.shape[2]
    wanted = chans * h.operands
    if s.opts.build.reshape_inputs and data.shape[0] > wanted:
        # --reshape-inputs: the layer sees the channels after `in_channel_skip`; load those
        # (the vendor tool refuses to write a project here).
        skip = h.layer.spec.in_channel_skip or 0
        data = data[skip : skip + wanted]
    if s.opts.rules.fifo:
        return _fifo_input(s, h, data, chans, rows, cols)
    return _memory_input(s, h, data, chans, rows, cols)


def _memory_input(s, h, data, chans, rows, cols) -> InputPlan:
    chip = s.chip
    regs = chip.regs
    operands = h.operands
    pmap = s.processor_map_0
    reads_input = h.layer.in_sequences in (None, []) or -1 in h.layer.in_sequences
    if reads_input and operands != data.shape[0] // chans:
        raise EdgesynthError(
            f"the sample has {data.shape[0]} channels for {operands} operand(s), but the first "
            f"layer takes {chans} channels.",
            layer=h.index,
            layer_name=h.layer.spec.name,
        )
    blocks: list[InputBlock] = []
    pixels = rows * cols
    step = 1 if h.big_data else 4
    c = 0
    pending: dict[int, list[tuple[np.ndarray, int, int, int]]] = {}
    for ch in range(0, chip.max_channels, step):
        instance_map = (pmap >> (ch % chip.max_proc)) % (1 << step)
        if not instance_map:
            continue
        num_ch = popcount(instance_map)
        group = (ch % chip.max_proc) // chip.per_group
        expand = c // h.in_expand_thresh
        instance = (ch % chip.per_group) // chip.shared
        offs = regs.sram_base + regs.group_stride * group + regs.instance_size * 16 * instance
        offs += expand * 4 * operands
        if expand == 0:
            offs += h.in_offset
        if h.big_data:
            if h.in_expand > 1:
                raise EdgesynthError(
                    "a CHW input with more than one pass cannot be loaded by memcpy "
                    "(the vendor's --compact-data does not support it either).",
                    layer=h.index,
                    layer_name=h.layer.spec.name,
                )
            flat = _bytes(data[c].reshape(-1))
            padded = np.zeros(-(-pixels // 4) * 4, dtype=np.int64)
            padded[: flat.size] = flat
            words = _pack4(padded.reshape(-1, 4))
            blocks.append(
                InputBlock(regs.apb_base + offs, words, ch, [f"CHW {rows}x{cols}, channel {c}"])
            )
            c += 1
        else:
            # Up to four channels of each pixel (and operand) in one word.
            lanes = np.zeros((operands, rows, cols, 4), dtype=np.int64)
            this_c = c
            for i in range(4):
                if instance_map & 1 << i:
                    if this_c < data.shape[0] // operands:
                        for op in range(operands):
                            lanes[op, :, :, i] = _bytes(data[this_c + op * chans])
                    this_c += 1
            words = _pack4(lanes.transpose(1, 2, 0, 3).reshape(-1, 4))  # pixel-major, operand
            proc = ch % chip.max_proc
            pending.setdefault(proc, []).append((words, offs, c, c + num_ch - 1))
            if expand == h.in_expand - 1:
                parts = pending[proc]
                merged = np.zeros((expand + 1) * operands * pixels, dtype=np.uint32)
                j = np.arange(operands * pixels)
                for i, (w, _, _, _) in enumerate(parts):
                    target = i * operands + (j // operands) * h.in_expand * operands + j % operands
                    merged[target] = w
                comments = [f"HWC {rows}x{cols}, channels {a} to {b}" for _, _, a, b in parts]
                blocks.append(InputBlock(regs.apb_base + parts[0][1], merged, proc, comments))
            c += num_ch
        if c >= h.in_expand_thresh * h.in_expand:
            break
    if s.opts.build.synthesize_input is not None:
        for b in blocks:
            b.words = b.words[: s.opts.build.synthesize_words]
    return InputPlan(blocks=blocks, chw=h.big_data)


def _fifo_input(s, h, data, chans, rows, cols) -> InputPlan:
    chip = s.chip
    pmap = s.processor_map_0
    pixels = rows * cols
    per_group = chip.per_group
    if h.big_data:
        # One channel per FIFO (the quadrant of its processor), four pixels per word.
        fifo_of = []
        bits = pmap
        fifo = 0
        for _ in range(chans):
            if bits == 0:
                bits, fifo = pmap, 0
            while bits & 1 == 0:
                bits >>= per_group
                fifo += 1
            fifo_of.append(fifo)
            bits >>= per_group
            fifo += 1
        n_words = -(-pixels // 4)
        streams = np.zeros((chans, n_words), dtype=np.uint32)
        for c in range(chans):
            flat = np.zeros(n_words * 4, dtype=np.int64)
            flat[:pixels] = _bytes(data[c].reshape(-1))
            streams[fifo_of[c]] = _pack4(flat.reshape(-1, 4))
        count = chans
    else:
        channels = _bytes(data[:chans].reshape(chans, -1))
        if s.opts.write_for_write:
            lanes = quadrant_packed_lanes(channels, pmap, per_group)
        else:
            lanes = _processor_lanes(s, h, channels)
        count = lanes.shape[0]
        streams = _pack4(lanes)
    words = [streams[c] for c in range(count)]
    fast = s.opts.rules.fast_fifo
    base = chip.regs.apb_base
    if fast:
        addresses = [rm.FAST_FIFO_BASE_ADDRESS + rm.FAST_FIFO_DR] * count
        status = rm.FAST_FIFO_BASE_ADDRESS + rm.FAST_FIFO_SR
        masks = [2] * count
    else:
        addresses = [base + rm.FIFO_DATA + 4 * c for c in range(count)]
        status = base + rm.FIFO_STAT
        masks = [1 << c for c in range(count)]
    mask = None
    if s.opts.build.synthesize_input is not None and chans < 4:
        mask = (1 << (8 * chans)) - 1
    return InputPlan(
        blocks=[InputBlock(0, w, c) for c, w in enumerate(words)],
        fifo=True,
        fast_fifo=fast,
        fifo_addresses=addresses,
        status_address=status,
        status_masks=masks,
        synthesize=s.opts.build.synthesize_input,
        synthesize_words=s.opts.build.synthesize_words,
        synthesize_mask=mask,
        chw=h.big_data,
    )


def _processor_lanes(s: PlanSettings, h: HwLayer, channels: np.ndarray) -> np.ndarray:
    """(FIFOs, pixels, 4) bytes of an HWC input: channel c in the byte the processor that reads
    it takes. A standard FIFO n feeds processors 16n..16n+3, byte k to processor 16n+k; the fast
    FIFO is one stream, byte k to processor k (CTRL.fifogrp) or to processor 16k."""
    per_group = s.chip.per_group
    procs = [p for p in range(s.chip.max_proc) if s.processor_map_0 >> p & 1]
    if channels.shape[0] > len(procs):  # more than one pass: as the vendor packs them
        return quadrant_packed_lanes(channels, s.processor_map_0, per_group)
    fast = bool(s.opts.rules.fast_fifo)
    place = []
    for p in procs[: channels.shape[0]]:
        if fast:
            place.append((0, p % per_group if s.fifo_group else p // per_group))
        else:
            place.append((p // per_group, p % per_group))
    if len(set(place)) < len(place) or max(lane for _, lane in place) > 3:
        raise EdgesynthError(
            f"the FIFO cannot feed processors {', '.join(map(str, procs))} one channel each "
            "(the fast FIFO feeds processors 0-3, or 0, 16, 32 and 48; FIFO n processors "
            "16n to 16n+3); choose the first layer's processors among those.",
            layer=h.index,
            layer_name=h.layer.spec.name,
            key="processors",
        )
    lanes = np.zeros((max(f for f, _ in place) + 1, channels.shape[1], 4), dtype=np.int64)
    for c, (fifo, lane) in enumerate(place):
        lanes[fifo, :, lane] = channels[c]
    return lanes
