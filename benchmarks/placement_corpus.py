"""Automatic placement on the vendor corpus: every placement key removed, placed, proven.

For every `expect: ok` case of ../shared/corpus: the YAML is loaded, `processors`,
`output_processors`, `in_offset` and `out_offset` are removed from every layer, and the case is
synthesized with edgesynth choosing them, as `edgesynth plan` and `synth` do (edgesynth's own
path, `write_for_write` false: calcx4 kernels allocated where they are written). The placed
network's known-answer output must equal the case's expected_output.npy, and the project's
writes, run on the virtual device, must reproduce the known answer with no memory hazard.
Reported: the share of networks placed, the reasons for the rest, the planner's time per
network, and (MAX78000) the latency estimate of the automatic placement against the vendor's
hand placement. tests/conformance/test_placement_corpus.py runs `check_case` on every case and
pins the headline and pins the headline. Also reported: the
planner's time per network inside one warm process (YAML, checkpoint and placement search), and
the wall time of a cold `edgesynth plan` process on MAX78000/mnist (what a user waits for:
start-up, imports, search, project, virtual device).

    python benchmarks/placement_corpus.py [--jobs 2] [--filter TEXT] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import yaml

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "cases"
# The network itself reads past its input: the vendor's own placement has the same hazard.
KNOWN_HAZARDS = {
    "test-conv1d-dilation7-pad0": "unwritten input",
    "test-conv1d-dilation7-pad0-128ch": "unwritten input",
    "test-conv1d-dilation11-pad0-96ch": "unwritten input",
}


def stripped_yaml(source: Path, target: Path) -> None:
    """The YAML at `source` without any placement key, written to `target`."""
    from edgesynth.targets.max7800x.placement.yamltext import without_placement

    target.write_text(without_placement(source.read_text()))


def config_arg(args: list[str]) -> int:
    for flag in ("--config-file", "-c"):
        if flag in args:
            return args.index(flag) + 1
    raise ValueError("no --config-file")


def check_case(case: Path) -> dict:
    from edgesynth.errors import EdgesynthError
    from edgesynth.targets.max7800x.commands.izer import job_from_options
    from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
    from edgesynth.targets.max7800x.network_sim import simulate
    from edgesynth.targets.max7800x.pipeline import SynthesisResult, check_network, load_network
    from edgesynth.targets.max7800x.placement.verify import device_check
    from edgesynth.targets.max7800x.plan.plan import make_plan

    info = json.loads((case / "case.json").read_text())
    row: dict = {"case": f"{case.parent.name}/{case.name}", "device": case.parent.name}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        args = list(info["args"])
        at = config_arg(args)
        yaml_path = Path(tmp) / "placed.yaml"
        try:
            stripped_yaml(case / args[at], yaml_path)
        except yaml.YAMLError as err:
            row.update(status="yaml", reason=str(err).splitlines()[0])
            return row
        args[at] = str(yaml_path)
        os.chdir(case)
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                opts = parse_izer_args([*args, "--test-dir", tmp, "--prefix", "p"])
                opts = replace(opts, write_for_write=False)  # as `edgesynth plan` and `synth`
                job = job_from_options(opts)
                start = time.perf_counter()
                net, sample = load_network(job)
                row["plan_s"] = time.perf_counter() - start
                check_network(net, job)
                result = SynthesisResult(net, sample, simulate(net, sample, job.sim))
                plan = make_plan(result, job.options)
        except EdgesynthError as err:
            row.update(status="refused", reason=err.message[:400])
            return row
        finally:
            os.chdir(cwd)
    expected = np.load(case / "expected_output.npy")
    row["kat"] = bool(
        result.output.shape == expected.shape and np.array_equal(result.output, expected)
    )
    row["rounds"] = job.placement.rounds if job.placement else 0
    row["place_s"] = job.placement.seconds if job.placement else 0.0
    check = device_check(plan, case.parent.name)
    allowed = KNOWN_HAZARDS.get(case.name)
    inherent = all(allowed and h.startswith(allowed) for h in check.hazards)
    row["device_ok"] = bool(check.kat_ok and inherent)
    row["hazards"] = check.hazards[:3]
    row["device_output"] = bool(
        check.output.shape == expected.shape and np.array_equal(check.output, expected)
    )
    if plan.latency is not None:
        vendor = json.loads((case / "plan.json").read_text()).get("Estimated latency")
        if vendor:
            row["latency"] = plan.latency.total
            row["vendor_latency"] = vendor["total"]
    ok = row["kat"] and row["device_ok"] and row["device_output"]
    row["status"] = "ok" if ok else "wrong"
    return row


def cold_plan(repeat: int = 3) -> list[float]:
    """Wall seconds of fresh `edgesynth plan` processes on MAX78000/mnist, keys removed."""
    case = CORPUS / "MAX78000" / "mnist"
    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = Path(tmp) / "mnist-auto.yaml"
        stripped_yaml(case / "networks" / "mnist-chw-ai85.yaml", yaml_path)
        argv = [sys.executable, "-m", "edgesynth", "plan", str(yaml_path)]
        argv.append("trained/ai85-mnist-qat8-q.pth.tar")
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(argv, cwd=case, check=True, capture_output=True)
            seconds.append(time.perf_counter() - start)
    return seconds


def header() -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return f"# {now}, {os.cpu_count()} cores, load average {load}"


def cases(pattern: str | None) -> list[Path]:
    found = []
    for path in sorted(CORPUS.glob("*/*/case.json")):
        if json.loads(path.read_text())["expect"] != "ok":
            continue
        if pattern and pattern not in str(path.parent):
            continue
        found.append(path.parent)
    return found


def latency_ratios(rows: list[dict]) -> list[float]:
    """Automatic placement's latency estimate over the hand placement's (MAX78000 networks
    with the vendor's estimate)."""
    return [r["latency"] / r["vendor_latency"] for r in rows if r.get("vendor_latency")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--filter")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    todo = cases(args.filter)
    print(header(), flush=True)
    with Pool(args.jobs) as pool:
        rows = pool.map(check_case, todo, chunksize=1)
    status = Counter(r["status"] for r in rows)
    reasons = Counter(r.get("reason", "") for r in rows if r["status"] != "ok")
    lines = [f"cases: {len(rows)}", *(f"  {k}: {v}" for k, v in status.most_common())]
    lines.append("not placed or wrong, by reason:")
    lines += [f"  {n:4d}  {k}" for k, n in reasons.most_common()]
    for r in rows:
        if r["status"] == "wrong":
            lines.append(
                f"  WRONG {r['case']}: kat={r['kat']} device={r['device_ok']} {r['hazards']}"
            )
    for key, what in (
        ("plan_s", "per network in a warm process, load + place"),
        ("place_s", "per network in a warm process, placement search + checks"),
    ):
        times = [r[key] for r in rows if key in r]
        if times:
            slowest = max(rows, key=lambda r: r.get(key, 0))["case"]
            lines.append(
                f"{what}: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
                f"({slowest})"
            )
    cold = cold_plan()
    lines.append(
        f"cold `edgesynth plan` on MAX78000/mnist (fresh process, {len(cold)} runs): "
        f"median {statistics.median(cold):.2f} s, min {min(cold):.2f} s, max {max(cold):.2f} s"
    )
    lines.append(header())
    ratios = latency_ratios(rows)
    if ratios:
        slower = sum(1 for x in ratios if x > 1)
        lines.append(
            f"latency vs vendor placement ({len(ratios)} MAX78000 networks placed with a "
            f"latency estimate): median ratio "
            f"{statistics.median(ratios):.4f}, best {min(ratios):.4f}, worst {max(ratios):.4f}, "
            f"slower on {slower}"
        )
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text("```\n" + text + "\n```\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
