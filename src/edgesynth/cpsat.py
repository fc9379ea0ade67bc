"""The one way edgesynth makes an OR-Tools CP-SAT solver.

OR-Tools installs its own SIGINT handler while it solves unless `catch_sigint_signal` is false,
and leaves Ctrl-C after the solve to kill the process by signal: no "interrupted" message, exit
status -2 instead of 130, and a staging folder left in the user's output folder. With the
handler off, Ctrl-C is Python's KeyboardInterrupt everywhere, which the command line turns into
exit status 130 after the output helpers have removed their staging files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpSolver


def new_solver(*, seconds: float, effort: float, seed: int) -> CpSolver:
    """A single-worker solver with a time limit, a deterministic work limit and a fixed seed
    (the same answer on every machine), which leaves Ctrl-C to Python."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.catch_sigint_signal = False
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.max_deterministic_time = effort
    solver.parameters.random_seed = seed
    return solver
