"""The time the proof adds to `edgesynth izer` (and synth, compile, plan) on the corpus.

The proof replays the project's writes on the virtual device and checks the known answer
(`targets/max7800x/proof.py`). For the largest corpus networks (by the number of writes their
project makes, the size of the vendor's trace.bin) or for every case (--all), this synthesizes
and plans each once, then times `prove_project` alone: the best of --repeat runs, wall clock and
this process's CPU time (the CPU time does not count other processes on a busy machine).

    PYTHONPATH=src python benchmarks/proof_time.py [--largest 10 | --all | --case D/NAME]

Prints one line per case, slowest first, and the median and maximum.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "cases"


def _cases(largest: int | None) -> list[Path]:
    infos = sorted(CORPUS.glob("*/*/case.json"))
    cases = [p.parent for p in infos if json.loads(p.read_text())["expect"] == "ok"]
    if largest is None:
        return cases
    sized = [(c / "trace.bin").stat().st_size for c in cases if (c / "trace.bin").is_file()]
    with_trace = [c for c in cases if (c / "trace.bin").is_file()]
    order = sorted(range(len(with_trace)), key=lambda i: -sized[i])
    return [with_trace[i] for i in order[:largest]]


def _time(case: Path, repeat: int) -> tuple[float, float, int]:
    from edgesynth.errors import EdgesynthError
    from edgesynth.targets.max7800x.izer import plan_izer
    from edgesynth.targets.max7800x.proof import prove_project

    info = json.loads((case / "case.json").read_text())
    os.chdir(case)
    args = [a for a in info["args"] if a != "--verbose"]
    with contextlib.redirect_stdout(io.StringIO()):
        result, plan = plan_izer([*args, "--test-dir", "/nonexistent", "--prefix", "p"])
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        # a project that misses its known answer is timed all the same
        with contextlib.suppress(EdgesynthError):
            prove_project(result, plan, case.parent.name, "")
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    writes = (case / "trace.bin").stat().st_size // 8 if (case / "trace.bin").is_file() else 0
    return min(walls), min(cpus), writes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--largest", type=int, default=10, help="the N largest networks")
    group.add_argument("--all", action="store_true", help="every `expect: ok` case")
    group.add_argument("--case", action="append", help="DEVICE/NAME (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    cases = [CORPUS / c for c in args.case] if args.case else None
    for case in cases or _cases(None if args.all else args.largest):
        wall, cpu, writes = _time(case, args.repeat)
        rows.append((wall, cpu, writes, f"{case.parent.name}/{case.name}"))
    rows.sort(reverse=True)
    print(f"{'proof wall s':>12} {'cpu s':>7} {'writes':>8}  case")
    for wall, cpu, writes, name in rows:
        print(f"{wall:12.3f} {cpu:7.3f} {writes:8d}  {name}")
    walls = [r[0] for r in rows]
    print(
        f"{len(rows)} cases, {os.cpu_count()} cores: median {statistics.median(walls):.3f} s, "
        f"max {max(walls):.3f} s ({rows[0][3]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
