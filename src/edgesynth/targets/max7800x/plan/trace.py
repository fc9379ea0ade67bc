"""Write traces: the devtrace file format, and the trace a plan's generated code must produce.

A trace is little-endian uint32 pairs (address, value) in write order; marker records at
0xFFFFFFF0..0xFFFFFFF7 separate the phases (enable, init, weights, bias, configure, input,
start, end). `plan_trace(plan)` is what the generated project writes, phase by phase, computed
from the plan alone (a byte store records the 32-bit word holding it, as devtrace does).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.plan.writes import Write, Writes

PHASES = ("enable", "init", "weights", "bias", "configure", "input", "start")
MARKER = 0xFFFFFFF0


def read_trace(path: Path) -> list[np.ndarray]:
    """The records of each phase: a list of (n, 2) uint32 arrays, one per phase."""
    records = np.fromfile(path, dtype="<u4").reshape(-1, 2)
    marks = np.flatnonzero(records[:, 0] >= MARKER)
    phases = []
    for i, m in enumerate(marks[:-1]):
        phases.append(records[m + 1 : marks[i + 1]])
    return phases


def _writes(w: Writes) -> np.ndarray:
    items = [(i.address, i.value) for i in w.items if isinstance(i, Write)]
    return np.asarray(items, dtype=np.uint32).reshape(-1, 2)


def _kernel_records(plan: Plan) -> np.ndarray:
    """The kernel loader's writes: each block's words from its address on, after (packed
    loader, mexpress) a byte store that sets the address counter (recorded as the word that
    holds it, with the bytes the earlier writes left in that word)."""
    blocks = plan.kernels
    if not blocks:
        return np.zeros((0, 2), np.uint32)
    lengths = np.array([b.words.size for b in blocks], dtype=np.int64)
    starts = np.array([b.address for b in blocks], dtype=np.int64)
    first = np.cumsum(lengths) - lengths
    if not plan.settings.opts.plan.mexpress:
        out = np.empty((int(lengths.sum()), 2), dtype=np.uint32)
        out[:, 0] = _counted(starts - 4 * first, lengths)
        out[:, 1] = np.concatenate([b.words for b in blocks])
        return out
    words = [b.address & ~3 for b in blocks]
    # the data words that land in a set write's word (the only earlier values the trace needs)
    targets = np.array(sorted(set(words)), dtype=np.int64)
    lo = np.searchsorted(targets, starts).tolist()
    hi = np.searchsorted(targets, starts + 4 * lengths).tolist()
    landing: dict[int, list[tuple[int, int]]] = {}
    for i in np.flatnonzero(np.array(hi) > np.array(lo)).tolist():
        start, block = int(starts[i]), blocks[i]
        for target in targets[lo[i] : hi[i]].tolist():
            if (target - start) % 4 == 0:
                landing.setdefault(i, []).append((target, int(block.words[(target - start) // 4])))
    memory: dict[int, int] = {}
    set_values = []
    for i, (block, word) in enumerate(zip(blocks, words, strict=True)):
        byte = 8 * ((block.address | 1) & 3)
        memory[word] = (memory.get(word, 0) & ~(0xFF << byte)) | 1 << byte
        set_values.append(memory[word])
        memory.update(landing.get(i, ()))
    # each block: its set write, then its words (block i's words follow i + 1 set writes)
    at_set = first + np.arange(len(blocks))
    out = np.empty((int(lengths.sum()) + len(blocks), 2), dtype=np.uint32)
    out[:, 0] = _counted(starts - 4 * (at_set + 1), lengths + 1)
    out[at_set, 0] = np.array(words, dtype=np.int64).astype(np.uint32)
    out[:, 1] = np.insert(np.concatenate([b.words for b in blocks]), first, 0)
    out[at_set, 1] = np.array(set_values, dtype=np.int64).astype(np.uint32)
    return out


def _counted(base: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The word address base[i] + 4 x k of each record k (counted over all of them), for the
    `lengths[i]` records of block i, as uint32 (modulo 2**32, as the addresses are)."""
    address = np.repeat(base.astype(np.uint32), lengths)
    address += (4 * np.arange(int(lengths.sum()), dtype=np.int64)).astype(np.uint32)
    return address


def plan_trace(plan: Plan) -> list[np.ndarray]:
    """The records the generated code writes in each phase."""

    def record(addr: np.ndarray, vals: np.ndarray) -> np.ndarray:
        return np.stack([addr.astype(np.uint32), vals.astype(np.uint32)], axis=1)

    phases: list[np.ndarray] = [np.zeros((0, 2), dtype=np.uint32), _writes(plan.init)]

    phases.append(_kernel_records(plan))

    regs = plan.settings.chip.regs
    parts = []
    for g, values in enumerate(plan.bias.values):
        if values.size:
            addrs = regs.apb_base + regs.bias(g) + 4 * np.arange(values.size)
            parts.append(record(addrs, values.astype(np.uint32)))
    phases.append(np.concatenate(parts) if parts else np.zeros((0, 2), np.uint32))

    phases.append(_writes(plan.configure))

    inputs = plan.inputs
    parts = []
    if not inputs.fifo:
        for b in inputs.blocks:
            parts.append(record(b.address + 4 * np.arange(b.words.size), b.words))
    else:
        streams = [b.words.astype(np.int64) for b in inputs.blocks]
        n = max((w.size for w in streams), default=0)
        count = len(streams)
        if inputs.synthesize is not None:  # the first words, repeated with an increment
            sw = inputs.synthesize_words
            mask = inputs.synthesize_mask if inputs.synthesize_mask is not None else 0xFFFFFFFF
            i = np.arange(n, dtype=np.int64)
            add = ((i // sw) * inputs.synthesize) & mask
            streams = [((w[i % sw] + add) & mask) for w in streams]
        addrs = np.tile(np.asarray(inputs.fifo_addresses, dtype=np.int64), n)
        vals = np.stack(streams, axis=1).reshape(-1) if count else np.zeros(0)
        parts.append(record(addrs, vals))
    phases.append(np.concatenate(parts) if parts else np.zeros((0, 2), np.uint32))

    phases.append(np.concatenate([_writes(plan.start), _writes(plan.go)]))
    return phases


def phase_matches(ours: list[np.ndarray], theirs: list[np.ndarray]) -> dict[str, bool]:
    """Per phase: are the two traces' records identical?"""
    result = {}
    for i, name in enumerate(PHASES):
        a = ours[i] if i < len(ours) else np.zeros((0, 2), np.uint32)
        b = theirs[i] if i < len(theirs) else np.zeros((0, 2), np.uint32)
        result[name] = a.shape == b.shape and bool(np.array_equal(a, b))
    return result


def record_trace(project: Path, output: Path, run_script: Path | None = None) -> None:
    """Record `project`'s writes into `output`: with edgesynth's recorder, or with a
    devtrace-style `run_script` (run.sh PROJECT TRACE)."""
    import subprocess

    from edgesynth.errors import EdgesynthError
    from edgesynth.targets.max7800x.recorder.record import record_project

    if run_script is None:
        record_project(project, output)
        return
    done = subprocess.run(
        ["bash", str(run_script), str(project), str(output)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise EdgesynthError(f"devtrace failed on {project}:\n{done.stderr[-2000:]}")
