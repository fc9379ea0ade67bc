"""The time the proof adds to `edgesynth izer` (and synth, compile, plan) on the corpus.

The proof replays the project's writes on the virtual device and checks the known answer
(`targets/max7800x/proof.py`). The cases: a spread of the corpus by the number of writes a
project makes (the size of the vendor's trace.bin: the smallest, evenly spaced ones, the
median and the largest), the largest streaming ones and the slowest proofs; or every case
(--all). Each runs the whole `edgesynth izer` command in fresh processes, in turn with
`--no-verify` and with the proof (whose CPU time the run measures itself, around `izer.prove`,
the virtual device's imports included), best of --repeat each. The times are CPU seconds (user
and system), which other processes on a busy machine inflate far less than wall time; a
project that misses its known answer (izer refuses it) is timed all the same.

    PYTHONPATH=src python benchmarks/proof_time.py [--spread 9 | --all | --case D/NAME]

Prints per case: izer's CPU time with --no-verify and with the proof, the proof's own time in
that run, its share (the proof over the run with --no-verify), and `prove_project` alone, warm
(planned once in this process); then the worst share against the target: under 10% of the
izer run on every case.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "cases"
TARGET = 0.10
# Python's bytecode cache is allowed, as in any installed package (the first run writes it)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
STREAMING_LARGEST = 3  # of the FIFO-fed streaming cases, and of the others
# the slowest proofs of a run over every case (--all): a streamed 190x120 frame
SLOWEST = ("MAX78000/test-fifostream-notvga190x120-hwc",)


def _ok_cases() -> list[tuple[int, Path, dict]]:
    """(writes, case folder, case.json) of every `expect: ok` case with a trace, fewest first."""
    rows = []
    for path in sorted(CORPUS.glob("*/*/case.json")):
        info = json.loads(path.read_text())
        trace = path.parent / "trace.bin"
        if info["expect"] == "ok" and trace.is_file():
            rows.append((trace.stat().st_size // 8, path.parent, info))
    rows.sort(key=lambda r: (r[0], str(r[1])))
    return rows


def spread(count: int) -> list[Path]:
    """`count` cases evenly spaced by size (the smallest, the median, the largest among them)
    and the largest streaming cases, fed by the FIFOs (a whole frame streamed in) or not."""
    rows = _ok_cases()
    picks = {round(i * (len(rows) - 1) / max(1, count - 1)) for i in range(count)}
    picks.add(len(rows) // 2)
    chosen = [rows[i][1] for i in sorted(picks)]
    for fifo in (True, False):
        streaming = [
            r[1]
            for r in rows
            if "streaming" in r[2].get("features", [])
            and ("fifo" in r[2].get("features", [])) == fifo
        ]
        chosen += [c for c in streaming[-STREAMING_LARGEST:] if c not in chosen]
    return chosen + [CORPUS / c for c in SLOWEST if CORPUS / c not in chosen]


# One izer run that also says how much CPU time its proof took (`izer.prove`, imports of the
# virtual device included) and its own CPU time in all.
_TIMED_IZER = """
import resource, sys, time
import edgesynth.cli as cli
if hasattr(cli, "one_blas_thread"):  # (a checkout from before it, for comparisons)
    cli.one_blas_thread()  # as main() does, before NumPy loads (the izer module loads it)
import edgesynth.targets.max7800x.commands.izer as izer
main = cli.main
spent = []
prove = izer.prove
def timed(*args):
    start = time.process_time()
    try:
        return prove(*args)
    finally:
        spent.append(time.process_time() - start)
