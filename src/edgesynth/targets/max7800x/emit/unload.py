"""cnn_unload(): copy the output layers' data memory into a channel-major buffer.

Output data is HWC in data memory (four 8-bit channels per word, or one 32-bit channel per
word, one memory instance per four processors, passes interleaved per pixel). The unload reads
each word group once per pixel and scatters its channels, so the buffer holds C x H x W values:
bytes for 8-bit outputs, 32-bit words for 32-bit outputs (bytes when the outputs are mixed).
"""

from __future__ import annotations

from dataclasses import field

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.plan.hwlayers import ffs
from edgesynth.targets.max7800x.plan.plan import Plan


@dataclass
class Lane:
    """Where one output channel's values lie in the words of an unload run."""

    offset: int  # index of the channel's first value in the output buffer
    shift: int = 0  # byte lane (8-bit values)
    word: int = 0  # word within the pixel's group (32-bit values)
    stride: int = 1  # buffer elements per pixel


@dataclass
class Run:
    """Output words cnn_unload() reads: from an address, a count of pixels a step apart."""

    address: int
    count: int  # pixels
    step: int  # words between pixels
    lanes: list[Lane] = field(default_factory=list)


@dataclass
class Unload:
    """How cnn_unload() copies the network's output out of data memory."""

    byte_output: bool
    runs: list[Run]
    mlator: list[str] = field(default_factory=list)  # statements for --mlator layers


def output_layers(plan: Plan) -> list[int]:
    s = plan.settings
    marked = [h.index for h in s.hw if h.layer.output]
    return marked or [s.final]


def unload_runs(plan: Plan, mlator: bool = False, chunk: int = 8) -> Unload:
    s = plan.settings
    swapped = mlator_layers(plan, mlator)
    statements: list[str] = []
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
        if h.index in swapped:
            statements += mlator_statements(plan, h.index, written, max(1, chunk))
            written += h.output_chan * pixels * per_value
            continue
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
    return Unload(byte_output=byte_output, runs=runs, mlator=statements)


def mlator_layers(plan: Plan, enabled: bool) -> set[int]:
    """Output layers cnn_unload() reads through the byte swapper (--mlator): 8-bit outputs of
    at least 4 pixels per channel, a multiple of 4 when there are several channels."""
    if not enabled:
        return set()
    s = plan.settings
    chosen = set()
    for index in output_layers(plan):
        h = s.by_index[index]
        pixels = h.output_dim[0] * h.output_dim[1]
        if h.output_width != 8 or (h.output_chan > 1 and pixels % 4) or pixels < 4:
            continue
        chosen.add(index)
    return chosen


def mlator_statements(plan: Plan, index: int, written: int, chunk: int) -> list[str]:
    """C statements that unload layer `index` through the byte swapper ("mlator"), as the
    vendor's code drives it: per channel, the quadrant's layer-0 write pointer is set to the
    pixel offset and its control-2 register to the output pass, the control register selects
    the channel's byte lane, and each read of the mlator register returns four pixels of that
    channel. The pointer is set again wherever the data is not contiguous. (cnn_configure()
    must run again before the next inference.)"""
    from edgesynth.targets.max7800x import regmap as rm

    s = plan.settings
    chip, regs = s.chip, s.chip.regs
    h = s.by_index[index]
    pixels = h.output_dim[0] * h.output_dim[1]
    width = h.out_expand
    gap = h.write_gap + 1
    omap = h.output_processor_map
    start = ffs(omap) & ~(chip.shared - 1)
    next_map = omap >> start
    disable = f"  *ctrl = 0x{rm.CTL_CLOCK_ENABLE:08x}; // Disable mlator"
    lines: list[str] = []
    quadrant = None

    def reads(count: int) -> list[str]:
        out = []
        if count >= 2 * chunk:
            out += [f"  for (i = 0; i < {count // chunk}; i++) {{"]
            out += ["    *out32++ = *mlat;"] * chunk + ["  }"]
            count %= chunk
        return out + ["  *out32++ = *mlat;"] * count

    c = 0
    poffs, this_map = start, next_map
    while c < h.output_chan:
        if c % h.out_expand_thresh == 0:
            poffs, this_map = start, next_map
        expand = c // h.out_expand_thresh
        proc = poffs & ~(chip.shared - 1)
        group = proc // chip.per_group
        if group != quadrant:
            quadrant = group
            ctrl = regs.apb_base + regs.ctl(group, rm.REG_CTL)
            mlat = regs.apb_base + regs.ctl(group, regs.reg_mlat)
            lines += [
                f"  ctrl = (volatile uint32_t *) 0x{ctrl:08x};",
                f"  mlat = (volatile uint32_t *) 0x{mlat:08x};",
            ]
        wptr = regs.apb_base + regs.lreg(group, "WPTR_BASE", 0)
        lctl2 = regs.apb_base + regs.lreg(group, "LCTL2", 0)
        instance = (proc % chip.per_group) * regs.instance_size | group * regs.group_stride // 4
        for shift in range(4):
            if this_map & 1 and c < h.output_chan:
                lines += [
                    f"  // Channel {c}",
                    f"  out32 = out_buf + 0x{(written + c * pixels) // 4:x};",
                ]
                read_addr = None
                pending = 0
                for doffs in range(0, pixels, 4):
                    source = h.out_offset + (instance + (doffs >> 2) * width + expand) * gap * 4
                    if source != read_addr:
                        lines += reads(pending)
                        pending = 0
                        if doffs:
                            lines.append(disable)
                        control = rm.CTL_CLOCK_ENABLE | 1 << 16 | shift << 17
                        lines += [
                            f"  *((volatile uint32_t *) 0x{wptr:08x}) = 0x{doffs:08x}; "
                            "// Set SRAM address",
                            f"  *((volatile uint32_t *) 0x{lctl2:08x}) = 0x{expand:08x}; "
                            "// Set pointer increment",
                            f"  *ctrl = 0x{control:08x}; // Enable mlator, byte {shift}",
                            '  asm volatile("" : "=m"(*mlat) : "r"(*mlat)); // Prime',
                        ]
                    pending += 1
                    read_addr = source + 4
                lines += reads(pending)
                lines.append(disable)
                c += 1
            elif this_map & 1:
                c += 1
            this_map >>= 1
        poffs += 4
    return lines
