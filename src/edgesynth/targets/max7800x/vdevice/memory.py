"""The accelerator's memories: data SRAM, kernel (mask) RAM, bias RAM, and the input FIFOs.

Every model takes its writes as arrays (one region at a time) and stores them with NumPy
indexing; no loop runs per word.

Kernel memory words are 72 bits. We store each as 9 bytes in the order the CPU streams them
(`pos` 0 is the first byte of a kernel: the most significant byte of the first 32-bit word
written in the packed "mexpress" form; the low byte of the first word of a column in the plain
form), which is also the order of a 3x3 kernel's weights (row-major).
"""

from __future__ import annotations

import numpy as np

from edgesynth.targets.max7800x.vdevice.record import Computed, Factory, Record
from edgesynth.targets.max7800x.vdevice.regmap import DeviceMap

NEVER = -1  # writer tag: never written
HOST = -2  # writer tag: written by the CPU (input data)


class DataMemory(Record):
    """16 instances (one per 4 processors) of 32-bit words, with the last writer of each word.

    `writer` holds the layer number that last wrote a word, HOST for the CPU, NEVER otherwise;
    `readers` records, per word, the last layer that read it (for hazard checks).
    """

    words: int
    data: np.ndarray = Computed()
    writer: np.ndarray = Computed()

    def __post_init__(self) -> None:
        self.data = np.zeros((16, self.words), dtype=np.uint32)
        self.writer = np.full((16, self.words), NEVER, dtype=np.int8)  # (layers < 128)

    def host_write(self, quad: np.ndarray, word: np.ndarray, value: np.ndarray) -> None:
        """CPU writes in order: for repeated addresses the last one wins (NumPy assignment)."""
        self.data[quad, word] = value
        self.writer[quad, word] = HOST

    def read_bytes(self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray) -> np.ndarray:
        """Signed bytes at (instance, word, byte lane) index arrays (int64)."""
        return self.signed_bytes(quad, word, lane).astype(np.int64)

    def signed_bytes(self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray) -> np.ndarray:
        """`read_bytes` as int8."""
        return self.bytes[quad, word, lane].view(np.int8)

    def write_bytes(
        self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray, value: np.ndarray, layer: int
    ) -> None:
        """Write signed bytes into their lanes (byte lane k is bits 8k..8k+7 of a word)."""
        self.bytes[quad, word, lane] = np.asarray(value).astype(np.uint8)  # the low byte
        self.writer[quad, word] = layer

    @property
    def bytes(self) -> np.ndarray:
        """(instances, words, 4) little-endian byte view of the words."""
        return self.data.view(np.uint8).reshape(16, self.words, 4)

    def write_bytes_at(
        self, index: np.ndarray, lane: np.ndarray, value: np.ndarray, layer: int
    ) -> None:
        """`write_bytes` at words given as instance x words + word (broadcast with `lane`)."""
        flat = self.data.reshape(-1).view(np.uint8)
        where = index * 4
        where += lane
        flat[where] = np.asarray(value).astype(np.uint8, copy=False)  # the low byte
        self.writer.reshape(-1)[index] = layer

    def write_words_at(self, index: np.ndarray, value: np.ndarray, layer: int) -> None:
        """`write_words` at words given as instance x words + word."""
        self.data.reshape(-1)[index] = np.asarray(value).astype(np.uint32)  # the low 32 bits
        self.writer.reshape(-1)[index] = layer

    def write_words(
        self, quad: np.ndarray, word: np.ndarray, value: np.ndarray, layer: int
    ) -> None:
        self.data[quad, word] = np.asarray(value).astype(np.uint32)  # the low 32 bits
        self.writer[quad, word] = layer


