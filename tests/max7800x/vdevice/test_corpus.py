"""Every corpus case with a trace: replaying the vendor's own writes reproduces every word of its
known answer, and the output read back per the last layer's registers equals
expected_output.npy. Where the vendor's own firmware is wrong, the test asserts that it fails
exactly as known: the listed hazards (kind, reading layer, culprit layer), and no others, and
the known answer missed from the listed layer on; any other outcome fails."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import needs
from edgesynth.targets.max7800x.vdevice import cycles
from edgesynth.targets.max7800x.vdevice.knownanswer import load_kat
from edgesynth.targets.max7800x.vdevice.runner import (
    check_kat,
    hazards_of,
    network_output,
    run_trace_file,
)

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "cases"


class Defect(NamedTuple):
    """How the vendor's firmware fails: its hazards as (kind, reading layer, culprit layer),
    the first layer whose known-answer words are wrong, and how many words of how many."""

    hazards: frozenset[tuple[str, int, int | None]]
    first_bad_layer: int
    missed: tuple[int, int]


_FIFO = "unwritten input"  # the fast-FIFO loader fills only the first quadrant's processors
_KERNELS = "overlapping kernel blocks"  # calcx4 kernels written over layer 0's (vendor allocator)

# The vendor tool's generated firmware does not compute its own known answer on these: the
# virtual device runs them as written and reports why.
VENDOR_FIRMWARE_DEFECTS = {
    "MAX78000/test-fifostream-group-notvga64x48-hwc": Defect(
        frozenset({(_FIFO, 0, None)}), 2, (15, 24)
    ),
    "MAX78002/test-fifostream-group-notvga64x48-hwc": Defect(
        frozenset({(_FIFO, 0, None)}), 2, (15, 24)
    ),
    "MAX78002/test-fifostream-x4-cifar-hwc": Defect(
        frozenset({(_KERNELS, 2, 0), (_KERNELS, 3, 0)}), 3, (48, 48)
    ),
    "MAX78002/test-fifostream-x4-cifar-hwc-128x128": Defect(
        frozenset({(_KERNELS, 2, 0), (_KERNELS, 3, 0)}), 3, (767, 768)
    ),
    "MAX78002/test-ffsx4-cifar10-hwc": Defect(frozenset({(_KERNELS, 3, 0)}), 3, (48, 48)),
    "MAX78002/test-ffsx4readahead-cifar10-hwc": Defect(frozenset({(_KERNELS, 3, 0)}), 3, (48, 48)),
    "MAX78002/test-ffsx4readahead-nopad-multipass5-w8": Defect(
        frozenset({(_KERNELS, 1, 0)}), 3, (1, 4)
    ),
}

# Hazards the vendor's (correct) firmware really has; anything else fails the test.
KNOWN_HAZARDS = {
    "test-conv1d-dilation7-pad0": {"unwritten input"},
    "test-conv1d-dilation7-pad0-128ch": {"unwritten input"},
    "test-conv1d-dilation11-pad0-96ch": {"unwritten input"},
}


def _case_dirs() -> list[Path]:
    return sorted(t.parent for t in CORPUS.glob("*/*/trace.bin")) if CORPUS.is_dir() else []


def _key(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _cases(defects: bool) -> list:
    return [
        pytest.param(case, id=_key(case), marks=pytest.mark.corpus)
        for case in _case_dirs()
        if (_key(case) in VENDOR_FIRMWARE_DEFECTS) == defects
    ]


@pytest.mark.parametrize("case", _cases(defects=False))
def test_trace_reproduces_known_answer(case: Path):
    result = run_trace_file(case / "trace.bin", case.parent.name)
    kat = load_kat(case / "kat.npz")
    report = check_kat(result, kat)
    hazards = {h.kind for h in hazards_of(result, kat) if not h.is_note}
    assert hazards <= KNOWN_HAZARDS.get(case.name, set()), hazards
    assert report.ok, "\n".join(report.details)
    expected = np.load(case / "expected_output.npy")
    output = network_output(result, kat)
    assert output.shape == expected.shape
    assert np.array_equal(output, expected)


@pytest.mark.parametrize("case", _cases(defects=True))
def test_vendor_firmware_fails_with_its_known_hazard(case: Path):
    defect = VENDOR_FIRMWARE_DEFECTS[_key(case)]
    result = run_trace_file(case / "trace.bin", case.parent.name)
    kat = load_kat(case / "kat.npz")
    report = check_kat(result, kat)
    hazards = {(h.kind, h.layer, h.culprit) for h in hazards_of(result, kat) if not h.is_note}
    assert hazards == defect.hazards
    assert (report.mismatches, report.words) == defect.missed
    assert report.first_bad_layer == defect.first_bad_layer


@pytest.mark.corpus
def test_every_listed_defect_is_in_the_corpus(corpus: Path):
    assert {_key(c) for c in _case_dirs()} >= set(VENDOR_FIRMWARE_DEFECTS)


def _latency_cases():
    if not CORPUS.is_dir():
        return []
    params = []
    for plan in sorted(CORPUS.glob("MAX78000/*/plan.json")):
        if (plan.parent / "trace.bin").is_file() and "Estimated latency" in json.loads(
            plan.read_text()
        ):
            params.append(pytest.param(plan.parent, id=plan.parent.name, marks=pytest.mark.corpus))
    return params


@pytest.mark.parametrize("case", _latency_cases())
def test_cycle_estimate_matches_the_vendor(case: Path):
    latency = json.loads((case / "plan.json").read_text())["Estimated latency"]
    result = run_trace_file(case / "trace.bin", "MAX78000")
    estimates = cycles.estimate_all(result.programs, result.layers)
    # The vendor marks streaming layers with a negative estimate.
    assert estimates == [abs(v) for v in latency["layers"]]
    assert cycles.total_cycles(estimates) == latency["total"]


def test_corpus_is_present():
    if os.environ.get("EDGESYNTH_NO_CORPUS") and not needs.in_ci():
        pytest.skip("corpus checks disabled (EDGESYNTH_NO_CORPUS; ignored in CI)")
    assert len(_case_dirs()) >= 500
