"""`edgesynth izer` and the vendor's `ai8xize.py`, side by side on this machine, in turn.

Cases: `--count` `expect: ok` cases of ../shared/corpus, half per chip, spread evenly over each
chip's cases ranked by the size of their inputs (checkpoint or weights, sample, YAML), the
smallest and the largest included. Each case runs in a scratch folder holding links to the
case's files (and, for the vendor tool, which reads its templates from `assets/` in the working
directory, a link to the checkout's `assets`). Per case: one warm-up run of each tool (bytecode
and file caches), then `--repeat` rounds of edgesynth then vendor, each a fresh process; the
best wall time, the lowest peak memory (ru_maxrss of the process) and the lowest CPU time (user
+ system) of each tool are kept.
Both tools' known-answer outputs must equal the case's expected_output.npy.

Printed per case and overall: wall-time ratio (vendor / edgesynth: how many times faster
edgesynth is) and peak-memory ratio (edgesynth / vendor), with median, minimum and maximum; the
date, the cores and the load average (other work sharing the cores slows both tools).
Also printed: two floors, the best wall times of a fresh Python that only imports NumPy, and
one that imports the three libraries every izer run loads (NumPy, PyYAML for the network YAML,
Jinja2 for the C templates), and the ceilings they set: the vendor's wall time over a floor,
the speed-up an izer run built on those libraries could not exceed even if it did nothing else.

    python benchmarks/izer_speed.py --vendor ../ai8x-synthesis \
        [--vendor-python ../ai8x-synthesis/.venv/bin/python] [--count 40] [--repeat 2]

Without `--vendor` only edgesynth is timed. The vendor checkout needs its requirements in the
Python given by --vendor-python; with PyTorch 2.6 or later its checkpoints load only with
TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, which this script sets for the vendor's process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "cases"
# What the vendor's run produced: not an input of the case.
OUTPUT_FILES = {"case.json", "expected_output.npy", "kat.npz", "plan.json", "trace.bin"}
# The child's wall time, peak memory and CPU time (user + system), measured from a small parent
# process.
PROBE = (
    "import resource, subprocess, sys, time;"
    "t = time.perf_counter();"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE);"
    "w = time.perf_counter() - t;"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(r.returncode, w, u.ru_maxrss, u.ru_utime + u.ru_stime);"
    "sys.stderr.buffer.write(r.stderr[-2000:])"
)


@dataclass
class Case:
    folder: Path
    info: dict
    size: int  # bytes of the case's inputs

    @property
    def name(self) -> str:
        return f"{self.folder.parent.name}/{self.folder.name}"


@dataclass
class Tool:
    name: str
    argv: list[str]  # the command up to the izer options
    env: dict[str, str]


def input_bytes(folder: Path) -> int:
    files = (p for p in folder.rglob("*") if p.is_file() and p.name not in OUTPUT_FILES)
    return sum(p.stat().st_size for p in files)


def corpus_cases() -> list[Case]:
    cases = []
    for path in sorted(CORPUS.glob("*/*/case.json")):
        info = json.loads(path.read_text())
        if info["expect"] == "ok":
            cases.append(Case(path.parent, info, input_bytes(path.parent)))
    return cases


def spread(cases: list[Case], count: int) -> list[Case]:
    """`count` cases, half per chip, evenly spaced over each chip's cases ranked by size."""
    chosen = []
    for device in ("MAX78000", "MAX78002"):
        ranked = sorted((c for c in cases if c.folder.parent.name == device), key=lambda c: c.size)
        want = min(len(ranked), (count + 1) // 2 if device == "MAX78000" else count // 2)
        picks = sorted({round(i * (len(ranked) - 1) / max(want - 1, 1)) for i in range(want)})
        chosen += [ranked[i] for i in picks]
    return chosen


def scratch(case: Case, root: Path, vendor: Path | None) -> Path:
    """A working folder linking the case's files (and the vendor's `assets`)."""
    folder = root / case.name.replace("/", "-")
    folder.mkdir()
    for entry in case.folder.iterdir():
        (folder / entry.name).symlink_to(entry)
    if vendor is not None:
        (folder / "assets").symlink_to(vendor / "assets")
    return folder


def run_once(tool: Tool, case: Case, cwd: Path, out: Path) -> tuple[float, int, float]:
    """One fresh process writing the project into a new folder under `out`; (wall s, KiB,
    CPU s)."""
    prefix = f"{tool.name}-{len(list(out.iterdir()))}"
    argv = [*tool.argv, *case.info["args"], "--test-dir", str(out), "--prefix", prefix]
    argv += ["--sample-numpy-filename", "kat"]
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env=tool.env,
    )
    code, wall, rss, cpu = probe.stdout.split()
    if code != "0":
        raise SystemExit(f"{case.name}: {tool.name} failed (exit {code}):\n{probe.stderr}")
    kat = np.load(out / prefix / "kat.npy")
    if not np.array_equal(kat, np.load(case.folder / "expected_output.npy")):
        raise SystemExit(f"{case.name}: {tool.name}'s known answer differs from the corpus")
    return float(wall), int(rss), float(cpu)


