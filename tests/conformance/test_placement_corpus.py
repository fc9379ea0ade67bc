"""Automatic placement on every vendor network of the corpus, with the placement keys removed.

For every `expect: ok` case, benchmarks/placement_corpus.py (`check_case`) removes `processors`,
`output_processors`, `in_offset`, `out_offset` (and the global `output_map`) from the YAML,
lets edgesynth place the network as `edgesynth plan` does, and requires
- the known-answer output to equal the case's expected_output.npy;
- the project's writes (`plan_trace`, byte for byte what the generated C writes), run on the
  virtual device, to reproduce every known-answer word and the output read back from data
  memory, with no memory hazard (other than the ones the vendor's own placement has).
A refusal is a failure. The headline docs/placement.md and the README quote is pinned here: all
520 placed and proven; on the 202 MAX78000 networks with the vendor's latency estimate, never
slower than the hand placement, median ratio 1.0000, best 0.8335. One test runs the corpus
once (the figures are its aggregate); the failure lists every case that is not placed and
proven, with the reason.
"""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "placement_corpus.py"
CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"

# The headline (docs/placement.md "Measured", README "edgesynth plan"): update both with it.
NETWORKS = 520
LATENCY_NETWORKS = 202
MEDIAN_RATIO = 1.0
BEST_RATIO = 0.8335

pytestmark = pytest.mark.corpus


def _benchmark():
    spec = importlib.util.spec_from_file_location("placement_corpus", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the reference corpus (../shared) is absent")
def test_every_corpus_network_is_placed_and_proven_at_the_stated_latency(monkeypatch):
    bench = _benchmark()
    monkeypatch.chdir(CORPUS)  # check_case returns to the working folder it finds
    rows = [bench.check_case(case) for case in bench.cases(None)]
    failed = [
        f"{r['case']}: {r['status']}: "
        + (r.get("reason") or f"kat={r['kat']} device={r['device_ok']} {r['hazards']}")
        for r in rows
        if r["status"] != "ok"
    ]
    assert not failed, f"{len(failed)} of {len(rows)} not placed and proven:\n" + "\n".join(failed)
    assert len(rows) == NETWORKS

    ratios = bench.latency_ratios(rows)
    assert len(ratios) == LATENCY_NETWORKS
    slower = [
        r["case"] for r in rows if r.get("vendor_latency") and r["latency"] > r["vendor_latency"]
    ]
    assert not slower, f"slower than the vendor's hand placement: {slower}"
    assert round(statistics.median(ratios), 4) == MEDIAN_RATIO
    assert round(min(ratios), 4) == BEST_RATIO
