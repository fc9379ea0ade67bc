"""Reading a multi-pass output back from data memory: slots of the last pass whose kernels are
all zero are the firmware's padding, unless the known answer checks them (a network whose last
channels have zero weights, as the vendor's dot-product demo)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.placement.verify import device_check
from izer_helpers import plan_in


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
@pytest.mark.parametrize("channels", [100, 128])
def test_zero_kernels_at_the_end_are_channels_when_checked(
    tmp_path: Path, device: str, channels: int
) -> None:
    rng = np.random.default_rng(channels)
    (tmp_path / "tests").mkdir()
    weights = rng.integers(-128, 128, size=(channels, 16, 1, 1), dtype=np.int64)
    weights[channels - 12 :] = 0  # the last twelve outputs: zero kernels
    with open(tmp_path / "tests" / "weights_rb.npy", "wb") as stream:
        np.save(stream, weights)
        np.save(stream, rng.integers(-128, 128, size=(8, channels, 1, 1), dtype=np.int64))
    np.save(tmp_path / "tests" / "sample_rb.npy", rng.integers(-128, 128, size=(16, 3, 4)))
    used = (1 << get_device(device).processors_for(channels)) - 1
    layers = [
        {"processors": 0xFFFF, "output_processors": used, "out_offset": 0x4000,
         "op": "conv2d", "kernel_size": "1x1", "pad": 0, "activate": "None"},
        {"processors": used, "out_offset": 0, "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None", "output": True},
    ]  # fmt: skip
    spec = {"arch": "test", "dataset": "rb", "layers": layers}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result, plan = plan_in(tmp_path, device, "--stop-after", "0")
    check = device_check(plan, device)
    assert check.ok, (check.details, check.hazards)
    assert check.output.shape[0] == channels
    assert np.array_equal(check.output, result.output)
