"""Planning a MAX7800x network the way `edgesynth izer` does, from inside its folder."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from edgesynth.targets.max7800x.commands.izer import plan_izer
from edgesynth.targets.max7800x.pipeline import SynthesisResult
from edgesynth.targets.max7800x.plan.plan import Plan


def plan_in(
    folder: Path, device: str, *options: str, config: str = "net.yaml", prefix: str = "p"
) -> tuple[SynthesisResult, Plan]:
    """`edgesynth izer --device DEVICE --config-file CONFIG OPTIONS` run in `folder` (relative
    paths such as tests/sample_*.npy resolve there), without writing the project: the
    synthesis result and the plan of every write its C makes."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            argv = ["--device", device, "--config-file", config, *options]
            return plan_izer([*argv, "--test-dir", str(Path(folder) / "o"), "--prefix", prefix])
    finally:
        os.chdir(before)
