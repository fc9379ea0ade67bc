"""The one way edgesynth makes an OR-Tools CP-SAT solver.

OR-Tools installs its own SIGINT handler while it solves unless `catch_sigint_signal` is false,
and leaves Ctrl-C after the solve to kill the process by signal: no "interrupted" message, exit
status -2 instead of 130, and a staging folder left in the user's output folder. With the
handler off, Ctrl-C is Python's KeyboardInterrupt everywhere, which the command line turns into
exit status 130 after the output helpers have removed their staging files.

OR-Tools' `cp_model` imports pandas (about 0.2 s) for its pandas-indexed helpers, which edgesynth
never calls; `cp_model()` imports it with a stand-in for pandas unless pandas is loaded already.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpSolver

CP_MODEL = "ortools.sat.python.cp_model"


def cp_model() -> types.ModuleType:
    """OR-Tools' `cp_model` module, without loading pandas for it: while it is imported,
    `pandas` is a stand-in with the two names its module body reads (`Index`, `Series`; no
    object is ever an instance of them), removed again afterwards, so any later `import
    pandas` gets the real library. An OR-Tools whose import needs more of pandas gets the real
    one."""
    if CP_MODEL in sys.modules or "pandas" in sys.modules:
        from ortools.sat.python import cp_model as loaded

        return loaded
    stand_in = types.ModuleType("pandas", "a stand-in while OR-Tools' cp_model is imported")
    stand_in.Index = type("Index", (), {})  # type: ignore[attr-defined]
    stand_in.Series = type("Series", (), {})  # type: ignore[attr-defined]
    sys.modules["pandas"] = stand_in
    try:
        from ortools.sat.python import cp_model as loaded
    except AttributeError:  # this OR-Tools reads more of pandas: the real one
        sys.modules.pop(CP_MODEL, None)
        del sys.modules["pandas"]
        from ortools.sat.python import cp_model as loaded
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
    return loaded


def new_solver(*, seconds: float, effort: float, seed: int) -> CpSolver:
    """A single-worker solver with a time limit, a deterministic work limit and a fixed seed
    (the same answer on every machine), which leaves Ctrl-C to Python."""
    solver = cp_model().CpSolver()
    solver.parameters.catch_sigint_signal = False
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.max_deterministic_time = effort
    solver.parameters.random_seed = seed
    return solver
