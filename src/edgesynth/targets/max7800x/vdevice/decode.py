"""Print the accelerator as the firmware left it, by name: registers, memories, FIFO streams."""

from __future__ import annotations

import numpy as np

from edgesynth.targets.max7800x.vdevice.regmap import Register
from edgesynth.targets.max7800x.vdevice.state import Machine
from edgesynth.wording import plural


def _fields(register: Register, value: int) -> str:
    parts = [f"{k}={v}" for k, v in register.decode(value).items() if v]
    return " ".join(parts) if parts else "0"


def layers_configured(machine: Machine) -> list[int]:
    """Layers with at least one register written in any quadrant."""
    return [
        layer
        for layer in range(machine.dmap.max_layers)
        if machine.layer_written[:, layer].any()
        or (layer < machine.stream_regs.shape[1] and machine.stream_regs[:, layer].any())
    ]


def describe(machine: Machine, *, memories: bool = True, contents: bool = False) -> list[str]:
    """The state as text lines: global registers, then per layer and quadrant every register,
    what each layer does, and (optionally) the memories, with `contents` word by word."""
    dmap = machine.dmap
    lines = [f"device {dmap.name}"]
    lines.append("global registers:")
    for (group, offset), value in sorted(machine.global_regs.items()):
        reg = dmap.global_regs[offset]
        lines.append(f"  quadrant {group} {reg.name:<9} 0x{value:08x}  {_fields(reg, value)}")
    if machine.ctrl_history:
        seq = ", ".join(f"q{g}:0x{v:08x}" for _, g, v in machine.ctrl_history)
        lines.append(f"  CTRL write sequence: {seq}")
    for layer in layers_configured(machine):
        lines.append(f"layer {layer}:")
        for group in range(4):
            regs = []
            for reg in dmap.layer_regs:
                if machine.layer_written[group, layer, reg.index]:
                    value = machine.reg(group, layer, reg.name)
                    regs.append(f"    {reg.name:<10} 0x{value:08x}  {_fields(reg, value)}")
            for reg in dmap.stream_regs:
                value = machine.reg(group, layer, reg.name)
                if value:
                    regs.append(f"    {reg.name:<10} 0x{value:08x}  {_fields(reg, value)}")
            if regs:
                lines.append(f"  quadrant {group}:")
                lines.extend(regs)
    lines.extend(describe_layers(machine))
    if memories:
        lines.extend(describe_memories(machine, contents=contents))
    return lines


def describe_layers(machine: Machine) -> list[str]:
    """One line per layer the accelerator would run, as the registers say."""
    from edgesynth.targets.max7800x.vdevice.interpret import interpret
    from edgesynth.targets.max7800x.vdevice.report import operation
    from edgesynth.targets.max7800x.vdevice.runner import layer_sequence

    lines = ["layers run, as the registers say:"]
    for layer in layer_sequence(machine):
        prog = interpret(machine, layer)
        processors = sum(len(p.processors) for p in prog.parts.values())
        passes = f" x {prog.passes} passes" if prog.passes > 1 else ""
        lines.append(
            f"  layer {layer}: {plural(processors, 'processor')}{passes}, "
            f"{prog.rows}x{prog.cols} input "
            f"at word {prog.read_ptr}: {operation(prog)}"
        )
    return lines


def _ranges(index: np.ndarray) -> str:
    """'0-59, 128-145' for sorted indices."""
    if index.size == 0:
        return "-"
    breaks = np.flatnonzero(np.diff(index) != 1)
    starts = np.r_[index[0], index[breaks + 1]]
    ends = np.r_[index[breaks], index[-1]]
    return ", ".join(f"{s}" if s == e else f"{s}-{e}" for s, e in zip(starts, ends, strict=True))


def describe_memories(machine: Machine, *, contents: bool = False) -> list[str]:
    lines = ["kernel memory (72-bit words written, by processor):"]
    for p in range(64):
        words = np.flatnonzero(machine.kernels.written[p])
        if words.size:
            lines.append(f"  processor {p:2d}: words {_ranges(words)}")
            if contents:
                for w in words.tolist():
                    data = machine.kernels.data[p, w]
                    lines.append(f"    {w:5d}: " + " ".join(f"{b:02x}" for b in data.tolist()))
    lines.append("bias memory (8-bit entries written, by quadrant):")
    for g in range(4):
        entries = np.flatnonzero(machine.bias_written[g])
        if entries.size:
            lines.append(f"  quadrant {g}: entries {_ranges(entries)}")
            if contents:
                values = machine.bias[g, entries].astype(np.int8)
                lines.append("    " + " ".join(str(v) for v in values.tolist()))
    lines.append("data memory written by the CPU (words, by 4-processor instance):")
    for q in range(16):
        words = np.flatnonzero(machine.data.writer[q] != -1)
        if words.size:
            lines.append(f"  processors {4 * q}-{4 * q + 3}: words {_ranges(words)}")
    fifos = machine.fifos
    if fifos.used:
        lines.append("FIFO streams:")
        for k, stream in enumerate(fifos.standard):
            if stream.size:
                lines.append(f"  FIFO {k}: {stream.size} words")
        if fifos.fast.size:
            lines.append(f"  fast FIFO: {fifos.fast.size} words")
        lines.append(f"  FIFO_CTL 0x{machine.fifo_ctl:08x}")
    return lines
