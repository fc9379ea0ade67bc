"""Every corpus case with a trace: replaying the vendor's own writes reproduces every word of its
known answer, and the output read back per the last layer's registers equals
expected_output.npy. Cases the model cannot run are listed with the reason (strict xfail)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from edgesynth.targets.max7800x.vdevice import cycles
from edgesynth.targets.max7800x.vdevice.knownanswer import load_kat
from edgesynth.targets.max7800x.vdevice.runner import (
    check_kat,
    hazards_of,
    network_output,
    run_trace_file,
)

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "cases"

# The vendor tool's generated firmware does not compute its own known answer on these: the
# virtual device runs them as written and reports why.
VENDOR_FIRMWARE_DEFECTS = {
    "test-fifostream-group-notvga64x48-hwc": (
        "unwritten input",
        "the fast-FIFO loader packs only the first quadrant's processors: processors 16 and 32 "
        "never receive their channels",
    ),
    "test-fifostream-x4-cifar-hwc": (
        "overlapping kernel blocks",
        "calcx4 layers' kernels overwrite layer 0's kernels (vendor kernel allocator)",
    ),
    "test-fifostream-x4-cifar-hwc-128x128": (
        "overlapping kernel blocks",
        "calcx4 layers' kernels overwrite layer 0's kernels (vendor kernel allocator)",
    ),
    "test-ffsx4-cifar10-hwc": (
        "overlapping kernel blocks",
        "calcx4 layers' kernels overwrite layer 0's kernels (vendor kernel allocator)",
    ),
    "test-ffsx4readahead-cifar10-hwc": (
        "overlapping kernel blocks",
        "calcx4 layers' kernels overwrite layer 0's kernels (vendor kernel allocator)",
    ),
    "test-ffsx4readahead-nopad-multipass5-w8": (
        "overlapping kernel blocks",
        "layer 0's kernels run into the instance where layer 1 keeps its calcx4 kernels",
    ),
}

# Not modeled yet.
MODEL_GAPS: dict[str, str] = {}

# Hazards the vendor's (correct) firmware really has; anything else fails the test.
KNOWN_HAZARDS = {
    "test-conv1d-dilation7-pad0": {"unwritten input"},
    "test-conv1d-dilation7-pad0-128ch": {"unwritten input"},
    "test-conv1d-dilation11-pad0-96ch": {"unwritten input"},
}


def _cases():
    if not CORPUS.is_dir():
        return []
    params = []
    for case in sorted(CORPUS.glob("*/*/trace.bin")):
        key = f"{case.parent.parent.name}/{case.parent.name}"
        marks = [pytest.mark.corpus]
        name = case.parent.name
        if name in VENDOR_FIRMWARE_DEFECTS:
            reason = "vendor firmware defect: " + VENDOR_FIRMWARE_DEFECTS[name][1]
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        elif key in MODEL_GAPS:
            marks.append(pytest.mark.xfail(strict=True, reason="not modeled: " + MODEL_GAPS[key]))
        params.append(pytest.param(case.parent, id=key, marks=marks))
    return params


@pytest.mark.parametrize("case", _cases())
def test_trace_reproduces_known_answer(case: Path):
    device = case.parent.name
    result = run_trace_file(case / "trace.bin", device)
    kat = load_kat(case / "kat.npz")
    report = check_kat(result, kat)
    hazards = {h.kind for h in hazards_of(result, kat) if not h.is_note}
    name = case.name
    if name in VENDOR_FIRMWARE_DEFECTS:
        assert VENDOR_FIRMWARE_DEFECTS[name][0] in hazards
    else:
        assert hazards <= KNOWN_HAZARDS.get(name, set()), hazards
    assert report.ok, "\n".join(report.details)
    expected = np.load(case / "expected_output.npy")
    output = network_output(result, kat)
    assert output.shape == expected.shape
    assert np.array_equal(output, expected)


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
    if os.environ.get("EDGESYNTH_NO_CORPUS"):
        pytest.skip("corpus checks disabled")
    assert len(_cases()) >= 500
