"""Run one layer: read its input from data memory, compute with `sim.ops`, write the output.

The arithmetic is `edgesynth.sim.ops` (convolution, pooling, element-wise, requantization);
this module only moves data the way the registers say the hardware moves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.sim import ops
from edgesynth.targets.max7800x.vdevice.interpret import GroupPart, LayerProgram
from edgesynth.targets.max7800x.vdevice.state import Machine


@dataclass
class Placement:
    """Where each output channel of a layer went: per channel and pixel a word and a lane."""

    quad: np.ndarray  # (channels, pixels) 4-processor instance
    word: np.ndarray  # (channels, pixels)
    lane: np.ndarray  # (channels,) byte lane (8-bit output) or -1 (32-bit output)
    shape: tuple[int, int]  # output rows, columns
    order: np.ndarray | None = None  # (channels,) sort key: output pass, then processor/slot
    padding: np.ndarray | None = None  # (channels,) True for slots that only pad a pass

    @property
    def channels(self) -> int:
        return int(self.quad.shape[0])


@dataclass
class LayerResult:
    layer: int
    output: np.ndarray  # (channels, rows, cols) int64, the values written
    placement: Placement
    reads: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (quad, word)
    notes: list[str] = field(default_factory=list)


def _linear_to_memory(machine: Machine, linear: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Write-pointer value -> (4-processor instance, word)."""
    shift = machine.dmap.write_ptr_shift
    return linear >> shift, linear & ((1 << shift) - 1)


# ---------------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------------


