"""Kernel memory: where each layer's kernels go (allocation) and the bytes of every kernel word.

Every processor has its own kernel memory of 72-bit words ("columns"; one 3x3 kernel of 8-bit
weights each). A layer occupies the same columns in every processor it enables: the processor of
input channel `c` holds the kernels from channel `c` to every output channel, in the order of the
output processors, once per input and output pass. Kernels smaller than 8 bits share a byte
position: with q = 8 / bits, q consecutive output channels are packed into one byte.

Allocation follows the vendor's greedy allocator: layers that enable all 64 processors first,
then the others in layer order; each takes the lowest run of columns free in all its processors
(on the MAX78002, processors with the larger memory try its top end first). A calcx4 layer's
kernels are booked in that run but written to the four quarters of the memory
(`calcx4_columns`); the vendor checks only the booked columns (`compat.kernel_allocation`,
`edgesynth izer`), edgesynth's own path also the columns written.

Each processor receives a stream of bytes, nine per column, filled from byte 8 down to byte 0;
the stream is cut where the output map has gaps (see `compat.kernel_packing`). The bytes of a
whole layer are computed at once with NumPy; only the slot bookkeeping (one entry per output
kernel position) is a Python loop.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.compat.kernel_allocation import unchecked_calcx4_offset
from edgesynth.targets.max7800x.compat.kernel_packing import (
    Slots,
    flatten_rows,
    initial_padding_bytes,
    output_slots,
    pad_bytes_when_no_input,
    unit_has_input,
)
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer, ffs, fls, popcount

FREE = -1
FULL_MAP = (1 << 64) - 1


@dataclass
class KernelLayout:
    """One layer's place in kernel memory (the plan's "Kernel offset/length/count")."""

    offset: int = 0  # first column
    length: int = 0  # columns reserved
    count: int = 0  # kernels (output channels x passes, incl. alignment padding)
    ochan: int = 0  # output channel count for the OCHAN register (MAX78002)


@dataclass(frozen=True)
class KernelOptions:
    """The options kernel-memory allocation reads (fields named after the vendor's options)."""

    weight_start: int = 0  # --weight-start
    legacy_kernels: bool = False  # --legacy-kernels
    fast_fifo_quad: bool = False  # --fast-fifo-quad: layer 0 spreads over 4 quadrants
    zero_sram: bool = False  # --zero-sram: all-zero kernels are not written
    write_for_write: bool = True  # the vendor's calcx4 offsets, unchecked (edgesynth izer)


@dataclass
class KernelMemory:
    """Every processor's kernel memory: owner layer and 9 bytes per column."""

    owner: np.ndarray  # (processors, columns) int32, FREE where unused
    data: np.ndarray  # (processors, columns, 9) uint8
    layouts: dict[int, KernelLayout] = field(default_factory=dict)
    calcx4: dict[int, tuple[int, int]] = field(default_factory=dict)  # layer -> (offset, count)
    # layer -> the processors whose non-zero kernels the vendor's packing drops (izer alone;
    # `compat.kernel_packing.unit_has_input`)
    dropped: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class _Stream:
    """One layer's byte stream for each of its processors, before placement."""

    values: np.ndarray  # (P, units, width) uint8: the bytes of each unit
    lengths: np.ndarray  # (P, units): bytes each unit contributes
    unit_slot: np.ndarray  # (units,): the slot each unit belongs to
    dropped: np.ndarray | None = None  # (P,) bool: non-zero kernels the vendor leaves out


def _misplaced(
    rows: np.ndarray,
    koffs: np.ndarray,
    lost: np.ndarray,
    mask: int,
    short: np.ndarray,
    values: np.ndarray,
) -> np.ndarray:
    """(P,) bool: processors whose kernels the vendor's packing leaves out (`lost`, (P,S,IE,q),
    non-zero) or moves (a `short` unit, (P,S,IE), before a unit with non-zero bytes)."""
    weights = rows[np.where(lost, koffs, 0)] & mask  # (P,S,IE,q,ksize)
    left_out = (lost[..., None] & (weights != 0)).any(axis=(1, 2, 3, 4))
    n = short.shape[0]
    short, written = short.reshape(n, -1), values.reshape(n, short.size // n, -1).any(axis=2)
    units = np.arange(short.shape[1])
    first_short = np.where(short, units, units.size).min(axis=1)
    last_written = np.where(written, units, -1).max(axis=1)
    return left_out | (first_short < last_written)


class KernelMemoryExhausted(EdgesynthError):
    """A layer's kernels do not fit: `overflow` columns past the end of `processor`'s memory."""

    def __init__(self, *, processor: int, overflow: int, message: str, **where: object) -> None:
        super().__init__(message, **where)
        self.processor = processor
        self.overflow = overflow


class KernelClash(EdgesynthError):
    """The vendor's allocator gave a layer columns another layer already holds."""


def calcx4_count(h: HwLayer) -> int:
    """The kernel words of a calcx4 layer, a quarter of them (rounded up) in each quarter."""
    kh, kw = h.hw_kernel_size
    return h.in_expand * h.output_chan * 9 * h.bits // (kh * kw * 8)


def calcx4_columns(cols: np.ndarray, start: int, count: int, chip: Chip) -> np.ndarray:
    """The kernel words a calcx4 layer booked at columns `cols` (from `start`, `count` words)
    is written to: each quarter of the layer goes to its own quarter of the memory."""
    small, large = chip.regs.mask_width_small, chip.regs.mask_width_large
    mem, rem = np.divmod(cols - start, (count + 3) // 4)
    base = start // 4
    low = mem * (small // 4) + rem + base
    high = mem * ((large - small) // 4) + rem + small + base
    return np.where(cols < small, low, high)


class KernelPlanner:
    def __init__(self, chip: Chip, opts: KernelOptions) -> None:
        self.chip = chip
        self.opts = opts
        width = chip.regs.mask_width_large
        self.owner = np.full((chip.max_proc, width), FREE, dtype=np.int32)
        self.written = np.full((chip.max_proc, width), FREE, dtype=np.int32)  # columns written
        self.used = np.zeros((chip.max_proc, width), dtype=np.int16)
        self.data = np.zeros((chip.max_proc, width, 9), dtype=np.uint8)
        self.widths = np.array([chip.mask_width(p) for p in range(chip.max_proc)])
        self.layouts: dict[int, KernelLayout] = {}
        self.dropped: dict[int, list[int]] = {}

    # -- errors -------------------------------------------------------------------------------
    def _exhausted(self, h: HwLayer, p: int, offs: int, length: int) -> EdgesynthError:
        return KernelMemoryExhausted(
            processor=p,
            overflow=offs + length - self.chip.mask_width(p),
            message=f"kernel memory exhausted at processor {p}: the layer needs {length} kernel "
            f"words from column {offs} (0x{offs:04x}), but the processor holds "
            f"{self.chip.mask_width(p)}. Use fewer or smaller layers (fewer channels, smaller "
            "kernels, fewer weight bits) or spread the layers over other processors.",
            layer=h.index,
            layer_name=h.layer.spec.name,
        )

    def _fits(self, h: HwLayer, p: int, offs: int, length: int, reverse: bool, error: bool) -> bool:
        if (reverse and offs < 0) or (not reverse and offs + length > self.chip.mask_width(p)):
            if error:
                raise self._exhausted(h, p, offs, length)
            return False
        return True

    # -- allocation ---------------------------------------------------------------------------
    def _instance_mask(self, offs: int) -> int:
        r = self.chip.regs
        if offs + 1 >= r.mask_width_small:
            return r.mask_instance_small - 1
        return r.mask_instance_large - 1

    def _search(
        self, h: HwLayer, offs: int, procs: list[int], length: int, reverse: bool, error: bool
    ) -> int:
        """The first column (searching up, or down from the top) free for `length` columns in
        every processor of `procs`; -1 when there is none."""
        owner = self.owner
        step = -4 if reverse else 4
        while owner[procs[0], offs] != FREE:
            offs += step
            if not self._fits(h, procs[0], offs, length, reverse, error):
                return -1
        one_instance = self.chip.device.name == "MAX78002" and h.groups > 1
        i = 0
        while i < len(procs):
            p = procs[i]
            if not reverse:
                if one_instance:  # a depthwise layer's kernels stay in one memory instance
                    mm = self._instance_mask(offs + 1)
                    if (offs + 1) & ~mm != (offs + length) & ~mm:
                        offs = ((offs + mm) & ~mm) - 1
                    mm = self._instance_mask(offs + 1)
                    if (offs + 1) & ~mm != (offs + length) & ~mm:
                        return -1
                window = np.arange(offs, offs + length)
            else:
                if one_instance:
                    mm = self._instance_mask(offs - 1)
                    if (offs - 1) & ~mm != (offs - length) & ~mm:
                        offs &= ~mm
                window = np.arange(offs, offs - length, -1)
            taken = np.flatnonzero(owner[p, window % owner.shape[1]] != FREE)
            if taken.size:
                col = int(window[taken[0]])
                offs = (col + 4) & ~3 if not reverse else (col - 1) & ~3
                if not self._fits(h, p, offs, length, False, error):
                    return -1
                i = 0
                continue
            i += 1
        return offs

    def _allocate(
        self, h: HwLayer, procs: list[int], length: int, mixed_x4: bool, quad: bool
    ) -> int:
        if self.opts.write_for_write:
            return self._vendor_offset(h, procs, length, mixed_x4, error=True)
        offs = self._vendor_offset(h, procs, length, mixed_x4, error=False)
        if offs >= 0 and self._free(h, procs, offs, length, quad):
            return offs
        return self._lowest_free(h, procs, length, quad)

    def _vendor_offset(
        self, h: HwLayer, procs: list[int], length: int, mixed_x4: bool, error: bool
    ) -> int:
        """The vendor allocator's first column for the layer (-1 when it runs out of memory
        and `error` is false)."""
        regs = self.chip.regs
        found = -1
        if not mixed_x4:
            extended = regs.mask_width_large > regs.mask_width_small and all(
                self.chip.mask_large(p) for p in procs
            )
            if extended and (h.groups == 1 or length <= regs.mask_instance_small):
                found = self._search(h, regs.mask_width_large - 1, procs, length, True, False)
        if found == -1:
            offs = self._search(h, (self.opts.weight_start + 3) & ~3, procs, length, False, error)
            if offs == -1:
                return -1
            if h.calcx4:
                offs = unchecked_calcx4_offset(offs, mixed_x4)
            offs = (offs + 3) & ~3
        else:
            offs = (found - (length - 1)) & ~3
        if not self._fits(h, procs[-1], offs, length, False, error):
            return -1
        return offs

    def _lowest_free(self, h: HwLayer, procs: list[int], length: int, quad: bool) -> int:
        """The lowest column from which the layer's booked and written columns are free."""
        offs = (self.opts.weight_start + 3) & ~3
        while True:
            self._fits(h, procs[0], offs, length, False, True)
            offs = self._search(h, offs, procs, length, False, True)
            if self._free(h, procs, offs, length, quad):
                return offs
            offs += 4

    def _free(self, h: HwLayer, procs: list[int], offs: int, length: int, quad: bool) -> bool:
        """Whether the columns the layer would book from `offs` are free where booked and
        where written (the first layer of --fast-fifo-quad books them in every quadrant)."""
        booked = np.asarray(procs)
        if quad:
            booked = (booked[:, None] + np.arange(4) * self.chip.per_group).reshape(-1)
        if (offs + length > self.widths[booked]).any():
            return False
        cols = np.arange(offs, offs + length)
        if (self.owner[np.ix_(booked, cols)] != FREE).any():
            return False
        if h.calcx4:
            cols = calcx4_columns(cols, offs, calcx4_count(h), self.chip)
        pp, pc = np.repeat(booked, cols.size), np.tile(cols, booked.size)
        if (pc >= self.widths[pp]).any():
            return False
        return bool((self.written[pp, pc] == FREE).all())

    def _mark_written(self, h: HwLayer, offs: int) -> None:
        """Record the columns the layer's kernels are written to; a clash is a defect."""
        procs, cols = np.nonzero(self.owner == h.index)
        if h.calcx4:
            cols = calcx4_columns(cols, offs, calcx4_count(h), self.chip)
        keep = cols < self.widths[procs]
        procs, cols = procs[keep], cols[keep]
        if not self.opts.write_for_write:
            taken = self.written[procs, cols]
            clash = np.flatnonzero((taken != FREE) & (taken != h.index))
            if clash.size:
                k = int(clash[0])
                raise KernelClash(
                    f"the kernels would be written over layer {int(taken[k])}'s in processor "
                    f"{int(procs[k])}'s kernel word {int(cols[k])} (a defect in edgesynth's "
                    "kernel allocator; please report it with this YAML).",
                    layer=h.index,
                    layer_name=h.layer.spec.name,
                )
        self.written[procs, cols] = h.index

    # -- the byte stream ----------------------------------------------------------------------
    def _conv_stream(self, h: HwLayer, rows: np.ndarray, slots: Slots, q: int, n: int) -> _Stream:
        """Bytes of a (non-flattened) layer: one unit per slot and input pass, `ksize` bytes of
        q packed kernels (kernel `idx` of a slot: output channel `m + idx // passes`, pass
        `idx % passes`). The vendor writes `ksize // q` zeros for a unit whose own pass number
        has no such input channel (`compat.kernel_packing.unit_has_input`); edgesynth's own
        path writes every unit whole, zero where a kernel's pass has no such input channel."""
        bits, in_exp, in_chan, thresh = h.bits, h.in_expand, h.input_chan, h.in_expand_thresh
        ksize = rows.shape[1]
        n_rows = rows.shape[0]
        ch = np.arange(n)[:, None, None]  # (P,1,1)
        m = slots.m[None, :, None]  # (1,S,1)
        ie = np.arange(in_exp)[None, None, :]  # (1,1,IE)
        src = ch + m * in_chan  # (P,S,1)
        has_slot = src < n_rows  # (P,S,1)
        idx = np.arange(q)[None, None, None, :] + ie[..., None] * q  # (1,1,IE,q)
        koffs = src[..., None] + (idx % in_exp) * thresh + (idx // in_exp) * in_chan
        mask = (1 << bits) - 1
        own = (m[..., None] < h.output_chan) & (koffs < n_rows) & has_slot[..., None]
        own &= unit_has_input(idx % in_exp, ch[..., None], thresh, in_chan)  # by its own pass
        has_input = np.broadcast_to(has_slot, (n, m.shape[1], in_exp))
        valid, lost = own, None
        if self.opts.write_for_write:  # the vendor's: whole units by the unit's number
            has_input = unit_has_input(ie, ch, thresh, in_chan) & has_slot  # (P,S,IE)
            valid = (m[..., None] < h.output_chan) & (koffs < n_rows) & has_input[..., None]
            lost = own & ~has_input[..., None]
        vals = rows[np.where(valid, koffs, 0)] & mask  # (P,S,IE,q,ksize)
        vals = np.where(valid[..., None], vals, 0)
        shifts = (np.arange(q) * bits)[None, None, None, :, None]
        packed = np.bitwise_or.reduce(vals << shifts, axis=3)  # (P,S,IE,ksize)
        values = packed[..., ::-1].astype(np.uint8)  # the vendor writes the last tap first
        pad = pad_bytes_when_no_input(ksize, q)
        lengths = np.where(has_input, ksize, pad)
        n_slots = slots.m.size
        dropped = None
        if lost is not None and lost.any():
            dropped = _misplaced(rows, koffs, lost, mask, lengths < ksize, values)
        return _Stream(
            values=values.reshape(n, n_slots * in_exp, ksize),
            lengths=lengths.reshape(n, n_slots * in_exp),
            unit_slot=np.repeat(np.arange(n_slots), in_exp),
            dropped=dropped,
        )

    def _flatten_stream(
        self, h: HwLayer, rows: np.ndarray, slots: Slots, q: int, n: int, ksize: int
    ) -> _Stream:
        """Bytes of a flattened layer: per slot, the rows of q output channels back to back,
        q consecutive weights per byte."""
        bits, thresh = h.bits, h.in_expand_thresh
        n_rows, row_len = rows.shape
        in_ch = thresh * q
        ch = np.arange(n)[:, None]  # (P,1)
        m = slots.m[None, :]  # (1,S)
        src = ch + m * in_ch  # (P,S)
        has_input = (ch < in_ch) & (src < n_rows)
        koffs = src[..., None] + np.arange(q) * thresh  # (P,S,q)
        valid = has_input[..., None] & (m[..., None] < h.output_chan) & (koffs < n_rows)
        vals = rows[np.where(valid, koffs, 0)] & ((1 << bits) - 1)  # (P,S,q,L)
        vals = np.where(valid[..., None], vals, 0)
        seq = vals.reshape(n, m.shape[1], q * row_len)
        groups = seq.reshape(n, m.shape[1], row_len, q)
        packed = np.bitwise_or.reduce(groups << (np.arange(q) * bits), axis=3)  # (P,S,L)
        n_valid = valid.sum(axis=2)
        lengths = np.where(
            has_input, -(-(n_valid * row_len) // q), pad_bytes_when_no_input(ksize, q)
        )
        return _Stream(
            values=packed.astype(np.uint8),
            lengths=lengths,
            unit_slot=np.arange(m.shape[1]),
        )

    # -- placement ----------------------------------------------------------------------------
    def place(self, h: HwLayer, quad: bool, mixed_x4: bool) -> None:
        chip = self.chip
        q = 8 // h.bits
        kh, kw = h.hw_kernel_size
        ksize = kh * kw
        proc_map = h.processor_map & ((1 << chip.per_group) - 1) if quad else h.processor_map
        procs = [p for p in range(chip.max_proc) if proc_map >> p & 1]
        out_map = h.output_processor_map
        first_out = ffs(out_map)
        start_col = first_out % chip.shared
        if h.out_expand > 1:
            first_out -= start_col

        per_row = 1
        if h.flatten:
            rows, per_row = flatten_rows(
                h.kernel, h.output_chan, h.in_expand, h.in_expand_thresh, ksize
            )
            in_exp = 1
        else:
            rows = h.kernel.reshape(h.kernel.shape[0], -1)
            if h.calcx4:
                rows = rows.reshape(h.output_chan // 4, 4, -1).transpose(1, 0, 2)
                rows = rows.reshape(h.kernel.shape[0], -1)
            elif quad and q != 1:
                rows = rows.reshape(h.output_chan // (4 * q), q, 4, h.input_chan, ksize)
                rows = rows.transpose(0, 2, 1, 3, 4).reshape(h.kernel.shape[0], -1)
            in_exp = h.in_expand
        if h.quantization == -1:
            rows = rows.clip(-1, 0)

        span = 1 + fls(out_map) - first_out
        if h.groups == 1:
            kc = span * h.out_expand * in_exp
            count = ochan = kc + start_col * h.out_expand * in_exp
        else:
            kc = in_exp
            count = kc + start_col * in_exp
            ochan = span * in_exp + start_col * in_exp
        if h.flatten and not self.opts.legacy_kernels:
            unused = (h.out_expand * popcount(out_map) - h.output_chan) * per_row
            kc = kc * per_row - unused
            count = count * per_row - unused
            ochan = count
        res = (kc % q) * ksize * (q - 1)
        length = (kc * ksize * h.bits + res + 71) // 72
        if quad:
            length, count, ochan = (length + 3) // 4, (count + 3) // 4, (ochan + 3) // 4

        offs = self._allocate(h, procs, length, mixed_x4, quad)
        layout = KernelLayout(offset=offs, length=length, count=count, ochan=ochan)
        self.layouts[h.index] = layout

        slots = output_slots(out_map, q, h.out_expand_thresh, h.out_expand, h.flatten, h.groups > 1)
        if h.flatten:
            stream = self._flatten_stream(h, rows, slots, q, len(procs), ksize)
        else:
            stream = self._conv_stream(h, rows, slots, q, len(procs))
            if stream.dropped is not None and stream.dropped.any():
                self.dropped[h.index] = [p for p, d in zip(procs, stream.dropped, strict=True) if d]
        col0, leftover = divmod(start_col * ksize * in_exp, 9)
        pad0 = initial_padding_bytes(leftover, q)
        self._write_stream(h, layout, procs, stream, slots, col0, pad0, start_col, quad)
        self._mark_written(h, offs)

    def _write_stream(
        self,
        h: HwLayer,
        layout: KernelLayout,
        procs: list[int],
        stream: _Stream,
        slots: Slots,
        col0: int,
        pad0: int,
        start_col: int,
        quad: bool,
    ) -> None:
        """Place every processor's byte stream in its columns.

        Bytes fill a column from byte 8 down; a skip (gap in the output map) moves to a new
        column even when the current one is partial. Between skips the stream is contiguous, so
        a segment of B bytes starting at column c ends at column c + B // 9.
        """
        n = len(procs)
        lengths = stream.lengths
        n_units = lengths.shape[1]
        # Segments: a new one starts at each slot with skips; segment 0 starts with `pad0`.
        seg_of_slot = np.cumsum(slots.skips > 0)
        n_seg = int(seg_of_slot[-1]) + 1 if seg_of_slot.size else 1
        seg_skips = np.zeros(n_seg, dtype=np.int64)
        starts = np.flatnonzero(slots.skips > 0)
        seg_skips[seg_of_slot[starts]] = slots.skips[starts]
        seg_of_unit = seg_of_slot[stream.unit_slot]

        seg_bytes = np.zeros((n, n_seg), dtype=np.int64)
        for s in range(n_seg):
            seg_bytes[:, s] = lengths[:, seg_of_unit == s].sum(axis=1)
        seg_bytes[:, 0] += pad0
        seg_col = np.empty((n, n_seg), dtype=np.int64)
        seg_col[:, 0] = col0
        for s in range(1, n_seg):
            seg_col[:, s] = seg_col[:, s - 1] + seg_bytes[:, s - 1] // 9 + seg_skips[s]
        seg_first = np.cumsum(seg_bytes, axis=1) - seg_bytes  # stream position of each segment

        # Every byte: its processor, stream position, segment.
        width = stream.values.shape[2]
        take = np.arange(width)[None, None, :] < lengths[:, :, None]
        byte_values = stream.values[take]
        per_proc = lengths.sum(axis=1)
        byte_proc = np.repeat(np.arange(n), per_proc)
        byte_unit = np.repeat(np.tile(np.arange(n_units), n), lengths.reshape(-1))
        proc_start = np.concatenate(([0], np.cumsum(per_proc)[:-1]))
        position = np.arange(byte_values.size) - np.repeat(proc_start, per_proc) + pad0
        byte_seg = seg_of_unit[byte_unit]
        in_seg = position - seg_first[byte_proc, byte_seg]
        logical = seg_col[byte_proc, byte_seg] + in_seg // 9
        byte_slot = 8 - in_seg % 9

        proc_ids = np.asarray(procs)
        pp, pc = self._physical(proc_ids[byte_proc], logical, layout, quad)
        self._claim(h, pp, pc)
        self.data[pp, pc, byte_slot] = byte_values
        self._count(pp, pc)
        if pad0:  # the initial zero bytes only mark their columns as used
            cols = col0 + np.arange(pad0) // 9
            pp, pc = self._physical(np.repeat(proc_ids, pad0), np.tile(cols, n), layout, quad)
            self._claim(h, pp, pc)
            self._count(pp, pc)

        # Close each stream: step over a partial column, then zero columns up to the length.
        end_col = seg_col[:, -1] + seg_bytes[:, -1] // 9
        for i, p in enumerate(procs):
            col = int(end_col[i])
            if quad:
                col = (col - start_col + 3) // 4 + start_col
            qp, qc = self._physical(np.array([p]), np.array([col]), layout, quad)
            if layout.offset + col < self.chip.mask_width(p) and self.used[qp[0], qc[0]] > 0:
                col += 1
            if col - start_col < layout.length:
                cols = np.arange(col, layout.length + start_col)
                qp, qc = self._physical(np.full(cols.size, p), cols, layout, quad)
                self._claim(h, qp, qc)
                self.used[qp, qc] = 9
                col = layout.length + start_col
            if h.flatten:
                layout.length = col  # the vendor reports (and pads to) the last stream's end

    def _count(self, procs: np.ndarray, cols: np.ndarray) -> None:
        """Add one used byte per (processor, column) pair (pairs may repeat)."""
        flat = self.used.reshape(-1)
        flat += np.bincount(procs * self.used.shape[1] + cols, minlength=flat.size).astype(
            flat.dtype
        )

    def _physical(
        self, procs: np.ndarray, cols: np.ndarray, layout: KernelLayout, quad: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Logical (processor, column) of a stream -> physical (processor, column)."""
        if quad:  # layer 0 of --fast-fifo-quad deals its columns out to the 4 quadrants
            procs = procs + (cols % 4) * self.chip.per_group
            cols = cols // 4
        return procs, layout.offset + cols

    def _claim(self, h: HwLayer, procs: np.ndarray, cols: np.ndarray) -> None:
        if procs.size == 0:
            return
        over = np.flatnonzero(cols >= self.widths[procs])
        if over.size:
            k = int(over[0])
            raise self._exhausted(h, int(procs[k]), int(cols[k]), 1)
        owners = self.owner[procs, cols]
        clash = (owners != FREE) & (owners != h.index)
        if clash.any():
            k = int(np.flatnonzero(clash)[0])
            raise KernelClash(
                f"the kernels would share processor {int(procs[k])}'s kernel word "
                f"{int(cols[k])} with layer {int(owners[k])} (the vendor's allocator reserves "
                "too little room for this layer's unaligned output processors); align the "
                "first output processor to a multiple of 4.",
                layer=h.index,
                layer_name=h.layer.spec.name,
            )
        self.owner[procs, cols] = h.index


def plan_kernels(hw: list[HwLayer], chip: Chip, opts: KernelOptions) -> KernelMemory:
    """Allocate and fill kernel memory for every layer with weights of its own."""
    planner = KernelPlanner(chip, opts)
    full = [h for h in hw if h.processor_map == FULL_MAP]
    rest = [h for h in hw if h.processor_map != FULL_MAP]
    calcx4 = {h.index: h.calcx4 for h in hw}
    for h in full + rest:
        if h.hw_operator == "none" or h.bypass or h.kernel is None or h.kernel_source != h.index:
            continue
        quad = opts.fast_fifo_quad and h.index == 0
        mixed_x4 = h.index > 0 and h.calcx4 and not calcx4.get(h.index - 1, False)
        planner.place(h, quad, mixed_x4)
    memory = KernelMemory(
        owner=planner.owner, data=planner.data, layouts=planner.layouts, dropped=planner.dropped
    )
    for h in hw:
        if h.kernel_source != h.index and h.kernel_source in planner.layouts:
            memory.layouts[h.index] = planner.layouts[h.kernel_source]
    for h in hw:
        if h.calcx4 and h.index in memory.layouts:
            memory.calcx4[h.index] = (memory.layouts[h.index].offset, calcx4_count(h))
    return memory
