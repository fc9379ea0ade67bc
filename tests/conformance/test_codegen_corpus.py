"""Code generation on every vendor case of the reference corpus.

For every `expect: ok` case, `edgesynth izer <case args>` writes the project, and
- the plan equals the vendor's plan.json: every per-layer list of its log (processor maps,
  offsets, kernel offsets/lengths/counts, bias quadrants/offsets, ...) and, on the MAX78000,
  the latency estimate cycle for cycle;
- sampleoutput.h holds exactly the words of kat.npz;
- for cases with a trace.bin, the generated project recorded by ../shared/tools/devtrace is
  byte-identical to trace.bin (every write of cnn_init, the weights, the bias, the
  configuration, the input and cnn_start, in order).
A case that cannot be reproduced yet is listed in KNOWN_DIFFERENCES with the reason (xfail).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from edgesynth.targets.max7800x.izer import run_izer
from edgesynth.targets.max7800x.izer_args import parse_izer_args
from edgesynth.targets.max7800x.plan.plan import make_plan
from edgesynth.targets.max7800x.plan.report import configuration
from edgesynth.targets.max7800x.plan.trace import phase_matches, read_trace, record_trace

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CORPUS = SHARED / "corpus" / "cases"
DEVTRACE = SHARED / "tools" / "devtrace" / "run.sh"
CASES = sorted(
    p.parent for p in CORPUS.glob("*/*/case.json") if json.loads(p.read_text())["expect"] == "ok"
)

# case -> reason; none today.
KNOWN_DIFFERENCES: dict[str, str] = {}

pytestmark = pytest.mark.corpus


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _header_words(text: str, name: str) -> np.ndarray:
    body = text[text.index(f"#define {name} {{") :]
    body = body[body.index("{") + 1 : body.index("}")]
    return np.array([int(v, 16) for v in re.findall(r"0x[0-9a-f]+", body)], dtype=np.uint64)


def _kat_words(case: Path) -> np.ndarray:
    kat = np.load(case / "kat.npz")
    parts, at = [], 0
    for addr, mask, length in zip(kat["addr"], kat["mask"], kat["length"], strict=True):
        parts += [int(addr), int(mask), int(length)]
        parts += kat["data"][at : at + int(length)].astype(np.uint64).tolist()
        at += int(length)
    return np.array([*parts, 0], dtype=np.uint64)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_generated_project(case: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    name = _case_id(case)
    if name in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES[name])
    info = json.loads((case / "case.json").read_text())
    monkeypatch.chdir(case)
    args = [*info["args"], "--test-dir", str(tmp_path), "--prefix", "p"]
    result = run_izer(args)  # what `edgesynth izer` runs: synthesis, then the project
    capsys.readouterr()
    project = tmp_path / "p"

    # The plan against the vendor's log.
    plan = make_plan(result, parse_izer_args(args))
    vendor = json.loads((case / "plan.json").read_text())
    latency = vendor.pop("Estimated latency", None)
    assert configuration(plan) == vendor
    if latency is not None:
        ours = plan.latency
        assert ours is not None
        assert [c for _, c in ours.layers] == latency["layers"]
        assert (ours.total, ours.rough) == (latency["total"], latency["rough"])
    # Vendor lists parse back to the same numbers (not only the same text).
    assert ast.literal_eval(vendor["Kernel offset"]) == plan.kernel_offsets

    # The known answer in sampleoutput.h, word for word.
    header = (project / "sampleoutput.h").read_text()
    np.testing.assert_array_equal(_header_words(header, "SAMPLE_OUTPUT"), _kat_words(case))

    # Write for write.
    if info.get("trace"):
        ours_trace = tmp_path / "ours.trace"
        record_trace(project, ours_trace, DEVTRACE)
        if ours_trace.read_bytes() != (case / "trace.bin").read_bytes():
            phases = phase_matches(read_trace(ours_trace), read_trace(case / "trace.bin"))
            pytest.fail(f"trace differs; phases identical: {phases}")
