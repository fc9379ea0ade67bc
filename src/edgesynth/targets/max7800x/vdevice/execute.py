"""Run one layer: read its input, compute with `sim.ops`, write the output where the registers
say the hardware writes it.

The arithmetic is `edgesynth.sim.ops` (convolution, pooling, element-wise, requantization);
this module only moves data the way the registers say the hardware moves it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.sim import ops
from edgesynth.targets.max7800x.vdevice.interpret import GroupPart, LayerProgram
from edgesynth.targets.max7800x.vdevice.record import Factory, Record
from edgesynth.targets.max7800x.vdevice.state import Machine

if TYPE_CHECKING:  # (the hazard record is made only where a run keeps the access log)
    from edgesynth.targets.max7800x.vdevice.hazards import Hazard


class Placement(Record):
    """Where each output channel of a layer went.

    Channel c, pixel x is at write-pointer value `base[c] + offset[x]` (the word bits below
    the device's write-pointer shift, the 4-processor instance above), byte lane `lane[c]`
    (-1: a whole 32-bit word).
    """

    base: np.ndarray  # (channels,)
    offset: np.ndarray  # (pixels,)
    lane: np.ndarray  # (channels,)
    shape: tuple[int, int]  # output rows, columns
    shift: int  # write-pointer bits of the word address
    order: np.ndarray | None = None  # (channels,) sort key: output pass, then processor/slot
    padding: np.ndarray | None = None  # (channels,) True for slots that only pad a pass

    @property
    def channels(self) -> int:
        return int(self.base.shape[0])

    @property
    def linear(self) -> np.ndarray:
        return self.base[:, None] + self.offset[None, :]

    @property
    def quad(self) -> np.ndarray:
        """(channels, pixels) 4-processor instance (the pointer's carries included)."""
        return self.linear >> self.shift

    @property
    def word(self) -> np.ndarray:
        return self.linear & ((1 << self.shift) - 1)

    @property
    def stream_quad(self) -> np.ndarray:
        """Instance of each channel's first pixel (streamed data does not carry)."""
        return np.broadcast_to(
            (self.base >> self.shift)[:, None], (self.channels, self.offset.size)
        )

    @property
    def stream_word(self) -> np.ndarray:
        return (self.base & ((1 << self.shift) - 1))[:, None] + self.offset[None, :]


class LayerResult(Record):
    """One layer's run: its output, where it went, and what it read."""

    layer: int
    output: np.ndarray  # (channels, rows, cols) int8 (8-bit outputs) or int64, the values written
    placement: Placement
    # (instances, words, layers that had written them) of every data-memory read
    reads: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = Factory(list)
    kernels: list[KernelUnits] = Factory(list)  # (made only where the run keeps the access log)
    biases: list[BiasUnits] = Factory(list)
    notes: list[str] = Factory(list)
    # the words the layer wrote (instance x words + word), channel by channel (channels x
    # pixels, flattened)
    written: np.ndarray | None = None

    @property
    def sources(self) -> set[int]:
        """The layers whose output this layer read (from data memory)."""
        return {int(w) for _, _, writers in self.reads for w in writers if w >= 0}


class BiasUnits(Record):
    """Output channel `channel[u]` adds bias entry `index[u]` of quadrant `group`."""

    group: int
    index: np.ndarray
    channel: np.ndarray


class KernelUnits(Record):
    """Unit u reads kernel words `words[u]` in processor `processors[u]` and produces output
    channel `channel[u]` of its layer's result."""

    processors: np.ndarray
    words: np.ndarray  # (units, words per unit)
    channel: np.ndarray  # (units,)


class Wrap(Record):
    """The circular buffer a streaming consumer reads (RPTR_BASE, FBUF): its producer's writes
    land in it modulo its size."""

    start: int  # word
    size: int  # words
    quads: frozenset[int]


# ---------------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------------


def _fifo_bytes(
    machine: Machine, prog: LayerProgram, proc: np.ndarray, n: np.ndarray
) -> np.ndarray:
    """(processors, n.size) input bytes number `n` of a first layer fed by the FIFOs.

    Standard FIFOs: FIFO n feeds processors 16n..16n+3 (HWC: one pixel per word, byte k to
    processor 16n+k; CHW: four pixels of processor 16n's channel per word). Fast FIFO: one
    stream for up to four processors, 0-3 (CTRL.fifogrp) or 0, 16, 32, 48.
    """
    fifos = machine.fifos
    pixels = n.size
    out = np.zeros((proc.size, pixels), dtype=np.int64)
    for i, p in enumerate(proc.tolist()):
        if prog.fifo == "fast":
            stream = fifos.fast
            lane = p % 4 if prog.fifo_group else p // 16
        else:
            stream = fifos.standard[p // 16]
            lane = p % 16
        if prog.big_data:
            word, lane_n = n // 4, n % 4
        else:
            word, lane_n = n, np.full(pixels, lane)
        ok = word < stream.size
        raw = np.zeros(pixels, dtype=np.uint32)
        raw[ok] = (stream[word[ok]] >> (8 * lane_n[ok]).astype(np.uint32)) & 0xFF
        out[i] = raw.astype(np.uint8).astype(np.int8)
        if machine.log is not None and (not ok.all() or not raw.any()):
            from edgesynth.targets.max7800x.vdevice.hazards import Hazard

            what = "runs out of FIFO words" if not ok.all() else "gets only zero bytes"
            machine.log.found.append(
                Hazard(
                    "unwritten input",
                    prog.layer,
                    None,
                    f"layer {prog.layer}: processor {p} reads its input from the "
                    f"{'fast ' if prog.fifo == 'fast' else ''}FIFO and {what} (byte lane "
                    f"{int(lane_n[0])}): the firmware does not feed this channel",
                )
            )
    return out


def read_input(
    machine: Machine, prog: LayerProgram, processors: list[int]
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """(processors, passes, operands, rows, cols) signed input bytes (int8, or int64 from the
    FIFOs), and the words read."""
    rows, cols, passes, ops_n = prog.rows, prog.cols, prog.passes, prog.operands
    proc = np.asarray(processors)
    quad = proc // 4
    pixels = rows * cols
    layout = (proc.size, passes, ops_n, rows, cols)
    # Input byte k is pass x operand j = k % (passes x operands) of pixel k // (passes x
    # operands); `gather` lists them pass by pass, operand by operand, pixel by pixel, the
    # order of the result (no transposed copy)
    gather = np.arange(pixels * passes * ops_n).reshape(pixels, passes * ops_n).T.ravel()
    if prog.fifo:
        return _fifo_bytes(machine, prog, proc, gather).reshape(layout), []
    if prog.big_data:
        # One channel per 4-processor instance, four consecutive pixels per word; with several
        # passes (or operands) the words of one group of four pixels follow each other, as
        # HWC pixels' words do (not exercised by the corpus).
        pix, within = np.divmod(np.arange(pixels * passes * ops_n), passes * ops_n)
        word = prog.read_ptr + (pix // 4) * passes * ops_n + within
        lane = (pix % 4)[None, :]
    else:
        # word = pixel x words-per-pixel + pass x operands + operand
        within = np.arange(passes * ops_n)
        word = prog.read_ptr + (np.arange(pixels)[:, None] * prog.pixel_words + within).ravel()
        lane = (proc % 4)[:, None]
    if not prog.streamed and word.size and int(word.max()) >= machine.data.words:
        raise EdgesynthError(
            f"layer {prog.layer}: the input ({rows}x{cols}, {passes} passes from word "
            f"{prog.read_ptr}) runs past the end of data memory ({machine.data.words} words)"
        )
    if prog.streamed and machine.log is None and not prog.big_data:
        values = _stream_rows(machine, prog, quad, lane[:, 0], pixels)
        if values is not None:
            return values.reshape(layout), []
    q, w = quad[:, None], word[gather][None, :]
    lanes = lane[:, gather] if lane.shape[1] > 1 else lane
    if prog.streamed:
        values, who = machine.stream.read_bytes(q, w, lanes, owners=machine.log is not None)
        if machine.log is not None:  # the circular buffer's words are consumed as it streams
            buffer = prog.read_ptr + np.arange(prog.fbuf)
            for uq in np.unique(quad):
                machine.log.consume(np.full(buffer.size, uq), buffer)
            machine.log.stream_read(prog.layer, who)
        reads = []
    else:
        values, writers = _instance_bytes(machine, quad, lanes, word[gather])
        shape = (proc.size, word.size)
        reads = [(quad, word, writers)]
        if machine.log is not None:  # in the pixel order the hazard messages name
            qs, ws = np.broadcast_to(q, shape), np.broadcast_to(word[None, :], shape)
            machine.log.data_read(prog.layer, qs, ws, np.broadcast_to(lane, shape))
    return values.reshape(layout), reads


def _instance_bytes(
    machine: Machine, quad: np.ndarray, lane: np.ndarray, word: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(processors, words) signed input bytes (int8): of instance quad[i], words `word`, byte
    lanes `lane` (one a processor, (processors, 1), or one a word, (1, words)); and the
    writers of those words in every instance read, ascending. Instance by instance: its
    words read once (a view where they follow each other), its processors' bytes taken from
    them, its writers counted from the int8 tags, with no temporary the size of every
    processor's words."""
    data, tags = machine.data.data, machine.data.writer
    values = np.empty((quad.size, word.size), dtype=np.int8)
    start = int(word[0]) if word.size else 0
    view = bool(word.size) and np.array_equal(word, np.arange(start, start + word.size))
    per_word = lane.shape[1] > 1  # (one channel an instance: four pixels a word)
    byte = 4 * np.arange(word.size) + lane[0] if per_word else None
    counts = np.zeros(256, dtype=np.int64)
    for q in np.flatnonzero(np.bincount(quad)).tolist():
        if view:
            row, tag = data[q, start : start + word.size], tags[q, start : start + word.size]
        else:
            row, tag = data[q, word], tags[q, word]
        for i in np.flatnonzero(quad == q).tolist():
            if per_word:
                values[i] = row.view(np.int8).take(byte)
            else:
                values[i] = row.view(np.int8).reshape(-1, 4)[:, lane[i, 0]]
        counts += np.bincount(tag.view(np.uint8), minlength=256)
    present = np.flatnonzero(counts)
    return values, np.sort(np.where(present >= 128, present - 256, present))  # (int8 tags)


def _stream_rows(
    machine: Machine,
    prog: LayerProgram,
    quad: np.ndarray,
    lane: np.ndarray,
    pixels: int,
    out: np.ndarray | None = None,
) -> np.ndarray | None:
    """`read_input`'s streamed HWC bytes (int8), (processors, passes x operands x pixels) in its
    order, as one strided read per processor and pass/operand (word read_ptr + pixel x
    pixel_words + pass x operands + operand), into `out` where given; None where a read
    leaves the stream view."""
    within = prog.passes * prog.operands
    rows = np.repeat(np.arange(quad.size), within)
    start = prog.read_ptr + np.tile(np.arange(within), quad.size)
    values = machine.stream.read_rows(quad[rows], start, prog.pixel_words, lane[rows], pixels, out)
    return None if values is None else values.reshape(quad.size, within * pixels)


_CHUNK_BYTES = 1 << 18  # input bytes a streamed layer reads and pools at a time


def read_pooled(
    machine: Machine, prog: LayerProgram, processors: list[int]
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """`pool_and_combine` of `read_input`: (processors, passes, pooled rows, pooled cols),
    and the words read. A streamed HWC input (run without the access log) is read and
    pooled a few processors at a time into one reused buffer, never all of it at once (the
    same values; a large streamed frame's input bytes are most of a proof's memory)."""
    pixels = prog.rows * prog.cols
    within = prog.passes * prog.operands
    if prog.fifo or not prog.streamed or machine.log is not None or prog.big_data:
        data, reads = read_input(machine, prog, processors)
        return pool_and_combine(prog, data), reads
    proc = np.asarray(processors)
    step = max(1, _CHUNK_BYTES // max(1, within * pixels))
    buffer = np.empty(min(step, proc.size) * within * pixels, dtype=np.int8)
    parts = []
    for first in range(0, proc.size, step):
        chunk = proc[first : first + step]
        values = _stream_rows(machine, prog, chunk // 4, chunk % 4, pixels, buffer)
        if values is None:  # (outside the stream view: read as `read_input` reads)
            data, reads = read_input(machine, prog, processors)
            return pool_and_combine(prog, data), reads
        layout = (chunk.size, prog.passes, prog.operands, prog.rows, prog.cols)
        parts.append(pool_and_combine(prog, values.reshape(layout)))
    return (np.concatenate(parts) if len(parts) > 1 else parts[0]), []


def pool_and_combine(prog: LayerProgram, data: np.ndarray) -> np.ndarray:
    """(n, passes, operands, rows, cols) -> (n, passes, pooled rows, pooled cols): int8 bytes
    max-pooled (or not pooled) stay int8 (the convolutions widen them), sums and element-wise
    results are int64."""
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


CALCX4_BANK_LARGE = 1024  # words per kernel-memory instance of the first 4096 words
CALCX4_BANK_SMALL = 256  # ... of the extra words of the first processor of each quadrant
CALCX4_SMALL_START = 4096


def calcx4_address(prog: LayerProgram) -> np.ndarray:
    """POST.calcx4: the four kernel-memory instances of a processor are read at once, one per
    output of a group of four: the mask counter steps through c = i x passes + k (address
    A = MCNT start + c x weight bits) and output 4 i + j, pass k reads instance j at A, that is
    j x instance size words further. Returns the mask address of every (output, pass) step,
    outputs in natural order."""
    start = prog.mask_start >> 3
    bank = CALCX4_BANK_LARGE if start < CALCX4_SMALL_START else CALCX4_BANK_SMALL
    n, k = np.divmod(np.arange(prog.slots * prog.passes), prog.passes)
    address = prog.mask_start + ((n // 4) * prog.passes + k) * prog.weight_bits
    return address + ((n % 4) * bank << 3)


def kernel_positions(prog: LayerProgram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(word, byte index, bit shift) of every weight: arrays (slots x passes, taps).

    The mask counter runs from MCNT start to end in steps of the weight width, one step per
    (output slot, input pass), passes fastest. Address A: 72-bit word A >> 3, bit A & 7 for a
    3x3 kernel; kernels narrower than 9 bytes (1x1, 1-D) are packed back to back, starting
    `oned_sad` bytes into the word; weight t of a kernel of width w sits at packed byte
    (A >> 3) x w + oned_sad + (w - 1 - t), counted from the last byte of each word.
    """
    bits, taps = prog.weight_bits, prog.kernel_taps
    steps = prog.slots * prog.passes
    address = prog.mask_start + np.arange(steps) * bits
    if prog.calcx4:
        address = calcx4_address(prog)
    packed = (address >> 3)[:, None] * taps + prog.oned_sad + (taps - 1 - np.arange(taps))[None]
    word, index = np.divmod(packed, 9)
    shift = np.broadcast_to((address & 7)[:, None], word.shape)
    return word, 8 - index, shift


def gather_weights(machine: Machine, prog: LayerProgram, processors: list[int]) -> np.ndarray:
    """(processors, slots, passes, taps) signed weights from kernel memory (all 1 with kernel
    bypass, LCTRL0.bypass), int8 (the convolutions widen them)."""
    bits, taps = prog.weight_bits, prog.kernel_taps
    if prog.bypass:
        return np.ones((len(processors), prog.slots, prog.passes, taps), dtype=np.int8)
    word, index, shift = kernel_positions(prog)
    kmem = machine.kernels.data
    if word.max(initial=0) >= kmem.shape[1]:
        raise EdgesynthError(
            f"layer {prog.layer}: kernel addresses run past the end of kernel memory "
            f"(MCNT 0x{prog.mask_start:x}..0x{prog.mask_end:x})"
        )
    # each processor's row of bytes (9 a word), at one position per weight: (processors, n)
    rows = kmem.reshape(kmem.shape[0], -1)
    raw = rows[np.asarray(processors)[:, None], (word * 9 + index).reshape(1, -1)]
    if bits == 8 and not prog.binary and not shift.any():  # whole bytes: signed as they are
        values = raw.view(np.int8)
    else:
        field = (raw >> shift.reshape(-1).astype(np.uint8)) & np.uint8((1 << bits) - 1)
        if prog.binary:
            values = np.where(field == 1, np.int8(-1), np.int8(1))
        else:  # `bits`-bit two's complement: moved to the top of the byte and shifted back
            values = (field << np.uint8(8 - bits)).view(np.int8) >> np.int8(8 - bits)
    return values.reshape(len(processors), prog.slots, prog.passes, taps)


def _kernel_units(
    prog: LayerProgram, processors: list[int], depthwise: bool = False
) -> KernelUnits:
    """Which kernel words each output channel of a chain reads, processor by processor."""
    word, _, _ = kernel_positions(prog)
    proc = np.asarray(processors)
    if depthwise:  # channel k x n + i: processor i's kernel for pass k
        n = len(processors)
        words = np.repeat(word.reshape(prog.passes, -1), n, axis=0)
        return KernelUnits(np.tile(proc, prog.passes), words, np.arange(n * prog.passes))
    per_slot = word.reshape(prog.slots, -1)
    units_proc = np.repeat(proc, prog.slots)
    units_words = np.tile(per_slot, (proc.size, 1))
    channel = np.tile(np.arange(prog.slots), proc.size)
    return KernelUnits(units_proc, units_words, channel)


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
    if prog.qupac:
        return [[g] for g, part in prog.parts.items() if part.processors]
    fed = {t for part in prog.parts.values() for t in part.sums_from}
    result = []
    for g, part in prog.parts.items():
        if g in fed:
            continue
        members = [g] + [t for t in part.sums_from if t in prog.parts]
        result.append(members)
    return result


def run_layer(
    machine: Machine, prog: LayerProgram, wrap: Wrap | None = None, written: bool = True
) -> LayerResult:
    """One layer run and stored; without `written` its result leaves out the words it wrote
    (`LayerResult.written`, which only the snoop units look at)."""
    if prog.passthrough:
        result = _run_passthrough(machine, prog)
    elif prog.depthwise:
        result = _run_depthwise(machine, prog)
    else:
        result = _run_convolution(machine, prog)
    if machine.log is not None and wrap is None:
        early = writes_before_reads(prog, result)
        if early is not None:
            machine.log.found.append(early)
    if written or not _store_last_in_buffer(machine, prog, result, wrap):
        store(machine, prog, result, wrap)
    return result


def last_output_reading(prog: LayerProgram, out_rows: int, out_cols: int) -> np.ndarray | None:
    """For every input pixel (before pooling, raster order), the last output pixel (raster
    order) whose window reads it; None where the geometry is not the plain one (streamed,
    FIFO or one-channel-per-instance input, pooling after the convolution, transposed
    convolutions).

    Pooled row j reads input rows j x pool-stride on; output row o reads pooled rows
    o x stride - pad to o x stride - pad + kernel - 1. So input row r is last read by output
    row min((r // pool-stride + pad) // stride, rows - 1), and the same for columns."""
    if prog.streamed or prog.fifo or prog.big_data or prog.deconv:
        return None
    if prog.pooling is not None and not prog.prepool:
        return None
    pool_stride = prog.pool_stride if prog.pooling is not None else (1, 1)
    last = []
    for size, step, pad, stride, outs in zip(
        (prog.rows, prog.cols),
        pool_stride,
        prog.pad,
        prog.stride,
        (out_rows, out_cols),
        strict=True,
    ):
        pooled = np.arange(size) // max(1, step)
        last.append(np.minimum((pooled + pad) // max(1, stride), outs - 1))
    return (last[0][:, None] * out_cols + last[1][None, :]).ravel()


def writes_before_reads(prog: LayerProgram, result: LayerResult) -> Hazard | None:
    """A layer whose output lands on input words it has not finished reading: output pixels
    are produced in raster order, so writing pixel p over the words of input pixel i is safe
    only when no output after p still reads i (a layer may write over its own input from
    below, as the vendor's hand placements of large networks do). Checked for one output pass
    (one word per pixel per processor: the write order is the pixel order)."""
    if not result.reads or (prog.slots_per_pass and prog.slots > prog.slots_per_pass):
        return None
    out_rows, out_cols = result.output.shape[1:3] if result.output.ndim == 3 else (0, 0)
    last = last_output_reading(prog, out_rows, out_cols)
    if last is None:
        return None
    quads, words = result.reads[0][0], result.reads[0][1]  # read instances; words, in order
    per_pixel = max(1, words.size // max(1, last.size))
    if words.size == 0 or words.size != last.size * per_pixel:
        return None
    order = np.argsort(words, kind="stable")
    in_words, in_last = words[order], np.repeat(last, per_pixel)[order]
    where = result.placement
    pixel = np.broadcast_to(np.arange(where.offset.size)[None, :], where.quad.shape)
    mine = _among(where.quad, quads)  # output words in the instances the layer reads
    q_out, w_out, p_out = where.quad[mine], where.word[mine], pixel[mine]
    at = np.minimum(np.searchsorted(in_words, w_out), max(0, in_words.size - 1))
    late = (in_words[at] == w_out) & (in_last[at] > p_out)
    if not late.any():
        return None
    q_all, w_all = q_out[late], w_out[late]
    from edgesynth.targets.max7800x.vdevice.hazards import Hazard

    return Hazard(
        "overwrites its own input",
        prog.layer,
        prog.layer,
        f"layer {prog.layer} writes {np.unique(q_all * (1 << 20) + w_all).size} words of its "
        f"input before it has read them (instance {int(q_all[0])}, word {int(w_all.min())} on)",
    )


def _exact(prog: LayerProgram, acc: np.ndarray, biases: int) -> np.ndarray:
    """The accumulators of an 8-bit output left in the float type the sums were computed in
    where it holds every value `_finish` makes of them exactly (the sums, `biases` biases of
    at most 128 x 128, the rounding half), else as int64."""
    if acc.dtype.kind != "f":
        return acc
    limit = ops.FLOAT32_EXACT_LIMIT if acc.dtype == np.float32 else ops.ACC_EXACT_LIMIT
    bound = max(-float(acc.min()), float(acc.max())) if acc.size else 0.0
    if prog.out32 or bound + _margin(prog, biases) >= limit:
        return acc.astype(np.int64)
    return acc


def _margin(prog: LayerProgram, biases: int) -> int:
    """What `_finish` adds to the sums at most: `biases` biases of at most 128 x 128, and the
    rounding half."""
    return 128 * 128 * biases + (1 << max(7 - prog.shift, 0))


def _finish_float(prog: LayerProgram, acc: np.ndarray) -> np.ndarray:
    """`_finish` of an 8-bit output on integer-valued float accumulators (`_exact`): every
    step is exact in the float type (sums and half below its exact limit; scaling by a power
    of two; floor), so the result is the integer path's, converted once at the end, to int8
    (every value is in -128..127)."""
    shift = prog.shift - 7
    if shift < 0:
        acc += (1 << -shift) >> 1
    if shift:
        np.multiply(acc, 2.0**shift, out=acc)
    return _activate_float(prog, acc)


def _activate_float(
    prog: LayerProgram, acc: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """Floor, clip to 8 bits and activate scaled float accumulators (exact: the values are
    integers and binary fractions), as int8, into `out` where given. With ReLU the value is
    clipped to 0..127 before the floor, which the conversion's truncation then is (the same
    values as floor, clip, clip)."""
    if prog.relu and not prog.absolute:
        np.clip(acc, 0, 127, out=acc)
    else:
        np.floor(acc, out=acc)
        np.clip(acc, -128, 127, out=acc)
        if prog.absolute:
            np.minimum(np.abs(acc, out=acc), 127, out=acc)
    if out is None:
        return acc.astype(np.int8)
    np.copyto(out, acc, casting="unsafe")  # (exact: integers in -128..127)
    return out


def _finish(prog: LayerProgram, acc: np.ndarray) -> np.ndarray:
    """Scale, round, clip and activate the accumulators (8-bit), or keep them (32-bit)."""
    if acc.dtype.kind == "f":  # (`_exact`: an 8-bit output)
        return _finish_float(prog, acc)
    out = acc if prog.out32 else ops.requantize(acc, prog.shift)  # (`acc`: the layer's own)
    if prog.absolute:
        return ops.activate(out, "abs", inplace=True)
    if prog.relu:
        return (
            ops.activate(out, "relu", inplace=True)
            if not prog.out32
            else np.maximum(out, 0, out=out)
        )
    return out


def _bias_units(machine: Machine, prog: LayerProgram, members: list[int]) -> list[BiasUnits]:
    """The bias entries each member group with its bias enabled adds to the output slots."""
    biases = []
    for g in members:
        part = prog.parts[g]
        if part.bias_enabled:
            # with calcx4 the bias pointer counts groups of four outputs
            start = part.bias_start * (4 if prog.calcx4 else 1)
            index = (start + np.arange(prog.slots)) % machine.bias.shape[1]
            biases.append(BiasUnits(g, index, np.arange(prog.slots)))
    return biases


def _convolve(
    machine: Machine, prog: LayerProgram, x: np.ndarray, w: np.ndarray, biases: list[BiasUnits]
) -> np.ndarray:
    """The output slots of a chain: the sums of x convolved with w, each bias entry x 128
    added, scaled, rounded, clipped and activated (`_finish`). An 8-bit output whose sums,
    biases and rounding half float32 holds exactly, bounded before the sums are made
    (`ops.sum_bound`), is computed in blocks of output rows, the biases, the half and the
    scaling by a power of two made by the product itself, each block finished while it is in
    cache (the same values: every step is exact)."""
    added = [machine.bias[b.group, b.index].astype(np.int8).astype(np.int64) * 128 for b in biases]
    bound = ops.sum_bound(x, w.reshape(w.shape[0], -1)) if x.size else math.inf
    if not prog.out32 and bound + _margin(prog, len(biases)) < ops.FLOAT32_EXACT_LIMIT:
        shift = prog.shift - 7
        offset = np.full(prog.slots, (1 << -shift) >> 1 if shift < 0 else 0, dtype=np.int64)
        for b in added:
            offset += b
        out = np.empty((prog.slots, *_conv_size(prog, x, w)), dtype=np.int8)
        blocks = ops.conv2d_blocks(
            x, w, stride=prog.stride, pad=prog.pad, scale=2.0**shift, offset=offset
        )
        for first, sums in blocks:
            _activate_float(prog, sums, out[:, first : first + sums.shape[1]])
        return out
    acc = ops.conv2d(x, w, stride=prog.stride, pad=prog.pad, keep_float=True)
    acc = _exact(prog, acc, len(biases))
    for b in added:
        acc += b.astype(acc.dtype)[:, None, None]  # (acc is this layer's own array)
    return _finish(prog, acc)


def _conv_size(prog: LayerProgram, x: np.ndarray, w: np.ndarray) -> tuple[int, int]:
    """(rows, cols) of the convolution's output."""
    rows = (x.shape[1] + 2 * prog.pad[0] - w.shape[2]) // prog.stride[0] + 1
    cols = (x.shape[2] + 2 * prog.pad[1] - w.shape[3]) // prog.stride[1] + 1
    return rows, cols


def _run_convolution(machine: Machine, prog: LayerProgram) -> LayerResult:
    results = []
    for members in chains(prog):
        readers = sorted({p for g in members for p in prog.parts[g].processors})
        processors = sorted({p for g in members for p in prog.parts[g].masked})
        if prog.bypass:  # kernel bypass: every enabled processor, every weight 1
            processors = readers
        pooled, reads = read_pooled(machine, prog, readers)
        x = pooled[[readers.index(p) for p in processors]]  # (processors, passes, rows, cols)
        weights = gather_weights(machine, prog, processors)  # (proc, slots, passes, taps)
        n_in = len(processors) * prog.passes
        x = x.reshape(n_in, *x.shape[2:])
        kh, kw = prog.kernel
        w = weights.transpose(1, 0, 2, 3).reshape(prog.slots, n_in, kh, kw)
        if prog.deconv:
            x = zero_stuff(x)
        biases = _bias_units(machine, prog, members)
        out = _convolve(machine, prog, x, w, biases)
        slot = np.arange(prog.slots)
        if prog.qupac:
            # x16 parallel mode: every quadrant computes its own outputs from the same input;
            # its slot s is output 4 s + quadrant.
            slot = 4 * slot + members[0]
        placement = _conv_placement(machine, prog, prog.parts[members[0]], slot, out.shape)
        placement.padding = _padding_slots(weights, max(1, prog.slots_per_pass))
        if prog.qupac:
            placement.order = slot
        logged = machine.log is not None and not prog.bypass  # (only the hazard record reads them)
        units = _kernel_units(prog, processors) if logged else None
        result = LayerResult(
            prog.layer,
            out,
            placement,
            reads=reads,
            kernels=[units] if units is not None else [],
            biases=biases,
        )
        if prog.qupac and prog.parts[members[0]].write.choff == 0:
            # Outputs past one pass have nowhere else to go: the quadrant's extra slot (the
            # layer has fewer outputs than 4 x its kernel steps) is not written.
            result = _select(result, slot < max(1, prog.slots_per_pass))
        results.append(result)
    return _merge(results)


def _select(result: LayerResult, keep: np.ndarray) -> LayerResult:
    """The result without the channels `keep` leaves out."""
    new_index = np.cumsum(keep) - 1
    p = result.placement
    placement = Placement(
        p.base[keep],
        p.offset,
        p.lane[keep],
        p.shape,
        p.shift,
        order=None if p.order is None else p.order[keep],
        padding=None if p.padding is None else p.padding[keep],
    )
    kernels = [
        KernelUnits(
            k.processors[keep[k.channel]],
            k.words[keep[k.channel]],
            new_index[k.channel[keep[k.channel]]],
        )
        for k in result.kernels
    ]
    biases = [
        BiasUnits(b.group, b.index[keep[b.channel]], new_index[b.channel[keep[b.channel]]])
        for b in result.biases
    ]
    return LayerResult(result.layer, result.output[keep], placement, result.reads, kernels, biases)


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
    machine: Machine,
    prog: LayerProgram,
    master: GroupPart,
    slot: np.ndarray,
    shape: tuple[int, ...],
) -> Placement:
    """Output slot n of pass e = n // slots-per-pass: 8-bit data goes to byte lane j % 4 of
    instance (j // 4) x MOFF away, 32-bit data to word j % 4 there (j = n mod slots-per-pass);
    each pass moves CHOFF words; each output pixel moves the pointer by 1 + wptr_inc words,
    four times that for 32-bit data (one word per processor: the firmware sets wptr_inc to
    passes x (write_gap + 1) - 1 for both widths and reads 32-bit pixels 4 x passes words
    apart)."""
    slots, rows, cols = shape
    wp = master.write
    out_pass, j = np.divmod(slot, max(1, prog.slots_per_pass))
    if prog.out32:
        lane = np.full(slots, -1)
        base = wp.base + (j // 4) * wp.moff + (j % 4) + out_pass * wp.choff
        step = 4 * (1 + wp.inc)
    else:
        lane = j % 4
        base = wp.base + (j // 4) * wp.moff + out_pass * wp.choff
        step = 1 + wp.inc
    offset = np.arange(rows * cols) * step
    return Placement(base, offset, lane, (rows, cols), machine.dmap.write_ptr_shift)


def store(machine: Machine, prog: LayerProgram, result: LayerResult, wrap: Wrap | None) -> None:
    """Write a layer's output into data memory; when the next layer streams, the writes land
    in its circular buffer, and also go, unwrapped, to the stream view it reads."""
    where = result.placement
    values = result.output.reshape(where.channels, -1)
    index = memory_index(machine, prog, where, wrap)
    lane = where.lane[:, None]
    ids = None
    if machine.log is not None:
        quad, word = np.divmod(index.ravel(), machine.data.words)
        lanes = np.broadcast_to(lane, index.shape).ravel()
        first = machine.log.new_channels(prog.layer, where.channels, where.padding)
        ids = np.repeat(first + np.arange(where.channels), where.offset.size)
        machine.log.data_written(prog.layer, quad, word, lanes, ids)
        for k in result.kernels:
            machine.log.kernels_read(prog.layer, k.processors, k.words, first + k.channel)
        for b in result.biases:
            machine.log.bias_read(prog.layer, b.group, b.index, first + b.channel)
        ids = ids.reshape(index.shape)
    if prog.out32:
        machine.data.write_words_at(index, values, prog.layer)
    else:
        values = low_bytes(values)  # once for both memories
        machine.data.write_bytes_at(index, lane, values, prog.layer)
    result.written = index.ravel()
    if wrap is not None:
        sq = (where.base >> where.shift)[:, None]
        if prog.out32:
            machine.stream.write_words(sq, where.stream_word, values, prog.layer, ids)
        elif ids is None and (step := _step(where.offset)) is not None:
            start = (where.base & ((1 << where.shift) - 1)) + int(where.offset[0])
            machine.stream.write_rows(sq.ravel(), start, step, where.lane, values)
        else:
            machine.stream.write_bytes(sq, where.stream_word, lane, values, prog.layer, ids)


def low_bytes(values: np.ndarray) -> np.ndarray:
    """The low byte of every value, as uint8 (int8 values are viewed, not copied)."""
    return values.view(np.uint8) if values.dtype == np.int8 else values.astype(np.uint8)


def _step(offset: np.ndarray) -> int | None:
    """The step of evenly spaced, increasing `offset` values (1 for a single one), else None."""
    if offset.size < 2:
        return 1 if offset.size else None
    step = int(offset[1] - offset[0])
    evenly = step >= 1 and np.array_equal(offset, offset[0] + step * np.arange(offset.size))
    return step if evenly else None


def _store_last_in_buffer(
    machine: Machine, prog: LayerProgram, result: LayerResult, wrap: Wrap | None
) -> bool:
    """`store` of 8-bit output into a streaming consumer's circular buffer, every value in
    it (`_all_in_buffer`), pixels evenly spaced: only each channel's last pixels that wrap
    once around the buffer go to data memory (every earlier pixel's word is written again by
    a later pixel of its channel; channels in order, as `store` writes them), the whole
    output to the stream view. False (nothing stored) where that does not apply, or the run
    keeps the hazard record."""
    where = result.placement
    step = _step(where.offset)
    if wrap is None or machine.log is not None or prog.out32 or step is None:
        return False
    words = machine.data.words
    first = Placement(where.base, where.offset[:1], where.lane, where.shape, where.shift)
    if _all_in_buffer(first, wrap, words) is None:
        return False
    pixels = where.offset.size
    period = wrap.size // math.gcd(step, wrap.size)  # pixel x and x + period share a word
    last = np.arange(max(0, pixels - period), pixels)
    tail = Placement(where.base, where.offset[last], where.lane, where.shape, where.shift)
    index = _all_in_buffer(tail, wrap, words)
    values = low_bytes(result.output.reshape(where.channels, -1))
    machine.data.write_bytes_at(index, where.lane[:, None], values[:, last], prog.layer)
    sq = where.base >> where.shift
    start = (where.base & ((1 << where.shift) - 1)) + int(where.offset[0])
    machine.stream.write_rows(sq, start, step, where.lane, values)
    return True


def memory_index(
    machine: Machine, prog: LayerProgram, where: Placement, wrap: Wrap | None
) -> np.ndarray:
    """(channels, pixels) data-memory word of every output value, as instance x words + word:
    the write pointer's instance bits above its word bits; in the circular buffer of a
    streaming consumer, from the buffer's start on, the word modulo the buffer. Refuses a
    write pointer that leaves data memory."""
    words, shift = machine.data.words, where.shift
    outside = 16 * words
    index = None if wrap is None else _all_in_buffer(where, wrap, words)
    if index is not None:
        highest = int((where.base >> shift).max()) * words + wrap.start + wrap.size - 1
    elif words == 1 << shift and where.offset.size:  # equal on both devices: the pointer
        index = where.linear
        highest = int(where.base.max()) + int(where.offset.max())
    else:
        index = where.linear
        if words != 1 << shift:
            word = index & ((1 << shift) - 1)
            index = np.where(word < words, (index >> shift) * words + word, outside)
        if wrap is not None:
            sq = where.base >> shift  # streamed data does not carry into the next instance
            rows = np.flatnonzero(_among(sq, wrap.quads))
            sw = where.stream_word[rows]
            inside = sw >= wrap.start
            if inside.any():
                wrapped = wrap.start + (sw - wrap.start) % wrap.size
                wrapped = np.where(wrapped < words, sq[rows, None] * words + wrapped, outside)
                index[rows] = np.where(inside, wrapped, index[rows])
        highest = int(index.max(initial=0))
    if highest >= outside:
        raise EdgesynthError(f"layer {prog.layer}: the write pointer leaves data memory")
    return index


def _among(values: np.ndarray, members: np.ndarray | Iterable[int]) -> np.ndarray:
    """np.isin for a small set of integers, by a lookup table (the default sorts with
    np.unique, whose first call imports numpy.ma: 8 ms of every proof)."""
    table = members if isinstance(members, np.ndarray) else np.fromiter(members, np.int64)
    return np.isin(values, table.astype(np.int64, copy=False), kind="table")


def _all_in_buffer(where: Placement, wrap: Wrap, words: int) -> np.ndarray | None:
    """`memory_index` where every output value lands in the circular buffer (the usual
    streaming layout: every channel in the buffer's instances, from its start on, and the
    buffer inside an instance), else None. Word base + offset goes to start + (base - start +
    offset) mod size, the two terms reduced apart and added (one subtraction for the carry)."""
    sq, row_word = where.base >> where.shift, where.base & ((1 << where.shift) - 1)
    if not where.offset.size or wrap.start + wrap.size > words:
        return None
    if not _among(sq, wrap.quads).all():
        return None
    if int(row_word.min()) + int(where.offset.min()) < wrap.start:
        return None
    index = ((row_word - wrap.start) % wrap.size)[:, None] + (where.offset % wrap.size)[None, :]
    np.subtract(index, wrap.size, out=index, where=index >= wrap.size)
    index += (sq * words + wrap.start)[:, None]
    return index


def _merge(results: list[LayerResult]) -> LayerResult:
    """One result for the layer, channels in network order (output pass, then processor)."""
    if len(results) == 1 and results[0].placement.order is None:
        return results[0]
    keys = [
        r.placement.order if r.placement.order is not None else np.arange(r.placement.channels)
        for r in results
    ]
    order = np.argsort(np.concatenate(keys), kind="stable")
    padding = [
        r.placement.padding
        if r.placement.padding is not None
        else np.zeros(r.placement.channels, dtype=bool)
        for r in results
    ]
    first = results[0].placement
    placement = Placement(
        np.concatenate([r.placement.base for r in results])[order],
        first.offset,
        np.concatenate([r.placement.lane for r in results])[order],
        first.shape,
        first.shift,
        padding=np.concatenate(padding)[order],
    )
    output = np.concatenate([r.output for r in results])[order]
    reads = [rd for r in results for rd in r.reads]
    new_index = np.empty_like(order)
    new_index[order] = np.arange(order.size)
    kernels, biases, offset = [], [], 0
    for r in results:
        for k in r.kernels:
            kernels.append(KernelUnits(k.processors, k.words, new_index[offset + k.channel]))
        for b in r.biases:
            biases.append(BiasUnits(b.group, b.index, new_index[offset + b.channel]))
        offset += r.placement.channels
    return LayerResult(
        results[0].layer, output, placement, reads=reads, kernels=kernels, biases=biases
    )


def _run_passthrough(machine: Machine, prog: LayerProgram) -> LayerResult:
    """Time-slot mode without kernels: each quadrant writes its processors' pooled (and
    element-wise combined) values, four per word, one word per time slot (WPTR_TOFF apart).
    Each input pass is its own step of the write pointer: pass k of pixel x goes to
    x * passes + k (the interleaving multi-pass input uses)."""
    results = []
    for part in prog.parts.values():
        if not part.processors:
            continue
        pooled, reads = read_pooled(machine, prog, part.processors)  # (proc, passes, rows, cols)
        pooled = pooled.astype(np.int64, copy=False)  # (the values written, as a layer's)
        n_proc = len(part.processors)
        out = pooled.transpose(1, 0, 2, 3).reshape(prog.passes * n_proc, *pooled.shape[2:])
        if prog.relu:
            out = ops.activate(out, "relu")
        rows, cols = out.shape[1:]
        wp = part.write
        k, i = np.divmod(np.arange(out.shape[0]), n_proc)
        slot, lane = np.divmod(i, 4)
        step = 1 + wp.inc
        base = wp.base + slot * wp.toff + k * step
        offset = np.arange(rows * cols) * prog.passes * step
        order = k * 64 + np.asarray(part.processors)[i]
        placement = Placement(base, offset, lane, (rows, cols), machine.dmap.write_ptr_shift, order)
        results.append(LayerResult(prog.layer, out, placement, reads=reads))
    return _merge(results)


def _run_depthwise(machine: Machine, prog: LayerProgram) -> LayerResult:
    """Depthwise convolution (POST.dw_en, MAX78002): every processor convolves its own channel
    with its own kernel (one mask step per input pass; with kernel bypass every enabled
    processor, all weights 1) and the results leave in time slots.

    Broadcast mode (LCTRL0.dw_broadcast: output processors = input processors): each output
    stays in its processor's own byte lane and instance, and the bias of local processor i is
    entry 4 x bptr_sad + 4 x (i mod 4) + i div 4 (+ 4 x time slots per input pass: the bias
    pointer steps once per time slot and quad). Else the i-th enabled processor of a quadrant
    writes time slot i: byte lane i mod 4 of the instance (i div 4) x WPTR_TOFF past the write
    pointer; its bias is entry bptr_sad + i (+ the time slots, ONED.tscnt_max + 1, per input
    pass). Pass k moves WPTR_CHOFF.
    """
    results = []
    for g, part in prog.parts.items():
        # kernel bypass: every enabled processor, every weight 1, no kernel memory
        processors = part.processors if prog.bypass else part.masked
        if not processors:
            continue
        readers = part.processors
        pooled, reads = read_pooled(machine, prog, readers)
        x = pooled[[readers.index(p) for p in processors]]  # (proc, passes, rows, cols)
        weights = gather_weights(machine, prog, processors)  # (proc, slots, passes, taps)
        n, passes = len(processors), prog.passes
        kh, kw = prog.kernel
        w = weights[:, 0].reshape(n * passes, 1, kh, kw)
        xin = x.reshape(n * passes, *x.shape[2:])
        if prog.deconv:
            xin = zero_stuff(xin)
        acc = ops.conv2d(xin, w, stride=prog.stride, pad=prog.pad, groups=n * passes)
        local = np.asarray(processors) % 16
        k = np.arange(passes)
        if prog.broadcast:
            # four quads per time slot, four time slots per pass
            bias_index = 4 * part.bias_start + 4 * (local % 4) + local // 4
            per_pass = 4 * prog.timeslots
        else:
            bias_index = part.bias_start + np.arange(n)
            per_pass = prog.timeslots
        # (proc, passes) -> channel order pass-major after the transpose below
        acc = acc.reshape(n, passes, *acc.shape[1:])
        if part.bias_enabled:
            entries = (bias_index[:, None] + k[None, :] * per_pass) % machine.bias.shape[1]
            b = machine.bias[g, entries].astype(np.int8).astype(np.int64)
            acc += (b * 128)[:, :, None, None]  # (acc is this layer's own array)
        out = _finish(prog, acc.transpose(1, 0, 2, 3).reshape(n * passes, *acc.shape[2:]))
        rows, cols = out.shape[1:]
        wp = part.write
        k, i = np.divmod(np.arange(n * passes), n)
        shift = machine.dmap.write_ptr_shift
        word_base = wp.base & ((1 << shift) - 1)
        if prog.broadcast:
            quad = np.asarray(processors)[i] // 4
            base = (quad << shift) + word_base
            lane = np.asarray(processors)[i] % 4
        else:
            base = wp.base + (i // 4) * wp.toff
            lane = i % 4
        step = 1 + wp.inc
        base = base + k * wp.choff
        offset = np.arange(rows * cols) * step
        order = k * 64 + np.asarray(processors)[i]
        placement = Placement(base, offset, lane, (rows, cols), shift, order)
        placement.padding = np.zeros(n * passes, dtype=bool)
        if passes > 1:
            # Processors whose kernel for the last pass is zero, from the last used one on,
            # only pad that pass.
            used = np.flatnonzero(weights[:, 0, passes - 1].any(axis=1))
            first_unused = (used[-1] + 1) if used.size else 0
            placement.padding[(passes - 1) * n + first_unused :] = True
        logged = machine.log is not None and not prog.bypass  # (only the hazard record reads them)
        units = [_kernel_units(prog, processors, depthwise=True)] if logged else []
        biases = []
        if part.bias_enabled:  # channel k x n + i adds entries[i, k]
            biases.append(BiasUnits(g, entries.T.ravel(), np.arange(n * passes)))
        results.append(
            LayerResult(prog.layer, out, placement, reads=reads, kernels=units, biases=biases)
        )
    return _merge(results)
