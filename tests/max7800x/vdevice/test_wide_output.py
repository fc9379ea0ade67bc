"""32-bit output over several pixels with more than one output pass or a write gap: the
firmware sets LCTRL1.wptr_inc to passes x (write_gap + 1) - 1 at both widths, and the known
answer (the vendor's unload layout) has 32-bit pixels 4 x passes x (write_gap + 1) words apart,
so in 32-bit mode the write pointer advances four words per step. No corpus case has 32-bit
data over several pixels with a non-zero wptr_inc (the vendor's FPN detector does: its class
and box outputs are 32-bit, 126 channels, 32x40 pixels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from edgesynth.targets.max7800x.placement.verify import device_check
from edgesynth.targets.max7800x.rules.sizes import processors_per_pass
from izer_helpers import plan_in


def _network(folder: Path, channels: int, write_gap: int) -> None:
    rng = np.random.default_rng(channels + write_gap)
    (folder / "tests").mkdir()
    with open(folder / "tests" / "weights_wide.npy", "wb") as stream:
        np.save(stream, rng.integers(-128, 128, size=(64, 3, 3, 3)))
        np.save(stream, rng.integers(-128, 128, size=(channels, 64, 3, 3)))
    with open(folder / "tests" / "bias_wide.npy", "wb") as stream:
        np.save(stream, rng.integers(-128, 128, size=64))
        np.save(stream, rng.integers(-128, 128, size=channels))
    np.save(folder / "tests" / "sample_wide.npy", rng.integers(-128, 128, size=(3, 6, 7)))
    every = 0xFFFFFFFFFFFFFFFF
    per_pass = processors_per_pass(channels, 64, 4)
    conv = {"op": "conv2d", "kernel_size": "3x3", "pad": 1}
    layers = [
        {**conv, "processors": 0x7, "output_processors": every, "out_offset": 0x2000,
         "activate": "ReLU", "data_format": "HWC"},
        {**conv, "processors": every, "output_processors": (1 << per_pass) - 1, "out_offset": 0,
         "output_width": 32, "write_gap": write_gap},
    ]  # fmt: skip
    spec = {"arch": "test", "dataset": "wide", "bias": "wide", "layers": layers}
    (folder / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
@pytest.mark.parametrize(("channels", "write_gap"), [(128, 0), (126, 0), (100, 1), (40, 1)])
def test_32_bit_pixels_lie_four_words_per_pointer_step_apart(
    tmp_path: Path, device: str, channels: int, write_gap: int
) -> None:
    _network(tmp_path, channels, write_gap)
    result, plan = plan_in(tmp_path, device)
    assert result.output.shape == (channels, 6, 7)
    check = device_check(plan, device)
    assert check.kat_ok, check.details
    assert check.hazards == []
    np.testing.assert_array_equal(check.output, result.output)