izer.prove = timed
code = main(["izer", *sys.argv[1:]])
use = resource.getrusage(resource.RUSAGE_SELF)
print("PROOF_CPU", sum(spent), use.ru_utime + use.ru_stime, code, file=sys.stderr)
"""


def izer_cpu(case: Path, no_verify: bool) -> tuple[float, float, bool]:
    """(CPU seconds of one fresh `edgesynth izer` process on `case`, of its proof, whether the
    project met its known answer). A project that misses it (izer refuses it: exit 1, nothing
    written) is timed all the same."""
    info = json.loads((case / "case.json").read_text())
    args = [a for a in info["args"] if a != "--verbose"]
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-c", _TIMED_IZER, *args, "--test-dir", out, "--prefix", "p"]
        argv += ["--no-verify"] if no_verify else []
        run = subprocess.run(argv, cwd=case, capture_output=True, text=True, env=ENV)
    last = run.stderr.strip().splitlines()[-1:] or [""]
    fields = last[0].split()
    if run.returncode != 0 or fields[:1] != ["PROOF_CPU"] or fields[3] not in ("0", "1"):
        raise SystemExit(f"{case}: izer failed: {run.stderr.strip()[-500:]}")
    return float(fields[2]), float(fields[1]), fields[3] == "0"


def proof_cpu(case: Path, repeat: int) -> float:
    """CPU seconds of `prove_project` alone, planned once in this process (best of `repeat`):
    the virtual device's own work, without its imports and first-call costs."""
    from edgesynth.errors import EdgesynthError
    from edgesynth.targets.max7800x.commands.izer import plan_izer
    from edgesynth.targets.max7800x.proof import prove_project

    info = json.loads((case / "case.json").read_text())
    here = os.getcwd()
    os.chdir(case)
    try:
        args = [a for a in info["args"] if a != "--verbose"]
        with contextlib.redirect_stdout(io.StringIO()):
            result, plan = plan_izer([*args, "--test-dir", "/nonexistent", "--prefix", "p"])
        best = float("inf")
        for _ in range(repeat):
            cpu = time.process_time()
            with contextlib.suppress(EdgesynthError):
                prove_project(result, plan, case.parent.name, "")
            best = min(best, time.process_time() - cpu)
    finally:
        os.chdir(here)
    return best


@dataclass
class Row:
    name: str
    writes: int
    without: float  # izer --no-verify, CPU s
    with_: float  # izer with the proof
    proof: float  # the proof inside that run
    alone: float  # prove_project alone, warm
    ok: bool  # the project met its known answer

    @property
    def share(self) -> float:
        """The proof's CPU time (measured inside the run) over the izer run without it (a
        refused project writes nothing, so its run less the proof would understate it)."""
        return self.proof / self.without


def measure(case: Path, repeat: int, writes: int) -> Row:
    """Best of `repeat` each; the runs with and without the proof alternate so that a busy
    spell hits both alike."""
    without, with_, proof, ok = float("inf"), float("inf"), float("inf"), True
    for _ in range(repeat):
        without = min(without, izer_cpu(case, True)[0])
        total, spent, ok = izer_cpu(case, False)
        if total - spent < with_ - proof or proof == float("inf"):
            with_, proof = total, spent
    name = f"{case.parent.name}/{case.name}"
    return Row(name, writes, without, with_, proof, proof_cpu(case, repeat), ok)


def main() -> int:
    import edgesynth.cli as cli

    if hasattr(cli, "one_blas_thread"):  # (a checkout from before it, for comparisons)
        cli.one_blas_thread()  # as `edgesynth` does, before NumPy loads (the proof alone)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--spread", type=int, default=9, help="N cases evenly spaced by size")
    group.add_argument("--all", action="store_true", help="every `expect: ok` case")
    group.add_argument("--case", action="append", help="DEVICE/NAME (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.case:
        cases = [CORPUS / c for c in args.case]
    elif args.all:
        cases = [r[1] for r in _ok_cases()]
    else:
        cases = spread(args.spread)
    writes = {r[1]: r[0] for r in _ok_cases()}
    print(
        f"{'writes':>7} {'--no-verify':>11} {'izer':>6} {'proof':>6} {'share':>6} "
        f"{'alone':>6}  case (CPU seconds)"
    )
    rows = []
    for case in cases:
        row = measure(case, args.repeat, writes.get(case, 0))
        rows.append(row)
        print(
            f"{row.writes:7d} {row.without:11.3f} {row.with_:6.3f} {row.proof:6.3f} "
            f"{row.share:6.1%} {row.alone:6.3f}  {row.name}"
            + ("" if row.ok else " (misses its known answer: izer refuses it)"),
            flush=True,
        )
    worst = max(rows, key=lambda r: r.share)
    verdict = "met" if worst.share < TARGET else "NOT met"
    print(
        f"{len(rows)} cases, {os.cpu_count()} cores, best of {args.repeat}: the proof's share "
        f"of the izer run, worst {worst.share:.1%} ({worst.name}), median "
        f"{statistics.median(r.share for r in rows):.1%}; target under {TARGET:.0%}: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
