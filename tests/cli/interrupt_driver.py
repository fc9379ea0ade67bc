"""`python interrupt_driver.py ARGS...` is `edgesynth ARGS...` with a pause where Ctrl-C hurts
most: after every CP-SAT solve, with the output staged and not yet moved into place. The
placement always runs the solver here (placement/simple.py settles small networks without it).

At that point it prints `staged after N solves` on stderr and sleeps, so that a test can send
SIGINT to a real process (OR-Tools' signal handling is process-wide: it cannot be tested in the
test's own process). Nothing in edgesynth itself knows about this pause.
"""

from __future__ import annotations

import sys
import time

import edgesynth.cpsat as cpsat
import edgesynth.outputs as outputs

solves = 0
_new_solver = cpsat.new_solver


def counted_solver(**kwargs):  # type: ignore[no-untyped-def]
    """`new_solver`, counting the solvers that were made (each solves at least once)."""
    global solves
    solves += 1
    return _new_solver(**kwargs)


def pause() -> None:
    print(f"staged after {solves} solves", file=sys.stderr, flush=True)
    time.sleep(60)


def pausing_commit(self, _commit=outputs.OutputFolder._commit):  # type: ignore[no-untyped-def]
    pause()  # a folder: every file staged, none moved into place
    return _commit(self)


def pausing_create(path, writer, _create=outputs._create_exclusive):  # type: ignore[no-untyped-def]
    _create(path, writer)
    pause()  # a single file: written under its staging name, not yet renamed


cpsat.new_solver = counted_solver
outputs.OutputFolder._commit = pausing_commit
outputs._create_exclusive = pausing_create

if __name__ == "__main__":
    # The solvers' modules import cpsat.new_solver after the patch above: they count.
    import edgesynth.targets.max7800x.placement.simple as simple

    simple.MAX_CELLS = 0  # the test's small network goes to the solver, not the rule that skips it
    from edgesynth.cli import main

    sys.exit(main(sys.argv[1:]))
