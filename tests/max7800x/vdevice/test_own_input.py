"""A layer writing over its own input: safe when its raster-order writes trail the reads it still
needs, reported ("overwrites its own input") when they run ahead of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from edgesynth.targets.max7800x.placement.verify import device_check
from izer_helpers import plan_in

ROWS, COLS = 12, 20
INPUT = 0x1000  # bytes; the input holds ROWS x COLS words from here


def _check(folder: Path, kernel: int, out_offset: int):  # type: ignore[no-untyped-def]
    """One 16-channel convolution (kernel x kernel, same size) reading from INPUT and writing
    at `out_offset` on the same processors; the plan's writes on the virtual device."""
    rng = np.random.default_rng(kernel)
    (folder / "tests").mkdir(exist_ok=True)
    np.save(folder / "tests" / "sample_own.npy", rng.integers(-128, 128, size=(16, ROWS, COLS)))
    np.save(
        folder / "tests" / "weights_own.npy",
        rng.integers(-16, 17, size=(1, 16, 16, kernel, kernel)),
    )
    layer = {
        "processors": 0xFFFF,
        "output_processors": 0xFFFF,
        "in_offset": INPUT,
        "out_offset": out_offset,
        "op": "conv2d",
        "kernel_size": f"{kernel}x{kernel}",
        "pad": kernel // 2,
        "data_format": "HWC",
    }
    spec = {"arch": "test", "dataset": "own", "layers": [layer]}
    (folder / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    _, plan = plan_in(folder, "MAX78000")
    return device_check(plan, "MAX78000")


@pytest.mark.parametrize(
    ("kernel", "below"),
    [(1, 0), (1, 4), (3, COLS + 1), (3, COLS + 8)],
)
def test_writes_that_trail_the_reads_are_safe(tmp_path: Path, kernel: int, below: int) -> None:
    """1x1: at the input's start or below it; 3x3 (pad 1): a row and a pixel below or more."""
    check = _check(tmp_path, kernel, INPUT - 4 * below)
    assert check.kat_ok and check.hazards == [], check.hazards


@pytest.mark.parametrize(("kernel", "below"), [(1, -1), (3, COLS), (3, 0)])
def test_writes_ahead_of_the_reads_are_reported(tmp_path: Path, kernel: int, below: int) -> None:
    """1x1 one word above its input, 3x3 only a row below it (or at its start): some output
    pixel lands on input a later output pixel still reads."""
    check = _check(tmp_path, kernel, INPUT - 4 * below)
    assert any(h.startswith("overwrites its own input: layer 0") for h in check.hazards), (
        check.hazards
    )
