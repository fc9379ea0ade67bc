"""Scoreboard of the MAX7800x code generator against the vendor corpus (../shared/corpus).

For every `expect: ok` case: `edgesynth izer <case args>` writes the project; the plan is
compared with plan.json (all per-layer lists and the latency estimate), sampleoutput.h with
kat.npz, and, where the case has a trace.bin, the project recorded by edgesynth's recorder with
trace.bin, phase by phase (init, weights, bias, configure, input, start) and as a whole file.

    python benchmarks/codegen_scoreboard.py [--jobs 2] [--filter TEXT] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "cases"


def check_case(case: Path) -> dict:
    from edgesynth.targets.max7800x.commands.izer import core_options, run_izer
    from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
    from edgesynth.targets.max7800x.plan.plan import make_plan
    from edgesynth.targets.max7800x.plan.report import configuration
    from edgesynth.targets.max7800x.plan.trace import (
        PHASES,
        phase_matches,
        read_trace,
        record_trace,
    )

    info = json.loads((case / "case.json").read_text())
    row: dict = {"case": f"{case.parent.name}/{case.name}", "trace": bool(info.get("trace"))}
    with tempfile.TemporaryDirectory() as tmp:
        args = [*info["args"], "--test-dir", tmp, "--prefix", "p"]
        cwd = os.getcwd()
        os.chdir(case)
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                result = run_izer(args)
            plan = make_plan(result, core_options(parse_izer_args(args)))
        except Exception as err:  # a scoreboard reports, it does not stop
            row["error"] = f"{type(err).__name__}: {err}"[:300]
            return row
        finally:
            os.chdir(cwd)
        vendor = json.loads((case / "plan.json").read_text())
        latency = vendor.pop("Estimated latency", None)
        ours = configuration(plan)
        row["plan"] = ours == vendor
        if latency is not None:
            row["latency"] = plan.latency is not None and (
                [c for _, c in plan.latency.layers],
                plan.latency.total,
                plan.latency.rough,
            ) == (latency["layers"], latency["total"], latency["rough"])
        kat = np.load(case / "kat.npz")
        ours_kat = plan.kat
        row["kat"] = (
            len(ours_kat) == kat["addr"].size
            and all(
                (b.address, b.mask, b.words.size) == (int(a), int(m), int(n))
                for b, a, m, n in zip(
                    ours_kat, kat["addr"], kat["mask"], kat["length"], strict=True
                )
            )
            and np.array_equal(
                np.concatenate([b.words for b in ours_kat]) if ours_kat else np.zeros(0),
                kat["data"],
            )
        )
        if row["trace"]:
            out = Path(tmp) / "ours.trace"
            record_trace(Path(tmp) / "p", out)  # edgesynth's recorder
            row["identical"] = out.read_bytes() == (case / "trace.bin").read_bytes()
            phases = phase_matches(read_trace(out), read_trace(case / "trace.bin"))
            row.update({p: phases[p] for p in PHASES if p != "enable"})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--filter", default="")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    cases = [
        p.parent
        for p in sorted(CORPUS.glob("*/*/case.json"))
        if json.loads(p.read_text())["expect"] == "ok" and args.filter in str(p)
    ]
    with Pool(args.jobs) as pool:
        rows = pool.map(check_case, cases, chunksize=1)
    traced = [r for r in rows if r.get("trace")]
    counts = Counter()
    for r in rows:
        for key in ("plan", "latency", "kat"):
            counts[key] += bool(r.get(key))
            counts[key + "_n"] += key in r
        if r.get("trace"):
            for key in ("init", "weights", "bias", "configure", "input", "start", "identical"):
                counts[key] += bool(r.get(key))
    lines = [
        "| check | identical / cases |",
        "| --- | --- |",
        f"| plan.json (every per-layer list) | {counts['plan']} / {counts['plan_n']} |",
        f"| latency estimate (MAX78000) | {counts['latency']} / {counts['latency_n']} |",
        f"| sampleoutput.h = kat.npz | {counts['kat']} / {counts['kat_n']} |",
    ]
    for phase in ("init", "weights", "bias", "configure", "input", "start"):
        lines.append(f"| trace phase `{phase}` | {counts[phase]} / {len(traced)} |")
    lines.append(f"| **whole trace.bin (cmp)** | **{counts['identical']} / {len(traced)}** |")
    failures = [
        r
        for r in rows
        if "error" in r or not all(r.get(k, True) for k in ("plan", "latency", "kat", "identical"))
    ]
    for r in failures:
        lines.append(
            f"- {r['case']}: {r.get('error') or {k: v for k, v in r.items() if v is False}}"
        )
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
