"""edgesynth's own path (`synth`, `compile`, `plan`) against `izer` (write for write) on the corpus.

On the 7 cases whose vendor firmware misses its own known answer, `izer` keeps the vendor's
writes (the compat quirks `unchecked_calcx4_offset` and `quadrant_packed_lanes`; the virtual
device names the hazard), while the own path's writes reproduce every known-answer word with no
hazard. On every other case that feeds the input through a FIFO, uses calcx4 or has a layer
of several input passes with 1-, 2- or 4-bit weights (the code the two paths share
differently), both paths write the same, write for write.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.cli import main
from edgesynth.targets.max7800x.codegen import project_files
from edgesynth.targets.max7800x.commands.izer import core_options, plan_izer
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.placement.verify import device_check
from edgesynth.targets.max7800x.plan.plan import make_plan
from edgesynth.targets.max7800x.plan.trace import plan_trace

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"

# The hazard the virtual device finds in the vendor's (izer's) project.
VENDOR_DEFECTS = {
    "MAX78000/test-fifostream-group-notvga64x48-hwc": "unwritten input",
    "MAX78002/test-fifostream-group-notvga64x48-hwc": "unwritten input",
    "MAX78002/test-ffsx4-cifar10-hwc": "overlapping kernel blocks",
    "MAX78002/test-ffsx4readahead-cifar10-hwc": "overlapping kernel blocks",
    "MAX78002/test-ffsx4readahead-nopad-multipass5-w8": "overlapping kernel blocks",
    "MAX78002/test-fifostream-x4-cifar-hwc": "overlapping kernel blocks",
    "MAX78002/test-fifostream-x4-cifar-hwc-128x128": "overlapping kernel blocks",
}

pytestmark = pytest.mark.corpus


def _args(case: Path) -> list[str]:
    return list(json.loads((case / "case.json").read_text())["args"])


def _fifo_or_calcx4(case: Path) -> bool:
    if any("fifo" in arg for arg in _args(case)):
        return True
    return any("calcx4" in p.read_text() for p in case.glob("*/*.yaml"))


def _narrow_multipass(case: Path) -> bool:
    """A layer with several input passes and 1-, 2- or 4-bit (or binary) weights: the kernel
    packing the two paths do differently (`compat.kernel_packing.unit_has_input`)."""
    plan = json.loads((case / "plan.json").read_text())
    if "Input expansion" not in plan:
        return False
    passes = [int(v) for v in re.findall(r"\d+", plan["Input expansion"])]
    bits = re.findall(r"[\w]+", plan["Kernel size (bits)"])
    return any(p > 1 and b in ("1", "2", "4", "b") for p, b in zip(passes, bits, strict=True))


def _cases(defects: bool) -> list:
    if not CORPUS.is_dir():
        return []
    found = []
    for path in sorted(CORPUS.glob("*/*/case.json")):
        case, name = path.parent, f"{path.parent.parent.name}/{path.parent.name}"
        if json.loads(path.read_text())["expect"] != "ok" or (name in VENDOR_DEFECTS) != defects:
            continue
        if defects or _fifo_or_calcx4(case) or _narrow_multipass(case):
            found.append(pytest.param(case, id=name))
    return found


def _plans(case: Path, tmp_path: Path):
    """The izer plan (write for write) and the own path's plan of the case."""
    argv = [*_args(case), "--test-dir", str(tmp_path), "--prefix", "p"]
    result, vendor = plan_izer(argv)
    own = make_plan(result, core_options(replace(parse_izer_args(argv), write_for_write=False)))
    return result, vendor, own


@pytest.mark.parametrize("case", _cases(defects=True))
def test_own_path_computes_the_known_answer_where_the_vendor_does_not(
    case: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(case)
    _, vendor, own = _plans(case, tmp_path)
    device = case.parent.name
    izer = device_check(vendor, device)
    hazard = VENDOR_DEFECTS[f"{device}/{case.name}"]
    assert not izer.kat_ok and any(h.startswith(hazard) for h in izer.hazards), izer.hazards
    check = device_check(own, device)
    assert check.ok, check.hazards + check.details
    np.testing.assert_array_equal(check.output, np.load(case / "expected_output.npy"))


@pytest.mark.parametrize("case", _cases(defects=False))
def test_own_path_writes_what_the_vendor_writes_where_it_is_right(
    case: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(case)
    _, vendor, own = _plans(case, tmp_path)
    assert not vendor.settings.kernels.dropped  # the vendor's packing leaves no kernel out
    ours, theirs = plan_trace(own), plan_trace(vendor)
    assert len(ours) == len(theirs)
    for phase, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert np.array_equal(a, b), f"phase {phase} differs"


def test_synth_writes_the_own_path_and_izer_the_vendors(tmp_path: Path, monkeypatch) -> None:
    """`edgesynth synth` takes the own path, `edgesynth izer` the vendor's (weights.h)."""
    case = needs.in_corpus(CORPUS / "MAX78002" / "test-ffsx4-cifar10-hwc")
    monkeypatch.chdir(case)
    yaml, checkpoint = "tests/test-ffsx4-cifar10-hwc.yaml", "tests/test-cifar10.pth.tar"
    common = ["--device", "MAX78002", "--riscv"]
    synth = ["synth", yaml, checkpoint, *common, "--izer-option=--fast-fifo-quad"]
    assert main([*synth, "-o", str(tmp_path / "synth")]) == 0
    izer = ["izer", *common, "--config-file", yaml, "--checkpoint-file", checkpoint]
    izer += ["--fast-fifo-quad", "--test-dir", str(tmp_path), "--prefix", "izer"]
    assert main([*izer, "--no-verify"]) == 0  # the vendor's project misses its known answer
    argv = [*izer[1:-4], "--test-dir", str(tmp_path), "--prefix", "x"]
    result, _ = plan_izer(argv)
    opts = parse_izer_args(argv)
    own_path = core_options(replace(opts, write_for_write=False))
    own = project_files(result, own_path, "synth")[1]["weights.h"]
    vendor = project_files(result, core_options(opts), "izer")[1]["weights.h"]
    assert own.replace("synth", "izer") != vendor
    assert (tmp_path / "synth" / "weights.h").read_text() == own
    assert (tmp_path / "izer" / "weights.h").read_text() == vendor
