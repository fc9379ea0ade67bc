"""`edgesynth.cpsat.cp_model()`: OR-Tools' CP-SAT module without pandas (which its import would
load, about 0.2 s), and a real pandas for whoever imports it afterwards. In a fresh process:
this one may have loaded either already."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    import sys
    from edgesynth.cpsat import cp_model, new_solver

    cp = cp_model()
    assert "pandas" not in sys.modules, "cp_model() loaded pandas"
    m = cp.CpModel()
    x = m.NewIntVar(0, 10, "x")
    m.Add(x * 3 <= 20)
    m.Maximize(x)
    solver = new_solver(seconds=5.0, effort=1.0, seed=0)
    assert solver.Solve(m) == cp.OPTIMAL and solver.Value(x) == 6
    import pandas
    assert hasattr(pandas, "DataFrame"), "the stand-in outlived the import"
    assert cp_model() is cp
    print("ok")
    """
)


def test_cp_model_is_imported_without_pandas_and_pandas_stays_real() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_with_pandas_loaded_cp_model_uses_it() -> None:
    code = "import pandas\nfrom edgesynth.cpsat import cp_model\nprint(cp_model().pd is pandas)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
