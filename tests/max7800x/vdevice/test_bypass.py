"""Kernel bypass (MAX78002, LCTRL0.bypass): no kernel memory, every weight 1, for ordinary and
depthwise convolutions; the project's writes reproduce the known answer on the device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from edgesynth.targets.max7800x.placement.verify import device_check
from izer_helpers import plan_in


@pytest.mark.parametrize(("channels", "groups"), [(3, 3), (8, 8), (4, 1)])
def test_bypass_runs_on_the_device(tmp_path: Path, channels: int, groups: int) -> None:
    rng = np.random.default_rng(channels)
    (tmp_path / "tests").mkdir()
    np.save(tmp_path / "tests" / "sample_byp.npy", rng.integers(-40, 40, size=(channels, 5, 6)))
    (tmp_path / "tests" / "weights_byp.npy").write_bytes(b"")  # no kernels: none stored
    layer = {
        "processors": (1 << channels) - 1,
        "out_offset": 0x2000,
        "operation": "conv2d",
        "kernel_size": "3x3",
        "pad": 1,
        "bypass": True,
        "in_channels": channels,
        "activate": "None",
    }
    if groups > 1:
        layer["groups"] = groups
    else:
        layer["out_channels"] = channels
    spec = {"arch": "test", "dataset": "byp", "layers": [layer]}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    _, plan = plan_in(tmp_path, "MAX78002")
    check = device_check(plan, "MAX78002")
    assert check.ok, (check.details, check.hazards)
