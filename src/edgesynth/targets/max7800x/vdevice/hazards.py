"""Memory hazards: what the layers read, who wrote it, and what went wrong.

The executor records every access here as it runs (vectorized, one call per layer and
memory), byte by byte for data memory (a word holds four processors' channels). Every output
channel a layer writes gets an id; a channel is *used* when a later layer reads one of its
bytes before it is overwritten (or when the known answer checks it). `analyze` turns the record
into findings:
- clobbered input: a layer reads bytes that a third layer wrote over the output of a layer (or
  the CPU's input) this layer also reads elsewhere: it wanted the data that was overwritten;
- unwritten input: a layer reads data-memory bytes that no one wrote (or FIFO lanes the
  firmware never fills);
- overlapping kernel blocks: two layers read some of the same kernel-memory words for used
  channels (all of one layer's kernels being the other's is the vendor's weight sharing, only
  noted as shared weights);
- overlapping bias blocks: two layers read some of the same bias entries (shared bias: noted);
- unwritten kernels: a used channel reads kernel-memory words the firmware never loaded.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.vdevice.memory import HOST, NEVER
from edgesynth.targets.max7800x.vdevice.record import Computed, Factory, Record

NOTE_KINDS = frozenset({"shared weights", "shared bias"})


@dataclass(frozen=True)
class Hazard:
    """A memory hazard: the layer that reads wrong data and, when known, the culprit."""

    kind: str
    layer: int  # the layer that reads the wrong data
    culprit: int | None  # the layer whose write (or block) caused it, when known
    message: str
    # unwritten input: the data-memory (instances, words) read
    where: tuple[np.ndarray, np.ndarray] | None = field(default=None, compare=False)

    @property
    def is_note(self) -> bool:
        return self.kind in NOTE_KINDS


def _who(writer: int) -> str:
    return "the CPU's input" if writer == HOST else f"layer {writer}'s output"


def _ranges(index: np.ndarray, limit: int = 4) -> str:
    index = np.unique(index)
    if index.size == 0:
        return "-"
    breaks = np.flatnonzero(np.diff(index) != 1)
    starts = np.r_[index[0], index[breaks + 1]]
    ends = np.r_[index[breaks], index[-1]]
    parts = [f"{s}" if s == e else f"{s}-{e}" for s, e in zip(starts, ends, strict=True)]
    more = f" and {len(parts) - limit} more ranges" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


class KernelRead(Record):
    """The kernel words a layer's units read, with the ids of the channels they produce."""

    layer: int
    processors: np.ndarray  # (units,)
    words: np.ndarray  # (units, words per unit)
    channels: np.ndarray  # (units,) channel ids


