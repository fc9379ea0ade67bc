"""`edgesynth pulp compile` on the largest network of ../shared/pulp, wall time of the whole
command (a fresh process each run), with and without the proof (the host build of the generated
C and its run against the simulator).

    python benchmarks/compile_speed.py [--repeat 3]

Prints the network, the best and the median of each, the date, the cores and the load average.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = Path(__file__).resolve().parents[2] / "shared" / "pulp" / "cases"


def largest() -> Path:
    return max(CASES.glob("*/network.onnx"), key=lambda p: p.stat().st_size)


def wall(argv: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "edgesynth", *argv, "-o", f"{tmp}/out"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    model = largest()
    print(
        f"{datetime.date.today()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f}; {model.parent.name} ({model.stat().st_size:,} bytes)"
    )
    for label, extra in (("pulp compile --no-verify", ["--no-verify"]), ("pulp compile", [])):
        times = [wall(["pulp", "compile", str(model), *extra]) for _ in range(args.repeat)]
        print(f"{label:26} best {min(times):.2f} s  median {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
