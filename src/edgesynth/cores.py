"""How many threads a step may run side by side: more only where a core is idle.

Two NumPy-heavy threads of one process share the cores well on an idle machine (a proof's two
halves, a calibration run's branches: about 0.15 s of a one-second compile) but cost more than
they save on a busy one (the other processes hold the cores; the threads then only contend for
the caches and the page tables). The 1-minute load average says which: below the core count
minus one half, a core is taken to be idle. What runs is the same either way; only when.
"""

from __future__ import annotations

import os


def side_by_side_threads(wanted: int) -> int:
    """`wanted` on a machine with an idle core, else 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average: assume a core is idle
        busy = 0.0
    return wanted if cores > 1 and busy < cores - 0.5 else 1
