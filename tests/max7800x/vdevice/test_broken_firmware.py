"""Deliberately broken firmware: the model names the failing layer and the hazard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgesynth.targets.max7800x.vdevice.knownanswer import load_kat
from edgesynth.targets.max7800x.vdevice.regmap import MAX78000_MAP, classify
from edgesynth.targets.max7800x.vdevice.runner import (
    check_kat,
    first_divergent_layer,
    hazards_of,
    register_diff,
    run,
)
from edgesynth.targets.max7800x.vdevice.trace import from_pairs

CASES = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "cases" / "MAX78000"

pytestmark = pytest.mark.corpus


def _pairs(case: str) -> np.ndarray:
    return np.fromfile(CASES / case / "trace.bin", dtype="<u4").reshape(-1, 2).copy()


def _run(pairs: np.ndarray):
    return run(from_pairs(pairs), "MAX78000")


def test_flipped_register_field_names_the_layer():
    """Layer 2 of mnist shifts its output left instead of right (POST.scale_shft flipped)."""
    pairs = _pairs("mnist")
    reference = _run(pairs)
    post = [MAX78000_MAP.layer_reg_address(g, 2, "POST") for g in range(4)]
    written = np.isin(pairs[:, 0], post)
    assert written.any()
    pairs[written, 1] ^= 1 << 17
    broken = _run(pairs)
    kat = check_kat(broken, load_kat(CASES / "mnist" / "kat.npz"))
    assert not kat.ok
    assert kat.first_bad_layer == 4  # the known answer only checks the last layer's words
    assert first_divergent_layer(reference, broken) == 2
    changes = register_diff(reference.machine, broken.machine)
    assert {(c.layer, c.register, c.field) for c in changes} == {(2, "POST", "scale_shft")}


def test_output_moved_onto_a_live_input_is_a_hazard():
    """In the fire module, layers 2 and 3 both read layer 1's output; moving layer 2's output
    onto half of it clobbers what layer 3 still reads, and leaves layer 4's input unwritten."""
    pairs = _pairs("test-ai85-fire-cifar10")
    wptr = [MAX78000_MAP.layer_reg_address(g, 2, "WPTR_BASE") for g in range(4)]
    written = np.isin(pairs[:, 0], wptr)
    assert written.any()
    pairs[written, 1] = 1 << MAX78000_MAP.write_ptr_shift | 0x80  # processors 4-7, word 0x80
    broken = _run(pairs)
    kat = load_kat(CASES / "test-ai85-fire-cifar10" / "kat.npz")
    assert not check_kat(broken, kat).ok
    hazards = hazards_of(broken, kat)
    clobbered = [h for h in hazards if h.kind == "clobbered input"]
    assert [(h.layer, h.culprit) for h in clobbered] == [(3, 2)]
    assert "layer 1's output" in clobbered[0].message
    assert any(h.kind == "unwritten input" and h.layer == 4 for h in hazards)


def test_dropped_kernel_block_is_a_hazard():
    """Processor 5's kernel block (its kernels for every layer) is never loaded: layers 1 to 4,
    which all use processor 5, read kernel words the firmware never wrote."""
    pairs = _pairs("mnist")
    cls = classify(MAX78000_MAP, pairs[:, 0])
    dropped = (cls.region == 6) & (cls.index == 5)  # kernel memory of processor 5
    assert dropped.any()
    broken = _run(pairs[~dropped])
    kat = load_kat(CASES / "mnist" / "kat.npz")
    assert not check_kat(broken, kat).ok
    unwritten = [h for h in hazards_of(broken, kat) if h.kind == "unwritten kernels"]
    assert [h.layer for h in unwritten] == [1, 2, 3, 4]
    assert all("processor 5," in h.message for h in unwritten)


def test_intact_firmware_has_no_hazards():
    result = _run(_pairs("test-ai85-fire-cifar10"))
    kat = load_kat(CASES / "test-ai85-fire-cifar10" / "kat.npz")
    assert check_kat(result, kat).ok
    assert [h for h in hazards_of(result, kat) if not h.is_note] == []
