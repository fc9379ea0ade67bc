"""Write traces: every (address, value) pair firmware stores into the accelerator, in order.

The format is the one `../shared/tools/devtrace` records: little-endian uint32 pairs. Marker
records with addresses 0xFFFFFFF0..0xFFFFFFF7 open the phases of a generated project's main().
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.vdevice.record import FrozenRecord

MARKER_BASE = 0xFFFFFFF0
PHASES = (
    "cnn_enable",
    "cnn_init",
    "cnn_load_weights",
    "cnn_load_bias",
    "cnn_configure",
    "load_input",
    "cnn_start",
    "end",
)


class Trace(FrozenRecord):
    """The writes of one run: `addr` and `value` (uint32), `phase` (index into PHASES)."""

    addr: np.ndarray
    value: np.ndarray
    phase: np.ndarray
    source: str = "<memory>"

    def __len__(self) -> int:
        return int(self.addr.size)

    def in_phase(self, name: str) -> Trace:
        keep = self.phase == PHASES.index(name)
        return Trace(self.addr[keep], self.value[keep], self.phase[keep], self.source)


def from_pairs(pairs: np.ndarray, source: str = "<memory>") -> Trace:
    """A Trace from an (N, 2) uint32 array of records, markers included."""
    pairs = np.asarray(pairs, dtype=np.uint32).reshape(-1, 2)
    addr, value = pairs[:, 0], pairs[:, 1]
    is_marker = addr >= MARKER_BASE
    marker_phase = np.where(is_marker, addr.astype(np.int64) - MARKER_BASE, -1)
    # Each record belongs to the phase of the last marker before it (0 before any marker).
    last = np.maximum.accumulate(np.where(is_marker, np.arange(addr.size), -1))
    phase = np.where(last >= 0, marker_phase[np.maximum(last, 0)], 0)
    keep = ~is_marker
    return Trace(addr[keep].copy(), value[keep].copy(), phase[keep].astype(np.int8), source=source)


def from_phases(phases: list[np.ndarray]) -> Trace:
    """A Trace from each phase's (n, 2) uint32 records, phase 0 first: what `from_pairs` makes
    of them with a marker before each, without the markers (a record at a marker's address
    goes through `from_pairs`, which takes it for a marker)."""
    parts = [np.asarray(p, dtype=np.uint32).reshape(-1, 2) for p in phases]
    pairs = np.concatenate(parts) if parts else np.zeros((0, 2), np.uint32)
    if pairs.size and int(pairs[:, 0].max()) >= MARKER_BASE:
        marked = [np.array([[MARKER_BASE + i, 0]], dtype=np.uint32) for i in range(len(parts))]
        for i, part in enumerate(parts):
            marked.insert(2 * i + 1, part)
        return from_pairs(np.concatenate(marked))
    counts = [p.shape[0] for p in parts]
    phase = np.repeat(np.arange(len(parts), dtype=np.int8), counts)
    return Trace(pairs[:, 0].copy(), pairs[:, 1].copy(), phase)


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; a file that is not whole (address, value) pairs is refused."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise EdgesynthError(
            f"cannot read the trace: {err.strerror or err}", file=str(path)
        ) from None
    if len(raw) % 8:
        raise EdgesynthError(
            f"a trace holds 8-byte (address, value) records; this file has {len(raw)} bytes, "
            "which is not a multiple of 8",
            file=str(path),
        )
    pairs = np.frombuffer(raw, dtype="<u4").reshape(-1, 2)
    return from_pairs(pairs, source=str(path))


def to_bytes(trace: Trace) -> bytes:
    """The trace as a file body, with a phase marker wherever the phase changes."""
    records: list[np.ndarray] = []
    for index in range(len(PHASES)):
        records.append(np.array([[MARKER_BASE + index, 0]], dtype="<u4"))
        keep = trace.phase == index
        records.append(np.stack([trace.addr[keep], trace.value[keep]], axis=1).astype("<u4"))
    return np.concatenate(records).tobytes()
