"""Time `edgesynth izer` (synthesis and the whole C project) on the largest corpus networks.

Each run is a fresh process (what a user waits for), measured for wall time and peak memory,
and compared with the vendor tool's own figures recorded in each case.json. Python's bytecode
cache is allowed (as in any installed package; a first run per case warms it up). The summary
line gives the median speed-up and memory ratio against the targets (10x faster, a third of the
memory).

    python benchmarks/izer_speed.py [--count 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cases"


def largest_cases(count: int) -> list[Path]:
    """The `expect: ok` cases the vendor needed the most time for."""
    cases = []
    for path in CORPUS.glob("*/*/case.json"):
        info = json.loads(path.read_text())
        if info["expect"] == "ok":
            cases.append((info["vendor_wall_s"], path.parent))
    return [case for _, case in sorted(cases, reverse=True)[:count]]


def run_once(case: Path, out: Path) -> tuple[float, int]:
    """One fresh process writing the project into a new folder under `out` (izer refuses an
    existing TEST_DIR/PREFIX, as the vendor tool does)."""
    info = json.loads((case / "case.json").read_text())
    prefix = f"{info['name']}-{len(list(out.iterdir()))}"
    argv = [sys.executable, "-m", "edgesynth", "izer", *info["args"]]
    argv += ["--test-dir", str(out), "--prefix", prefix, "--sample-numpy-filename", "kat"]
    script = (
        "import resource, subprocess, sys, time;"
        "t = time.perf_counter();"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
        "w = time.perf_counter() - t;"
        "m = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
        "print(r.returncode, w, m)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    probe = subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=case,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    code, wall, rss = probe.stdout.split()
    if code != "0":
        raise SystemExit(f"{case}: edgesynth izer failed")
    return float(wall), int(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=8, help="how many of the largest cases")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (best is kept)")
    args = parser.parse_args()
    print(f"{'case':55} {'edgesynth s':>11} {'MB':>6} {'vendor s':>9} {'MB':>6}")
    speedups, memory = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for case in largest_cases(args.count):
            info = json.loads((case / "case.json").read_text())
            run_once(case, Path(tmp))  # warm the bytecode and template caches
            runs = [run_once(case, Path(tmp)) for _ in range(args.repeat)]
            wall = min(r[0] for r in runs)
            rss = min(r[1] for r in runs)
            name = f"{case.parent.name}/{case.name}"
            print(
                f"{name:55} {wall:11.2f} {rss / 1024:6.0f} "
                f"{info['vendor_wall_s']:9.2f} {info['vendor_max_rss_kb'] / 1024:6.0f}"
            )
            speedups.append(info["vendor_wall_s"] / wall)
            memory.append(rss / info["vendor_max_rss_kb"])
    print(
        f"median speed-up {statistics.median(speedups):.1f}x (target >= 10x), "
        f"median memory {statistics.median(memory):.2f} of the vendor's (target <= 0.33)"
    )


if __name__ == "__main__":
    main()