def read_input(
    machine: Machine, prog: LayerProgram, processors: list[int]
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """(processors, passes, operands, rows, cols) signed input bytes, and the words read."""
    rows, cols, passes, ops_n = prog.rows, prog.cols, prog.passes, prog.operands
    proc = np.asarray(processors)
    quad = proc // 4
    pixels = rows * cols
    if prog.big_data:
        # One channel per 4-processor instance, four consecutive pixels per word.
        n = np.arange(pixels * passes * ops_n)
        per_plane = (pixels + 3) // 4
        plane, pix = np.divmod(n, pixels)
        word = prog.read_ptr + plane * per_plane + pix // 4
        lane = pix % 4
        q = np.broadcast_to(quad[:, None], (proc.size, n.size))
        w = np.broadcast_to(word[None, :], q.shape)
        values = machine.data.read_bytes(q, w, np.broadcast_to(lane[None, :], q.shape))
        values = values.reshape(proc.size, passes * ops_n, rows, cols)
        values = values.reshape(proc.size, passes, ops_n, rows, cols)
        reads = [(quad, np.unique(word))]
    else:
        index = np.arange(pixels * passes * ops_n)
        word = prog.read_ptr + index
        q = np.broadcast_to(quad[:, None], (proc.size, index.size))
        w = np.broadcast_to(word[None, :], q.shape)
        lane = np.broadcast_to((proc % 4)[:, None], q.shape)
        values = machine.data.read_bytes(q, w, lane)
        # word = pixel x passes x operands + pass x operands + operand
        values = values.reshape(proc.size, rows, cols, passes, ops_n).transpose(0, 3, 4, 1, 2)
        reads = [(quad, word)]
    return values, reads


def pool_and_combine(prog: LayerProgram, data: np.ndarray) -> np.ndarray:
    """(n, passes, operands, rows, cols) -> (n, passes, pooled rows, pooled cols)."""
    n, passes, operands, rows, cols = data.shape
    flat = data.reshape(n * passes, operands, rows, cols)

    def pool(x: np.ndarray) -> np.ndarray:  # (channels, rows, cols)
        if prog.pooling is None and prog.pool_stride == (1, 1):
            return x
        return ops.pool2d(
            x,
            prog.pool,
            prog.pool_stride,
            average_pool=prog.pooling == "avg",
            dilation=prog.pool_dilation,
            rounding=prog.pool_rounding,
        )

    if prog.eltwise is None:
        out = pool(flat[:, 0])
    elif prog.prepool:
        pooled = [pool(flat[:, j]) for j in range(operands)]
        out = ops.clip8(ops.eltwise(prog.eltwise, pooled))
    else:
        combined = ops.clip8(ops.eltwise(prog.eltwise, [flat[:, j] for j in range(operands)]))
        out = pool(combined)
    return out.reshape(n, passes, *out.shape[1:])


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


def gather_weights(machine: Machine, prog: LayerProgram, processors: list[int]) -> np.ndarray:
    """(processors, slots, passes, taps) signed weights from kernel memory.

    The mask counter runs from MCNT start to end in steps of the weight width, one step per
    (output slot, input pass), passes fastest. Address A: 72-bit word A >> 3, bit A & 7 for a
    3x3 kernel; kernels narrower than 9 bytes (1x1, 1-D) are packed back to back, starting
    `oned_sad` bytes into the word; weight t of a kernel of width w sits at packed byte
    (A >> 3) x w + oned_sad + (w - 1 - t), counted from the last byte of each word.
    """
    bits, taps = prog.weight_bits, prog.kernel_taps
    steps = prog.slots * prog.passes
    address = prog.mask_start + np.arange(steps) * bits
    packed = (address >> 3)[:, None] * taps + prog.oned_sad + (taps - 1 - np.arange(taps))[None]
    word, index = np.divmod(packed, 9)
    index = 8 - index
    shift = (address & 7).astype(np.uint8)[:, None]
    kmem = machine.kernels.data
    limit = kmem.shape[1]
    if word.max(initial=0) >= limit:
        raise EdgesynthError(
            f"layer {prog.layer}: kernel addresses run past the end of kernel memory "
            f"(MCNT 0x{prog.mask_start:x}..0x{prog.mask_end:x})"
        )
    raw = kmem[np.asarray(processors)[:, None, None], word[None], index[None]]
    raw = (raw >> shift[None]) & ((1 << bits) - 1)
    raw = raw.astype(np.int64)
    if prog.binary:
        values = np.where(raw == 1, -1, 1)
    elif bits < 8:
        values = np.where(raw >= 1 << (bits - 1), raw - (1 << bits), raw)
    else:
        values = np.where(raw >= 128, raw - 256, raw)
    return values.reshape(len(processors), prog.slots, prog.passes, taps)


# ---------------------------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------------------------


def zero_stuff(x: np.ndarray) -> np.ndarray:
    """Transposed convolution input: every value followed by a 0, every row by a row of 0s."""
    channels, rows, cols = x.shape
    stuffed = np.zeros((channels, 2 * rows, 2 * cols), dtype=x.dtype)
    stuffed[:, ::2, ::2] = x
    return stuffed


def chains(prog: LayerProgram) -> list[list[int]]:
    """Groups of quadrants that form one sum: a quadrant that adds other quadrants' partial
    sums (LCTRL0.cnnsi_en) writes the result; the quadrants it adds do not write."""
    fed = {t for part in prog.parts.values() for t in part.sums_from}
    result = []
    for g, part in prog.parts.items():
        if g in fed:
            continue
        members = [g] + [t for t in part.sums_from if t in prog.parts]
        result.append(members)
    return result


def run_layer(machine: Machine, prog: LayerProgram) -> LayerResult:
    if prog.passthrough:
        return _run_passthrough(machine, prog)
    return _run_convolution(machine, prog)


def _finish(prog: LayerProgram, acc: np.ndarray) -> np.ndarray:
    """Scale, round, clip and activate the accumulators (8-bit), or keep them (32-bit)."""
    if prog.out32:
        out = acc
    else:
        out = ops.requantize(acc, prog.shift)
    if prog.absolute:
        return ops.activate(out, "abs")
    if prog.relu:
        return ops.activate(out, "relu") if not prog.out32 else np.maximum(out, 0)
    return out


def _run_convolution(machine: Machine, prog: LayerProgram) -> LayerResult:
    results = []
    for members in chains(prog):
        processors = sorted({p for g in members for p in prog.parts[g].masked})
        readers = sorted({p for g in members for p in prog.parts[g].processors})
        data, reads = read_input(machine, prog, readers)
        pooled = pool_and_combine(prog, data)
        keep = [readers.index(p) for p in processors]
        x = pooled[keep]  # (processors, passes, rows, cols)
        weights = gather_weights(machine, prog, processors)  # (proc, slots, passes, taps)
        n_in = len(processors) * prog.passes
        x = x.reshape(n_in, *x.shape[2:])
        kh, kw = prog.kernel
        w = weights.transpose(1, 0, 2, 3).reshape(prog.slots, n_in, kh, kw)
        if prog.one_d:
            w = weights.transpose(1, 0, 2, 3).reshape(prog.slots, n_in, kh, 1)
        if prog.deconv:
            x = zero_stuff(x)
        acc = ops.conv2d(x, w, stride=prog.stride, pad=prog.pad)
        master = prog.parts[members[0]]
        for g in members:
            part = prog.parts[g]
            if part.bias_enabled:
                index = part.bias_start + np.arange(prog.slots)
                b = machine.bias[g, index % machine.bias.shape[1]].astype(np.int8).astype(np.int64)
                acc = acc + (b * 128)[:, None, None]
        out = _finish(prog, acc)
        placement = _conv_placement(machine, prog, master, out.shape)
        placement.padding = _padding_slots(weights, max(1, prog.slots_per_pass))
        _store(machine, prog, out, placement)
        results.append(LayerResult(prog.layer, out, placement, reads=reads))
    return _merge(prog, results)


def _padding_slots(weights: np.ndarray, per_pass: int) -> np.ndarray:
    """Trailing slots of the last of several output passes whose kernels are all zero in every
    processor and input pass: the firmware's padding of a partly used last output pass (the
    hardware computes and writes them too)."""
    slots = weights.shape[1]
    padding = np.zeros(slots, dtype=bool)
    if slots <= per_pass:
        return padding
    used = np.flatnonzero(weights.any(axis=(0, 2, 3)))
    first_candidate = max((used[-1] + 1) if used.size else 0, (slots - 1) // per_pass * per_pass)
    padding[first_candidate:] = True
    return padding


def _conv_placement(
    machine: Machine, prog: LayerProgram, master: GroupPart, shape: tuple[int, ...]
) -> Placement:
    slots, rows, cols = shape
    wp = master.write
    n = np.arange(slots)
    per_pass = max(1, prog.slots_per_pass)
    out_pass, j = np.divmod(n, per_pass)
    pixel = np.arange(rows * cols)
    if prog.out32:
        lane = np.full(slots, -1)
        offset = (j // 4) * wp.moff + (j % 4) + out_pass * wp.choff
        step = 4 + wp.inc
    else:
        lane = j % 4
        offset = (j // 4) * wp.moff + out_pass * wp.choff
        step = 1 + wp.inc
    linear = wp.base + offset[:, None] + (pixel * step)[None, :]
    quad, word = _linear_to_memory(machine, linear)
    return Placement(quad, word, lane, (rows, cols))


def _store(machine: Machine, prog: LayerProgram, out: np.ndarray, where: Placement) -> None:
    values = out.reshape(out.shape[0], -1)
    if where.word.max(initial=0) >= machine.data.words:
        raise EdgesynthError(f"layer {prog.layer}: the write pointer leaves data memory")
    if prog.out32:
        machine.data.write_words(where.quad.ravel(), where.word.ravel(), values.ravel(), prog.layer)
    else:
        lane = np.broadcast_to(where.lane[:, None], values.shape)
        machine.data.write_bytes(
            where.quad.ravel(), where.word.ravel(), lane.ravel(), values.ravel(), prog.layer
        )


def _merge(prog: LayerProgram, results: list[LayerResult]) -> LayerResult:
    """One result for the layer, channels in network order (output pass, then processor)."""
    if len(results) == 1 and results[0].placement.order is None:
        return results[0]
    keys = [
        r.placement.order if r.placement.order is not None else np.arange(r.placement.channels)
        for r in results
    ]
    order = np.argsort(np.concatenate(keys), kind="stable")
    output = np.concatenate([r.output for r in results])[order]
    padding = [
        r.placement.padding
        if r.placement.padding is not None
        else np.zeros(r.placement.channels, dtype=bool)
        for r in results
    ]
    placement = Placement(
        np.concatenate([r.placement.quad for r in results])[order],
        np.concatenate([r.placement.word for r in results])[order],
        np.concatenate([r.placement.lane for r in results])[order],
        results[0].placement.shape,
        padding=np.concatenate(padding)[order],
    )
    reads = [rd for r in results for rd in r.reads]
    return LayerResult(prog.layer, output, placement, reads=reads)


def _run_passthrough(machine: Machine, prog: LayerProgram) -> LayerResult:
    """Time-slot mode without kernels: each quadrant writes its processors' pooled (and
    element-wise combined) values, four per word, one word per time slot."""
    results = []
    for part in prog.parts.values():
        data, reads = read_input(machine, prog, part.processors)
        pooled = pool_and_combine(prog, data)  # (proc, passes, rows, cols)
        n_proc = len(part.processors)
        out = pooled.transpose(1, 0, 2, 3).reshape(prog.passes * n_proc, *pooled.shape[2:])
        if prog.relu:
            out = ops.activate(out, "relu")
        rows, cols = out.shape[1:]
        wp = part.write
        k, i = np.divmod(np.arange(out.shape[0]), n_proc)
        slot, lane = np.divmod(i, 4)
        pixel = np.arange(rows * cols)
        # Each input pass is its own step of the write pointer: pass k of pixel x goes to
        # x * passes + k (the same interleaving multi-pass input uses).
        position = pixel[None, :] * prog.passes + k[:, None]
        linear = wp.base + (slot * wp.toff)[:, None] + position * (1 + wp.inc)
        quad, word = _linear_to_memory(machine, linear)
        order = k * 64 + np.asarray(part.processors)[i]
        placement = Placement(quad, word, lane, (rows, cols), order)
        _store(machine, prog, out, placement)
        results.append(LayerResult(prog.layer, out, placement, reads=reads))
    return _merge(prog, results)
