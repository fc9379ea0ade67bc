"""Scoreboard of the virtual MAX78000/MAX78002 on the reference corpus.

For every case with a trace.bin: replay the vendor's writes, run every layer, check kat.npz word
for word and expected_output.npy value for value, and list the hazards. Prints one line per case
that does not pass cleanly, then the counts per device and the slowest replays.

    python benchmarks/vdevice_scoreboard.py [--corpus ../shared/corpus/cases] [--device MAX78002]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np

from edgesynth.targets.max7800x.vdevice.knownanswer import load_kat
from edgesynth.targets.max7800x.vdevice.runner import (
    check_kat,
    hazards_of,
    network_output,
    run_trace_file,
)

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared/corpus/cases")
    parser.add_argument("--device", choices=["MAX78000", "MAX78002"])
    args = parser.parse_args()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"# {now}, {os.cpu_count()} cores, load average {load}")
    counts: Counter[tuple[str, str]] = Counter()
    times = []
    for trace in sorted(args.corpus.glob("*/*/trace.bin")):
        case, device = trace.parent, trace.parent.parent.name
        if args.device and device != args.device:
            continue
        start = time.perf_counter()
        result = run_trace_file(trace, device)
        elapsed = time.perf_counter() - start
        times.append((elapsed, f"{device}/{case.name}", trace.stat().st_size))
        kat = load_kat(case / "kat.npz")
        report = check_kat(result, kat)
        expected = np.load(case / "expected_output.npy")
        output = network_output(result, kat)
        same = output.shape == expected.shape and np.array_equal(output, expected)
        hazards = sorted({h.kind for h in hazards_of(result, kat) if not h.is_note})
        status = "pass" if report.ok and same else "fail"
        counts[(device, status)] += 1
        if status != "pass" or hazards:
            detail = f"{report.mismatches}/{report.words} words differ" if not report.ok else ""
            if report.ok and not same:
                detail = f"output {output.shape} vs expected {expected.shape}"
            print(f"{device} {case.name}: {status} {detail} hazards: {', '.join(hazards) or '-'}")
    for (device, status), n in sorted(counts.items()):
        print(f"{device}: {n} {status}")
    times.sort(reverse=True)
    for elapsed, name, size in times[:3]:
        print(f"slowest: {name} {elapsed:.2f} s ({size // 8} records)")
    largest = max(times, key=lambda t: t[2])
    print(f"largest trace: {largest[1]} {largest[2] // 8} records, {largest[0]:.2f} s")


if __name__ == "__main__":
    main()
