"""`edgesynth report` on the largest network of the reference corpus (../shared/corpus: the
case with the most layers, MAX78002 test-layers128), compiled once; the time to read the folder
back and render the page, in-process (best and median of --repeat runs), and the whole command
as a fresh process (start-up included), each as wall and CPU time (the CPU time shows the
cost on a loaded machine). The target: under 2 s.

    python benchmarks/report_speed.py [--repeat 5]

Prints the network, the times, the page's size, the date, the cores and the load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "cases"


def layers(case: Path) -> int:
    features = json.loads(case.read_text()).get("features", [])
    return max([int(f[:-1]) for f in features if re.fullmatch(r"\d+L", f)] + [0])


def largest() -> Path:
    """The case with the most layers the vendor's tool synthesizes (`expect: ok`)."""
    cases = [c for c in CASES.glob("*/*/case.json") if json.loads(c.read_text())["expect"] == "ok"]
    return max(cases, key=lambda c: (layers(c), c.parent.name)).parent


def compile_case(case: Path, tmp: Path) -> Path:
    """The case's network compiled with `edgesynth compile` (its YAML, checkpoint, device)."""
    args = json.loads((case / "case.json").read_text())["args"]
    value = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    work = tmp / case.name
    shutil.copytree(case, work)
    command = [sys.executable, "-m", "edgesynth", "compile", value["--config-file"]]
    if "--checkpoint-file" in value:
        command += ["--checkpoint", value["--checkpoint-file"]]
    if "--sample-input" in value:
        command += ["--sample-input", value["--sample-input"]]
    command += ["-t", value["--device"].lower(), "-o", "out", "--no-verify"]
    subprocess.run(command, cwd=work, check=True, stdout=subprocess.DEVNULL)
    return work / "out"


def in_process(folder: Path, page: Path) -> tuple[float, float]:
    """(wall, CPU) seconds to read the folder back and write the page."""
    from edgesynth.report.collect import folder_report
    from edgesynth.report.render import render

    start, cpu = time.perf_counter(), time.process_time()
    page.write_text(render(folder_report(folder)))
    return time.perf_counter() - start, time.process_time() - cpu


def command(folder: Path, page: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of `edgesynth report` as a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    argv = [sys.executable, "-m", "edgesynth", "report", str(folder), "-o", str(page)]
    subprocess.run([*argv, "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return time.perf_counter() - start, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    case = largest()
    with tempfile.TemporaryDirectory() as tmp:
        folder = compile_case(case, Path(tmp))
        page = Path(tmp) / "report.html"
        count = layers(case / "case.json")
        print(
            f"{datetime.date.today()}, {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.2f}; {case.parent.name}/{case.name} ({count} layers)"
        )
        for label, run in (("in-process", in_process), ("edgesynth report", command)):
            runs = [run(folder, page) for _ in range(args.repeat)]
            wall, cpu = [w for w, _ in runs], [c for _, c in runs]
            print(
                f"{label:17} wall best {min(wall):.2f} s  median {statistics.median(wall):.2f} s;"
                f"  CPU best {min(cpu):.2f} s  median {statistics.median(cpu):.2f} s"
            )
        print(f"page: {page.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
