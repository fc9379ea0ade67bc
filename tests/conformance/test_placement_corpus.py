"""Automatic placement on every vendor network of the corpus, with the placement keys removed.

For every `expect: ok` case: `processors`, `output_processors`, `in_offset`, `out_offset` (and the
global `output_map`) are removed from the YAML; edgesynth places the network, and then
- the known-answer output equals the case's expected_output.npy;
- the project's writes (`plan_trace`, byte for byte what the generated C writes) run on the
  virtual device reproduce every known-answer word and the output read back from data memory,
  with no memory hazard (other than the ones the vendor's own placement has, KNOWN_HAZARDS).
A network the planner does not handle yet must be refused with `Unplaceable` (one clear
message naming the feature), never placed wrong. benchmarks/placement_corpus.py prints the same
check as a table with the latency against the vendor's hand placement.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from edgesynth.targets.max7800x.izer import job_from_options
from edgesynth.targets.max7800x.izer_args import parse_izer_args
from edgesynth.targets.max7800x.network_sim import simulate
from edgesynth.targets.max7800x.pipeline import SynthesisResult, check_network, load_network
from edgesynth.targets.max7800x.placement import Unplaceable
from edgesynth.targets.max7800x.placement.verify import device_check
from edgesynth.targets.max7800x.placement.yamltext import without_placement
from edgesynth.targets.max7800x.plan.plan import make_plan

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"

# The network itself reads past its input (the vendor's hand placement has the same hazard).
KNOWN_HAZARDS = {
    "test-conv1d-dilation7-pad0": "unwritten input",
    "test-conv1d-dilation7-pad0-128ch": "unwritten input",
    "test-conv1d-dilation11-pad0-96ch": "unwritten input",
}

pytestmark = pytest.mark.corpus


def _cases():
    if not CORPUS.is_dir():
        return []
    return [
        pytest.param(p.parent, id=f"{p.parent.parent.name}/{p.parent.name}")
        for p in sorted(CORPUS.glob("*/*/case.json"))
        if json.loads(p.read_text())["expect"] == "ok"
    ]


def _stripped(case: Path, args: list[str], folder: Path) -> list[str]:
    at = args.index("--config-file") + 1
    path = folder / "stripped.yaml"
    path.write_text(without_placement((case / args[at]).read_text()))
    return [*args[:at], str(path), *args[at + 1 :]]


@pytest.mark.parametrize("case", _cases())
def test_automatic_placement_runs_on_the_virtual_device(case: Path, tmp_path, monkeypatch):
    info = json.loads((case / "case.json").read_text())
    args = _stripped(case, list(info["args"]), tmp_path)
    monkeypatch.chdir(case)
    with contextlib.redirect_stdout(io.StringIO()):
        opts = parse_izer_args([*args, "--test-dir", str(tmp_path), "--prefix", "p"])
        job = job_from_options(opts)
        try:
            net, sample = load_network(job)
        except Unplaceable as refused:
            assert "does not handle" in refused.message
            pytest.skip(f"not placed: {refused.message.split(';')[0]}")
        assert job.placement is not None
        check_network(net, job)
        result = SynthesisResult(net, sample, simulate(net, sample, job.sim))
        plan = make_plan(result, opts)
    expected = np.load(case / "expected_output.npy")
    assert np.array_equal(result.output, expected)
    check = device_check(plan, case.parent.name)
    assert check.kat_ok, check.details
    allowed = KNOWN_HAZARDS.get(case.name)
    assert all(allowed and h.startswith(allowed) for h in check.hazards), check.hazards
    assert np.array_equal(check.output, expected)