def measure(
    tools: list[Tool], case: Case, cwd: Path, repeat: int
) -> list[tuple[float, int, float]]:
    """Per tool: best wall time, lowest peak memory and lowest CPU time of `repeat` rounds
    after a warm-up."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for tool in tools:
            run_once(tool, case, cwd, out)
        runs: list[list[tuple[float, int, float]]] = [[] for _ in tools]
        for _ in range(repeat):
            for tool, mine in zip(tools, runs, strict=True):
                mine.append(run_once(tool, case, cwd, out))
    return [tuple(min(r[i] for r in mine) for i in range(3)) for mine in runs]  # type: ignore[misc]


FLOORS = {"NumPy": "import numpy", "NumPy+PyYAML+Jinja2": "import numpy, yaml, jinja2"}


def floor_wall(env: dict[str, str], imports: str, repeat: int = 7) -> float:
    """The best wall time of a fresh Python that only runs `imports` (NumPy with one BLAS
    thread, as edgesynth loads it): what an izer run needing them costs at least."""
    env = {**env, "OPENBLAS_NUM_THREADS": "1"}
    walls = []
    for _ in range(repeat):
        probe = subprocess.run(
            [sys.executable, "-c", PROBE, sys.executable, "-c", imports],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        walls.append(float(probe.stdout.split()[1]))
    return min(walls)


def make_tools(args: argparse.Namespace) -> list[Tool]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    tools = [Tool("edgesynth", [sys.executable, "-m", "edgesynth", "izer"], env)]
    if args.vendor is not None:
        python = args.vendor_python or args.vendor / ".venv" / "bin" / "python"
        if not Path(python).is_file():
            raise SystemExit(f"no Python for the vendor tool at {python}: pass --vendor-python")
        vendor_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        vendor_env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
        tools.append(Tool("vendor", [str(python), str(args.vendor / "ai8xize.py")], vendor_env))
    return tools


def summary(label: str, values: list[float], unit: str) -> str:
    return (
        f"{label}: median {statistics.median(values):.2f}{unit}, "
        f"min {min(values):.2f}{unit}, max {max(values):.2f}{unit}"
    )


def header(args: argparse.Namespace, cases: list[Case], floors: dict[str, float]) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {now}, {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"# {len(cases)} cases, best of {args.repeat} after a warm-up, tools in turn")
    print(f"# load average at the start: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, wall in floors.items():
        print(f"# floor {name}: `python -c '{FLOORS[name]}'` {wall:.3f}s wall (best of 7)")
    columns = f"{'case':52} {'kB in':>8} {'edgesynth':>10} {'CPU':>6} {'MB':>5}"
    if args.vendor is not None:
        columns += f" {'vendor':>8} {'MB':>5} {'speed':>7} {'memory':>6}"
    print(columns + f" {'load':>5}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vendor", type=Path, help="a checkout of ai8x-synthesis")
    parser.add_argument("--vendor-python", type=Path, help="Python with the vendor's packages")
    parser.add_argument("--count", type=int, default=40, help="cases, half per chip")
    parser.add_argument("--repeat", type=int, default=2, help="rounds per case (best is kept)")
    args = parser.parse_args()
    if args.vendor is not None:
        args.vendor = args.vendor.resolve()
    tools = make_tools(args)
    cases = spread(corpus_cases(), args.count)
    floors = {name: floor_wall(tools[0].env, imports) for name, imports in FLOORS.items()}
    header(args, cases, floors)
    speed, memory, loads, cpus = [], [], [], []
    ceilings: dict[str, list[float]] = {name: [] for name in floors}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            cwd = scratch(case, Path(tmp), args.vendor)
            results = measure(tools, case, cwd, args.repeat)
            (wall, rss, cpu), *vendor = results
            cpus.append(cpu)
            line = f"{case.name:52} {case.size / 1000:8.1f} {wall:9.2f}s {cpu:5.2f}s"
            line += f" {rss / 1024:5.0f}"
            if vendor:
                (v_wall, v_rss, _) = vendor[0]
                speed.append(v_wall / wall)
                for name, wall_floor in floors.items():
                    ceilings[name].append(v_wall / wall_floor)
                memory.append(rss / v_rss)
                line += f" {v_wall:7.2f}s {v_rss / 1024:5.0f} {speed[-1]:6.1f}x {memory[-1]:6.2f}"
            loads.append(os.getloadavg()[0])
            print(line + f" {loads[-1]:5.1f}", flush=True)
    print(f"# load average (1 min) after each case: {min(loads):.1f} to {max(loads):.1f}")
    print(summary("edgesynth CPU time (user + system)", cpus, "s"))
    if speed:
        print(summary("speed (vendor wall / edgesynth wall)", speed, "x"))
        print(summary("peak memory (edgesynth / vendor)", memory, ""))
        for name, values in ceilings.items():
            print(summary(f"ceiling (vendor wall / the {name} floor)", values, "x"))


if __name__ == "__main__":
    main()
