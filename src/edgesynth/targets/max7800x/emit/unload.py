"""cnn_unload(): copy the output layers' data memory into a channel-major buffer.

Output data is HWC in data memory (four 8-bit channels per word, or one 32-bit channel per
word, one memory instance per four processors, passes interleaved per pixel). The unload reads
each word group once per pixel and scatters its channels, so the buffer holds C x H x W values:
bytes for 8-bit outputs, 32-bit words for 32-bit outputs (bytes when the outputs are mixed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgesynth.targets.max7800x.plan.hwlayers import ffs
from edgesynth.targets.max7800x.plan.plan import Plan


@dataclass
class Lane:
    offset: int  # index of the channel's first value in the output buffer
    shift: int = 0  # byte lane (8-bit values)
    word: int = 0  # word within the pixel's group (32-bit values)
    stride: int = 1  # buffer elements per pixel


@dataclass
class Run:
    address: int
    count: int  # pixels
    step: int  # words between pixels
    lanes: list[Lane] = field(default_factory=list)


@dataclass
class Unload:
    byte_output: bool
    runs: list[Run]


def output_layers(plan: Plan) -> list[int]:
    s = plan.settings
    marked = [h.index for h in s.hw if h.layer.output]
    return marked or [s.final]


def unload_runs(plan: Plan) -> Unload:
    s = plan.settings
    chip, regs = s.chip, s.chip.regs
    layers = [s.by_index[i] for i in output_layers(plan)]
    byte_output = any(h.output_width == 8 for h in layers)
    runs: list[Run] = []
    written = 0  # buffer elements so far
    for h in layers:
        pixels = h.output_dim[0] * h.output_dim[1]
        out_size = h.output_width // 8
        width = h.out_expand * out_size
        gap = h.write_gap + 1
        omap = h.output_processor_map
        start = ffs(omap) & ~(chip.shared - 1)
        next_map = omap >> start
        c = 0
        poffs, this_map = start, next_map
        per_value = out_size if byte_output else 1
        while c < h.output_chan:
            if c % h.out_expand_thresh == 0:
                poffs, this_map = start, next_map
            expand = c // h.out_expand_thresh
            proc = poffs & ~(chip.shared - 1)
            instance = (proc % chip.per_group) * regs.instance_size | (
                proc // chip.per_group
            ) * regs.group_stride // 4
            base = regs.apb_base + regs.sram_base + h.out_offset
            address = base + (instance + expand * out_size * gap) * 4
            run = Run(address=address, count=pixels, step=width * gap)
            slot = 0
            for bit in range(4):
                if this_map & 1 and c < h.output_chan:
                    first = written + c * pixels * per_value
                    if out_size == 1:
                        run.lanes.append(Lane(offset=first, shift=8 * bit))
                    elif byte_output:
                        for k in range(4):
                            run.lanes.append(
                                Lane(offset=first + k, shift=8 * k, word=slot, stride=4)
                            )
                    else:
                        run.lanes.append(Lane(offset=first, word=slot))
                    c += 1
                    slot += 1
                elif this_map & 1:
                    c += 1
                this_map >>= 1
            if run.lanes:
                runs.append(run)
            poffs += 4
        written += h.output_chan * pixels * per_value
    return Unload(byte_output=byte_output, runs=runs)
