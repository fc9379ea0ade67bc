"""How many threads a step may run side by side: more only where a core is idle.

Two NumPy-heavy threads of one process share the cores well on an idle machine (a proof's two
halves, a calibration run's branches: about 0.15 s of a one-second compile) but cost more than
they save on a busy one (the other processes hold the cores; the threads then only contend for
the caches and the page tables). What runs is the same either way; only when.
"""

from __future__ import annotations

import os


def side_by_side_threads(wanted: int) -> int:
    """`wanted` where a core is idle now, else 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return wanted if cores > 1 and _others_running() < cores - 1 else 1


def _others_running() -> float:
    """How many other threads want a core: the kernel's count of runnable ones now (Linux,
    /proc/loadavg, which counts this one), else the 1-minute load average."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[0]) - 1
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average: take the cores to be idle
        return 0.0
