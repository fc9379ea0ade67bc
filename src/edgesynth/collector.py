"""The garbage collector in edgesynth's own process (the console script, `python -m edgesynth`).

Start-up imports make tens of thousands of objects that live until the process ends; the
collector's passes over them, while the modules load and again at exit, cost a sixth of a small
`izer` run (about 35 of 200 ms of CPU). So in the program's process (`edgesynth.cli.main` without an
argument list) the collector waits while a command's modules load (`postpone`: only a
generation-0 threshold of 200,000 objects, five times what `izer` loads, bounds the garbage
a command that never calls `start` can leave), starts with the objects made so far set aside
(`start`: gc.freeze, then the usual thresholds), and at exit scans nothing again (`finish`).
`edgesynth.cli` calls `start` before an argparse command's handler; a command that reads its own
command line (a plugin's `raw_commands`) calls it once its modules are loaded. Called from
anywhere else (tests, scripts that import edgesynth) `start` does nothing.
"""

from __future__ import annotations

import gc

STARTUP_THRESHOLD = 200_000
_usual: tuple[int, ...] | None = None  # the thresholds while the collector waits


def postpone() -> None:
    """The program starts: no collection while its modules load."""
    global _usual
    if _usual is None:
        _usual = gc.get_threshold()
        gc.set_threshold(STARTUP_THRESHOLD, *_usual[1:])


def start() -> None:
    """The command's modules are loaded: collect as usual from here on, leaving aside what
    exists now (once; nothing where `postpone` was not called)."""
    global _usual
    if _usual is not None:
        gc.freeze()
        gc.set_threshold(*_usual)
        _usual = None


def finish() -> None:
    """The program ends: what is left is not scanned again at exit."""
    gc.freeze()