class StreamMemory(Record):
    """What streaming layers wrote, without the circular-buffer wrap: per instance a row of
    words indexed by the unwrapped word address (growing as needed), and, when the run keeps
    the hazard record, per byte the id of the output channel that wrote it. A streaming layer
    reads its input here; the hardware's stream counters make it read each word before the
    producer wraps over it, so the unwrapped view is what it sees. Words never written read 0,
    written by NEVER."""

    data: np.ndarray = Factory(lambda: np.zeros((0, 0), dtype=np.uint32))
    channels: np.ndarray | None = None  # (instances, words, 4) int32 channel ids

    def _ensure(self, quad: np.ndarray, word: np.ndarray, ids: bool) -> None:
        """Room for every (instance, word) given; the channel record too when `ids`."""
        rows, size = self.data.shape
        need_rows = max(rows, int(quad.max(initial=-1)) + 1)
        need = int(word.max(initial=-1)) + 1
        new_size = size if need <= size else max(need, 2 * size)
        if (need_rows, new_size) != (rows, size):
            grown = np.zeros((need_rows, new_size), dtype=np.uint32)
            grown[:rows, :size] = self.data
            self.data = grown
            if self.channels is not None:
                owner = np.full((need_rows, new_size, 4), NEVER, dtype=np.int32)
                owner[:rows, :size] = self.channels
                self.channels = owner
        if ids and self.channels is None:
            self.channels = np.full((*self.data.shape, 4), NEVER, dtype=np.int32)

    def write_bytes(
        self,
        quad: np.ndarray,
        word: np.ndarray,
        lane: np.ndarray,
        value: np.ndarray,
        layer: int,
        ids: np.ndarray | None = None,
    ) -> None:
        """In order: for repeated addresses the last write wins (NumPy assignment)."""
        self._ensure(quad, word, ids is not None)
        view = self.data.view(np.uint8).reshape(*self.data.shape, 4)
        view[quad, word, lane] = np.asarray(value).astype(np.uint8, copy=False)  # the low byte
        if ids is not None and self.channels is not None:
            self.channels[quad, word, lane] = ids

    def write_rows(
        self, quad: np.ndarray, start: np.ndarray, step: int, lane: np.ndarray, value: np.ndarray
    ) -> None:
        """`write_bytes` of (rows, n) uint8 `value`: row r at words start[r] + i x step
        (step >= 1, start >= 0) of instance quad[r], byte lane[r]; one strided copy per row,
        rows in order (a later row wins, as in `write_bytes`), without index arrays."""
        rows, count = value.shape
        if not rows or not count:
            return
        self._ensure(np.asarray(quad), np.asarray(start) + step * (count - 1), False)
        view = self.data.view(np.uint8).reshape(*self.data.shape, 4)
        span = step * count
        rows_at = zip(quad.tolist(), start.tolist(), lane.tolist(), strict=True)
        for r, (q, w, k) in enumerate(rows_at):
            view[q, w : w + span : step, k] = value[r]

    def read_rows(
        self,
        quad: np.ndarray,
        start: np.ndarray,
        step: int,
        lane: np.ndarray,
        count: int,
        out: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """(rows, count) signed bytes (int8): row r from words start[r] + i x step of instance
        quad[r], byte lane[r] (the inverse of `write_rows`), into `out` where given (int8, at
        least rows x count); None where a row reaches outside what was written (`read_bytes`
        then reads it)."""
        size = self.data.shape[1]
        if count == 0 or not _within(quad, self.data.shape[0]):
            return None
        if not _within(start, size) or int(start.max()) + step * (count - 1) >= size:
            return None
        view = self.data.view(np.int8).reshape(*self.data.shape, 4)
        if out is None:
            out = np.empty((start.size, count), dtype=np.int8)
        else:
            out = out.reshape(-1)[: start.size * count].reshape(start.size, count)
        span = step * count
        rows_at = zip(quad.tolist(), start.tolist(), lane.tolist(), strict=True)
        for r, (q, w, k) in enumerate(rows_at):
            out[r] = view[q, w : w + span : step, k]
        return out

    def write_words(
        self,
        quad: np.ndarray,
        word: np.ndarray,
        value: np.ndarray,
        layer: int,
        ids: np.ndarray | None = None,
    ) -> None:
        self._ensure(quad, word, ids is not None)
        self.data[quad, word] = np.asarray(value).astype(np.uint32)  # the low 32 bits
        if ids is not None and self.channels is not None:
            self.channels[quad, word] = np.asarray(ids)[..., None]

    def read_bytes(
        self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray, owners: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """`read_words`, the byte in each lane (signed): indexed in the byte view when every
        (instance, word) is inside what was written, else from the words."""
        rows, size = self.data.shape
        if not (_within(quad, rows) and _within(word, size)):
            values, who = self.read_words(quad, word, lane, owners)
            shift = (8 * np.asarray(lane)).astype(np.uint32)
            return (values >> shift).astype(np.int8).astype(np.int64), who  # the low byte
        view = self.data.view(np.uint8).reshape(rows, size, 4)
        values = view[quad, word, lane].view(np.int8).astype(np.int64)
        if not owners:
            return values, None
        if self.channels is None:
            return values, np.full(values.shape, NEVER, dtype=np.int64)
        return values, self.channels[quad, word, lane].astype(np.int64)

    def read_words(
        self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray, owners: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, and with `owners` the id of the channel that wrote each byte read)."""
        quad, word, lane = np.broadcast_arrays(quad, word, lane)
        rows, size = self.data.shape
        inside = (quad < rows) & (word < size)
        if inside.all():
            out = self.data[quad, word]
            if not owners:
                return out, None
            if self.channels is None:
                return out, np.full(quad.shape, NEVER, dtype=np.int64)
            return out, self.channels[quad, word, lane].astype(np.int64)
        out = np.zeros(quad.shape, dtype=np.uint32)
        q, w = quad[inside], word[inside]
        out[inside] = self.data[q, w]
        if not owners:
            return out, None
        who = np.full(quad.shape, NEVER, dtype=np.int64)
        if self.channels is not None:
            who[inside] = self.channels[q, w, lane[inside]]
        return out, who


def _within(index: np.ndarray, size: int) -> bool:
    index = np.asarray(index)
    return bool(index.size) and int(index.min()) >= 0 and int(index.max()) < size


class KernelMemory(Record):
    """64 processors x words x 9 bytes of mask (kernel) memory."""

    words: int
    data: np.ndarray = Computed()
    written: np.ndarray = Computed()

    def __post_init__(self) -> None:
        self.data = np.zeros((64, self.words, 9), dtype=np.uint8)
        self.written = np.zeros((64, self.words), dtype=bool)

    def store_stream(self, processor: int, start_word: int, stream: np.ndarray) -> None:
        """Packed form: bytes fill 72-bit words from `start_word` on, 9 bytes per word."""
        stream = np.asarray(stream, dtype=np.uint8)
        # one contiguous copy: a processor's words are 9 consecutive bytes each
        n = max(0, min(stream.size, (self.words - start_word) * 9))
        self.data[processor].reshape(-1)[start_word * 9 : start_word * 9 + n] = stream[:n]
        self.written[processor, start_word : start_word + (n + 8) // 9] = True

    def weights(self, processor: int) -> np.ndarray:
        """The processor's kernel memory as one flat byte stream (9 bytes per word)."""
        return self.data[processor].reshape(-1)


def mexpress_blocks(processor: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split packed kernel writes into "set address" writes and data writes.

    The packed loader loads the hardware's address counter with a byte store at
    `processor base + 4 x column + 1` (recorded as a word write at `+ 4 x column`) and then
    streams 32-bit words, either from that same address on (the vendor's current loader) or
    from the processor's base address (its older loader). So a write is a set-address write
    when the next write goes to the same processor and either repeats its address (a data
    stream never writes one address twice in a row) or restarts at offset 0 (unless this write
    continues a run of consecutive words and the write at 0 is itself a set). Returns
    (is_set, run) where `run` numbers the runs of data writes (-1 for set writes); each run is
    contiguous in the trace.
    """
    is_set, starts = mexpress_runs(processor, offset)
    run = np.where(~is_set, np.cumsum(starts) - 1, -1)
    return is_set, run


def mexpress_runs(processor: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`mexpress_blocks` as (is_set, starts): `starts` marks the first write of each run."""
    n = processor.size

    def ahead(k: int, test: np.ndarray) -> np.ndarray:
        """`test` of each write with the write k later (False where there is none)."""
        out = np.zeros(n, dtype=bool)
        out[: max(0, n - k)] = test
        return out

    same_next = ahead(1, processor[1:] == processor[:-1])  # the next goes to this processor
    continues = np.zeros(n, dtype=bool)  # this write is the word after the one before
    continues[1:] = same_next[:-1] & (offset[1:] == offset[:-1] + 4)
    same_next2 = ahead(1, same_next[1:]) & same_next  # the next two go to this processor
    # data@X, set@X, data@X: only the last write before the stream resumes is the set.
    repeats = ahead(1, offset[1:] == offset[:-1]) & ~(
        same_next2 & ahead(2, offset[2:] == offset[:-2])
    )
    # A write followed by a restart at offset 0 is a set (the older loader), unless it
    # continues a run and the write at 0 is itself a set (set@0, data@0): then it ends its run.
    # A set may continue a run by chance: the previous block's data ends where it points.
    next_is_set_at_0 = same_next2 & ahead(2, offset[2:] == 0)
    is_set = same_next & (repeats | (ahead(1, offset[1:] == 0) & ~(continues & next_is_set_at_0)))
    data = ~is_set
    after_data = np.zeros(n, dtype=bool)
    after_data[1:] = data[:-1]
    return is_set, data & ~(continues & after_data)


class Fifos(Record):
    """The four standard FIFOs (one per quadrant) and the RISC-V fast FIFO: ordered words."""

    standard: list[np.ndarray] = Factory(lambda: [np.zeros(0, np.uint32)] * 4)
    fast: np.ndarray = Factory(lambda: np.zeros(0, np.uint32))

    @property
    def used(self) -> bool:
        return self.fast.size > 0 or any(s.size for s in self.standard)


def new_memories(dmap: DeviceMap) -> tuple[DataMemory, KernelMemory, np.ndarray]:
    """Empty data, kernel and bias memories for a device."""
    return (
        DataMemory(words=dmap.sram_quad_stride // 4),
        KernelMemory(words=dmap.mram_proc_stride // 16),
        np.zeros((4, dmap.bias_words), dtype=np.uint8),
    )
