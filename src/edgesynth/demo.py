"""`edgesynth demo`: synthesize the example network shipped in examples/demo, end to end.

Weights are generated with a fixed seed (the network is an `arch: test` description), the
sample is a real MNIST test digit, and the known-answer output is computed bit-exactly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo"
WEIGHT_SHAPES = [(16, 1, 3, 3), (32, 16, 3, 3), (32, 32, 3, 3), (10, 32)]


def write_demo_inputs(folder: Path, seed: int = 0) -> None:
    """The files the vendor flow expects for `arch: test`, under `folder`."""
    if not EXAMPLE.is_dir():
        raise EdgesynthError(f"the example network is missing: {EXAMPLE}")
    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE / "network.yaml", tests / "demo.yaml")
    shutil.copy(EXAMPLE / "sample_digit7.npy", tests / "sample_demo.npy")
    rng = np.random.default_rng(seed)
    with open(tests / "weights_demo.npy", "wb") as handle:
        for shape in WEIGHT_SHAPES:
            np.save(handle, rng.integers(-128, 128, size=shape, dtype=np.int64))


def run_demo(out: Path, device: str = "MAX78000") -> Path:
    from edgesynth.targets.max7800x.izer import run_izer

    write_demo_inputs(out)
    argv = ["--device", device, "--config-file", str(out / "tests" / "demo.yaml"), "--verbose"]
    argv += ["--test-dir", str(out), "--prefix", "kat", "--sample-numpy-filename", "output"]
    import os

    here = Path.cwd()
    os.chdir(out)  # the vendor resolves tests/... against the working directory
    try:
        argv[3] = "tests/demo.yaml"
        argv[argv.index("--test-dir") + 1] = "."
        run_izer(argv)
    finally:
        os.chdir(here)
    return out / "kat" / "output.npy"