class AccessLog(Record):
    """Per data-memory byte: the writing layer and channel id, whether it was read since it
    was written, and whose contents it replaced (`clobbered`: the previous other writer); which
    channel ids were used; every kernel word and bias entry read."""

    words: int
    writer: np.ndarray = Computed()
    channel: np.ndarray = Computed()
    consumed: np.ndarray = Computed()
    clobbered: np.ndarray = Computed()
    used: np.ndarray = Factory(lambda: np.zeros(0, dtype=bool))
    padding: np.ndarray = Factory(lambda: np.zeros(0, dtype=bool))
    channel_layer: list[int] = Factory(list)
    found: list[Hazard] = Factory(list)
    kernel_reads: list[KernelRead] = Factory(list)
    kernel_written: np.ndarray | None = None
    bias_reads: list[tuple[int, int, np.ndarray, np.ndarray]] = Factory(list)

    def __post_init__(self) -> None:
        shape = (16, self.words, 4)
        self.writer = np.full(shape, NEVER, dtype=np.int32)
        self.channel = np.full(shape, NEVER, dtype=np.int64)
        self.consumed = np.ones(shape, dtype=bool)
        self.clobbered = np.full(shape, NEVER, dtype=np.int32)

    def new_channels(self, layer: int, count: int, padding: np.ndarray | None = None) -> int:
        """Reserve ids for a layer's output channels; returns the first. Channels that only
        pad a pass are never counted as used."""
        first = self.used.size
        self.used = np.concatenate([self.used, np.zeros(count, dtype=bool)])
        pad = np.zeros(count, dtype=bool) if padding is None else np.asarray(padding, bool)
        self.padding = np.concatenate([self.padding, pad])
        self.channel_layer.extend([layer] * count)
        return first

    def _mark_used(self, ids: np.ndarray) -> None:
        ids = ids[ids >= 0]
        self.used[ids] = True

    # -- data memory -----------------------------------------------------------------------

    def host_written(self, quad: np.ndarray, word: np.ndarray) -> None:
        self.writer[quad, word] = HOST
        self.channel[quad, word] = NEVER
        self.consumed[quad, word] = False
        self.clobbered[quad, word] = NEVER

    def data_read(self, layer: int, quad: np.ndarray, word: np.ndarray, lane: np.ndarray) -> None:
        q, w, b = np.ravel(quad), np.ravel(word), np.ravel(lane)
        writer = self.writer[q, w, b]
        self._mark_used(self.channel[q, w, b])
        never = writer == NEVER
        if never.any():
            count = np.unique((q[never] * self.words + w[never]) * 4 + b[never]).size
            self.found.append(
                Hazard(
                    "unwritten input",
                    layer,
                    None,
                    f"layer {layer} reads {count} data-memory bytes no one wrote (instance "
                    f"{int(q[never][0])}, words {_ranges(w[never])})",
                    where=(q[never], w[never]),
                )
            )
        # A byte whose previous writer is also a producer of this read was overwritten by
        # someone else: the layer wanted the previous data (it reads it elsewhere).
        previous = self.clobbered[q, w, b]
        producers = np.flatnonzero(np.bincount(writer - HOST)) + HOST
        producers = producers[producers != NEVER]
        hit = np.isin(previous, producers) & (previous != writer) & (previous != NEVER)
        if hit.any():
            for v in np.unique(previous[hit]):
                for c in np.unique(writer[hit & (previous == v)]):
                    part = hit & (previous == v) & (writer == c)
                    count = np.unique((q[part] * self.words + w[part]) * 4 + b[part]).size
                    self.found.append(
                        Hazard(
                            "clobbered input",
                            layer,
                            int(c),
                            f"layer {layer} reads {count} bytes of {_who(int(v))} that layer "
                            f"{int(c)} overwrote first (instance {int(q[part][0])}, words "
                            f"{_ranges(w[part])})",
                        )
                    )
        self.consumed[q, w, b] = True

    def stream_read(self, layer: int, channel_ids: np.ndarray) -> None:
        """A streaming layer read bytes of the unwrapped stream view written by these ids."""
        self._mark_used(np.ravel(channel_ids))

    def consume(self, quad: np.ndarray, word: np.ndarray) -> None:
        """A streaming layer's circular buffer is consumed as it streams."""
        ok = word < self.words
        self.consumed[quad[ok], word[ok]] = True

    def data_written(
        self,
        layer: int,
        quad: np.ndarray,
        word: np.ndarray,
        lane: np.ndarray,
        ids: np.ndarray,
    ) -> None:
        """`lane` -1 writes all four bytes (32-bit data)."""
        quad, word, lane, ids = np.ravel(quad), np.ravel(word), np.ravel(lane), np.ravel(ids)
        whole = lane < 0
        if whole.any():
            quad = np.r_[quad[~whole], np.repeat(quad[whole], 4)]
            word = np.r_[word[~whole], np.repeat(word[whole], 4)]
            ids = np.r_[ids[~whole], np.repeat(ids[whole], 4)]
            lane = np.r_[lane[~whole], np.tile(np.arange(4), int(whole.sum()))]
        flat = (quad * self.words + word) * 4 + lane
        writer, channel = self.writer.reshape(-1), self.channel.reshape(-1)
        clobbered, consumed = self.clobbered.reshape(-1), self.consumed.reshape(-1)
        old = writer[flat]
        replaced = (old != NEVER) & (old != layer)
        clobbered[flat[replaced]] = old[replaced]
        consumed[flat] = False
        writer[flat] = layer
        channel[flat] = ids

    # -- kernels and bias ------------------------------------------------------------------

    def kernels_read(
        self, layer: int, processors: np.ndarray, words: np.ndarray, channels: np.ndarray
    ) -> None:
        self.kernel_reads.append(KernelRead(layer, processors, words, channels))

    def bias_read(self, layer: int, group: int, index: np.ndarray, channels: np.ndarray) -> None:
        self.bias_reads.append((layer, group, np.ravel(index), np.ravel(channels)))

    # -- findings --------------------------------------------------------------------------

    def analyze(
        self, last_layer: int | None = None, checked: tuple[np.ndarray, ...] | None = None
    ) -> list[Hazard]:
        """All findings. Channels of `last_layer` count as used where the known answer checks
        them (`checked`: its (instance, word, lane) bytes), or all of them without one."""
        used = self.used.copy()
        if last_layer is not None:
            mine = np.asarray(self.channel_layer) == last_layer
            if checked is None:
                used |= mine
            else:
                ids = self.channel[checked]
                ids = ids[ids >= 0]
                used[ids[mine[ids]]] = True
        used &= ~self.padding
        return self.found + self._kernels(used) + self._shared_bias(used)

    def _kernels(self, used: np.ndarray) -> list[Hazard]:
        found: list[Hazard] = []
        keys_by_layer: list[tuple[int, np.ndarray]] = []
        for read in self.kernel_reads:
            live = used[read.channels]
            keys = read.processors[live, None].astype(np.int64) * 100_000 + read.words[live]
            keys = np.unique(keys)
            keys_by_layer.append((read.layer, keys))
            if self.kernel_written is not None and keys.size:
                p, w = np.divmod(keys, 100_000)
                missing = ~self.kernel_written[p, w]
                if missing.any():
                    first = p[missing][0]
                    found.append(
                        Hazard(
                            "unwritten kernels",
                            read.layer,
                            None,
                            f"layer {read.layer} reads {int(missing.sum())} kernel-memory words "
                            f"the firmware never loaded for outputs that are used (processor "
                            f"{int(first)}, words {_ranges(w[missing & (p == first)])})",
                        )
                    )
        for i, (layer, keys) in enumerate(keys_by_layer):
            for other, other_keys in keys_by_layer[:i]:
                if other == layer:
                    continue
                common = np.intersect1d(keys, other_keys, assume_unique=True)
                if not common.size:
                    continue
                p, w = np.divmod(common, 100_000)
                where = f"processor {int(p[0])}, words {_ranges(w[p == p[0]])}"
                if common.size in (keys.size, other_keys.size):
                    kind, what = "shared weights", "(one layer's kernels are all the other's)"
                else:
                    kind, what = "overlapping kernel blocks", "(their kernel blocks overlap)"
                found.append(
                    Hazard(
                        kind,
                        layer,
                        other,
                        f"layers {other} and {layer} read the same {common.size} kernel-memory "
                        f"words ({where}) {what}",
                    )
                )
        return found

    def _shared_bias(self, used: np.ndarray) -> list[Hazard]:
        found: list[Hazard] = []
        seen: list[tuple[int, int, np.ndarray]] = []
        for layer, group, index, channels in self.bias_reads:
            index = np.unique(index[used[channels]])
            for other, other_group, other_index in seen:
                if other == layer or other_group != group:
                    continue
                common = np.intersect1d(index, other_index)
                if common.size:
                    whole = common.size in (index.size, other_index.size)
                    found.append(
                        Hazard(
                            "shared bias" if whole else "overlapping bias blocks",
                            layer,
                            other,
                            f"layers {other} and {layer} read the same {common.size} bias entries "
                            f"of quadrant {group} ({_ranges(common)})"
                            + (" (one layer's bias is all the other's)" if whole else ""),
                        )
                    )
            seen.append((layer, group, index))
        return found
