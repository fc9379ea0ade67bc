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


def plan_trace(plan: Plan) -> list[np.ndarray]:
    """The records the generated code writes in each phase."""
    memory: dict[int, int] = {}

    def record(addr: np.ndarray, vals: np.ndarray) -> np.ndarray:
        return np.stack([addr.astype(np.uint32), vals.astype(np.uint32)], axis=1)

    phases: list[np.ndarray] = [np.zeros((0, 2), dtype=np.uint32), _writes(plan.init)]

    kernel_addrs: list[np.ndarray] = []  # the kernel writes, in order
    kernel_values: list[np.ndarray] = []
    mexpress = plan.settings.opts.plan.mexpress
    # the words a packed loader's "set address" byte store lands in: the only words whose
    # earlier value the trace needs
    targets = np.array(sorted({b.address & ~3 for b in plan.kernels} if mexpress else ()), int)
    for block in plan.kernels:
        addr = block.address
        if mexpress:
            word = addr & ~3
            value = (memory.get(word, 0) & ~(0xFF << 8 * ((addr | 1) & 3))) | 1 << 8 * (
                (addr | 1) & 3
            )
            memory[word] = value
            kernel_addrs.append(np.array([word]))
            kernel_values.append(np.array([value], dtype=np.int64))
        addrs = addr + 4 * np.arange(block.length, dtype=np.int64)
        lo, hi = np.searchsorted(targets, [addr, addr + 4 * block.length]).tolist()
        for target in targets[lo:hi].tolist():  # the targets among this block's words
            if (target - addr) % 4 == 0:
                memory[target] = int(block.words[(target - addr) // 4])
        kernel_addrs.append(addrs)
        kernel_values.append(block.words)
    if kernel_addrs:
        phases.append(record(np.concatenate(kernel_addrs), np.concatenate(kernel_values)))
    else:
        phases.append(np.zeros((0, 2), np.uint32))

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
