"""One line per layer: what the registers say the accelerator does."""

from __future__ import annotations

from edgesynth.targets.max7800x.vdevice.execute import LayerResult
from edgesynth.targets.max7800x.vdevice.interpret import LayerProgram
from edgesynth.wording import plural


def operation(prog: LayerProgram) -> str:
    parts = []
    if prog.fifo:
        parts.append(f"{prog.fifo} FIFO input")
    if prog.streamed:
        parts.append(f"streamed ({prog.fbuf}-word buffer)")
    if prog.eltwise:
        parts.append(f"{prog.eltwise} of {prog.operands}")
    if prog.pooling or prog.pool_stride != (1, 1):
        kind = prog.pooling or "subsample"
        parts.append(f"{kind}pool {prog.pool[0]}x{prog.pool[1]}/{prog.pool_stride[0]}")
    if prog.passthrough:
        parts.append("passthrough")
    else:
        kind = "depthwise " if prog.depthwise else ""
        if prog.deconv:
            kind += "transposed "
        shape = f"1-D k{prog.kernel[0]}" if prog.one_d else f"{prog.kernel[0]}x{prog.kernel[1]}"
        parts.append(f"{kind}conv {shape} pad {prog.pad[0]}")
        parts.append(f"{'binary' if prog.binary else prog.weight_bits}-bit weights")
        if prog.calcx4:
            parts.append("calcx4")
        if prog.shift:
            parts.append(f"shift {prog.shift:+d}")
    if prog.relu:
        parts.append("ReLU")
    if prog.absolute:
        parts.append("abs")
    if prog.out32:
        parts.append("32-bit output")
    return ", ".join(parts)


def layer_line(prog: LayerProgram, result: LayerResult, cycles: int | None = None) -> str:
    processors = sum(len(p.processors) for p in prog.parts.values())
    passes = f" x {prog.passes} passes" if prog.passes > 1 else ""
    out = result.output.shape
    line = (
        f"layer {prog.layer:3d}: {plural(processors, 'processor')}{passes}, "
        f"{prog.rows}x{prog.cols} in -> "
        f"{out[0]}x{out[1]}x{out[2]} out: {operation(prog)}"
    )
    if cycles is not None:
        line += f"; ~{cycles} cycles"
    return line
