"""Memory hazards: what the layers read, who wrote it, and what went wrong.

The executor records every access here as it runs (vectorized, one call per layer and
memory), byte by byte for data memory (a word holds four processors' channels). `analyze`
turns the record into findings:
- clobbered input: a layer reads bytes whose previous contents (another layer's output or the
  CPU's input) were overwritten by a third layer before anyone read them, while most of what
  it reads comes from elsewhere (its producer);
- unwritten input: a layer reads data-memory bytes that no one wrote;
- overlapping kernel blocks: two layers read some of the same kernel-memory words for outputs
  that are used (a layer whose kernels all coincide with another layer's is sharing weights,
  which the vendor's tool does for identical kernels, and is only noted);
- overlapping bias blocks: two layers read some of the same bias entries (all of one layer's
  entries: shared bias, only noted);
- unwritten kernels: a used output reads kernel-memory words the firmware never loaded.
An output slot is used when a later layer reads a byte of it before it is overwritten, or
when it belongs to the last layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgesynth.targets.max7800x.vdevice.memory import HOST, NEVER

STREAM_WORDS = 1 << 24  # key stride of an instance in the unwrapped stream view


@dataclass(frozen=True)
class Hazard:
    kind: str
    layer: int  # the layer that reads the wrong data
    culprit: int | None  # the layer whose write (or block) caused it, when known
    message: str


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


@dataclass
class KernelUse:
    """Output unit u reads kernel words `words[u]` in every processor (or only in processor
    `processors[u]` when `one_to_one`) and writes data-memory bytes `outputs[u]`."""

    layer: int
    processors: np.ndarray
    words: np.ndarray  # (units, words per unit)
    outputs: np.ndarray  # (units, bytes) byte keys
    streamed: np.ndarray  # (units, bytes) byte keys in the unwrapped stream view
    one_to_one: bool


@dataclass
class AccessLog:
    """Byte-level record of data memory (writer, read since written, whose unread bytes were
    overwritten), the bytes each layer's output had read, and every kernel word and bias
    entry read."""

    words: int
    writer: np.ndarray = field(init=False)
    consumed: np.ndarray = field(init=False)
    clobbered: np.ndarray = field(init=False)
    used: dict[int, list[np.ndarray]] = field(default_factory=dict)  # layer -> byte keys read
    used_stream: dict[int, list[np.ndarray]] = field(default_factory=dict)
    found: list[Hazard] = field(default_factory=list)
    kernel_uses: list[KernelUse] = field(default_factory=list)
    kernel_written: np.ndarray | None = None
    bias_reads: list[tuple[int, int, np.ndarray]] = field(default_factory=list)

    def __post_init__(self) -> None:
        shape = (16, self.words, 4)
        self.writer = np.full(shape, NEVER, dtype=np.int32)
        self.consumed = np.ones(shape, dtype=bool)
        self.clobbered = np.full(shape, NEVER, dtype=np.int32)

    def key(self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray) -> np.ndarray:
        return (np.asarray(quad, dtype=np.int64) * self.words + word) * 4 + lane

    # -- data memory -----------------------------------------------------------------------

    def host_written(self, quad: np.ndarray, word: np.ndarray) -> None:
        self.writer[quad, word] = HOST
        self.consumed[quad, word] = False
        self.clobbered[quad, word] = NEVER

    def data_read(self, layer: int, quad: np.ndarray, word: np.ndarray, lane: np.ndarray) -> None:
        keys = np.unique(self.key(quad, word, lane))
        q, rest = np.divmod(keys, self.words * 4)
        w, b = np.divmod(rest, 4)
        writer = self.writer[q, w, b]
        never = writer == NEVER
        if never.any():
            self.found.append(
                Hazard(
                    "unwritten input",
                    layer,
                    None,
                    f"layer {layer} reads {int(never.sum())} data-memory bytes no one wrote "
                    f"(instance {int(q[never][0])}, words {_ranges(w[never])})",
                )
            )
        victim = self.clobbered[q, w, b]
        producers, counts = np.unique(writer, return_counts=True)
        main = producers[np.argmax(counts)] if producers.size else NEVER
        for v in np.unique(victim[victim != NEVER]):
            # Reading the main producer's data is what the layer wants, even where it
            # replaced unread bytes (e.g. the unused byte lane of the CPU's input words).
            for c in np.unique(writer[(victim == v) & (writer != main)]):
                part = (victim == v) & (writer == c)
                self.found.append(
                    Hazard(
                        "clobbered input",
                        layer,
                        int(c),
                        f"layer {layer} reads {int(part.sum())} bytes where layer {int(c)} "
                        f"overwrote {_who(int(v))} before it was read (instance "
                        f"{int(q[part][0])}, words {_ranges(w[part])})",
                    )
                )
        for producer in np.unique(writer[writer >= 0]):
            self.used.setdefault(int(producer), []).append(keys[writer == producer])
        self.consumed[q, w, b] = True
        self.clobbered[q, w, b] = NEVER

    def stream_key(self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray) -> np.ndarray:
        return (np.asarray(quad, dtype=np.int64) * STREAM_WORDS + word) * 4 + lane

    def stream_read(
        self, quad: np.ndarray, word: np.ndarray, lane: np.ndarray, writer: np.ndarray
    ) -> None:
        """A streaming layer read these bytes of the unwrapped stream view."""
        keys = self.stream_key(quad, word, lane).ravel()
        writer = np.ravel(writer)
        for producer in np.unique(writer[writer >= 0]):
            self.used_stream.setdefault(int(producer), []).append(
                np.unique(keys[writer == producer])
            )

    def consume(self, quad: np.ndarray, word: np.ndarray) -> None:
        """A streaming layer's circular buffer is consumed as it streams."""
        ok = word < self.words
        self.consumed[quad[ok], word[ok]] = True
        self.clobbered[quad[ok], word[ok]] = NEVER

    def data_written(
        self, layer: int, quad: np.ndarray, word: np.ndarray, lane: np.ndarray
    ) -> None:
        """`lane` -1 writes all four bytes (32-bit data)."""
        quad, word, lane = np.ravel(quad), np.ravel(word), np.ravel(lane)
        whole = lane < 0
        if whole.any():
            quad = np.r_[quad[~whole], np.repeat(quad[whole], 4)]
            word = np.r_[word[~whole], np.repeat(word[whole], 4)]
            lane = np.r_[lane[~whole], np.tile(np.arange(4), int(whole.sum()))]
        old = self.writer[quad, word, lane]
        unread = ~self.consumed[quad, word, lane] & (old != NEVER) & (old != layer)
        self.clobbered[quad, word, lane] = np.where(unread, old, NEVER)
        self.consumed[quad, word, lane] = False
        self.writer[quad, word, lane] = layer

    # -- kernels and bias ------------------------------------------------------------------

    def kernels_read(
        self,
        layer: int,
        processors: np.ndarray,
        words: np.ndarray,
        outputs: np.ndarray,
        streamed: np.ndarray,
        *,
        one_to_one: bool = False,
    ) -> None:
        self.kernel_uses.append(KernelUse(layer, processors, words, outputs, streamed, one_to_one))

    def bias_read(self, layer: int, group: int, index: np.ndarray) -> None:
        self.bias_reads.append((layer, group, np.ravel(index)))

    # -- findings --------------------------------------------------------------------------

    def analyze(
        self, last_layer: int | None = None, checked: np.ndarray | None = None
    ) -> list[Hazard]:
        """All findings. Outputs of `last_layer` count as used: those in `checked` (byte keys
        the known answer checks) or, without a known answer, all."""
        return self.found + self._kernels(last_layer, checked) + self._shared_bias()

    def _live(
        self, use: KernelUse, last_layer: int | None, checked: np.ndarray | None
    ) -> np.ndarray:
        if use.layer == last_layer:
            if checked is None:
                return np.ones(use.words.shape[0], dtype=bool)
            return np.isin(use.outputs, checked).any(axis=1)
        consumed = self.consumed_bytes(use.layer)
        live = np.isin(use.outputs, consumed).any(axis=1)
        parts = self.used_stream.get(use.layer)
        if parts:
            live |= np.isin(use.streamed, np.concatenate(parts)).any(axis=1)
        return live

    def _kernels(self, last_layer: int | None, checked: np.ndarray | None) -> list[Hazard]:
        found: list[Hazard] = []
        keys_by_layer: list[tuple[int, np.ndarray]] = []
        for use in self.kernel_uses:
            live = self._live(use, last_layer, checked)
            words = use.words[live]
            if use.one_to_one:
                proc = use.processors[live][:, None]
            else:
                proc = use.processors[:, None, None]
                words = words[None]
            keys = np.unique((proc.astype(np.int64) * 100_000 + words).ravel())
            keys_by_layer.append((use.layer, keys))
            if self.kernel_written is not None and keys.size:
                p, w = np.divmod(keys, 100_000)
                missing = ~self.kernel_written[p, w]
                if missing.any():
                    first = p[missing][0]
                    found.append(
                        Hazard(
                            "unwritten kernels",
                            use.layer,
                            None,
                            f"layer {use.layer} reads {int(missing.sum())} kernel-memory words "
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
                if common.size == keys.size or common.size == other_keys.size:
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

    def _shared_bias(self) -> list[Hazard]:
        found: list[Hazard] = []
        seen: list[tuple[int, int, np.ndarray]] = []
        for layer, group, index in self.bias_reads:
            for other, other_group, other_index in seen:
                if other == layer or other_group != group:
                    continue
                index = np.unique(index)
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
            seen.append((layer, group, np.unique(index)))
        return found

    def consumed_bytes(self, layer: int) -> np.ndarray:
        parts = self.used.get(layer, [])
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


NOTE_KINDS = frozenset({"shared weights", "shared bias"})
