"""The corpus' trained demo networks, rebuilt from edgesynth.nn, return the known answer.

Each case's checkpoint goes into the model its `arch` names; in 8-bit mode the model's output
for the case's sample must equal the vendor synthesizer's expected_output.npy exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
DEMOS = [
    "MAX78000/mnist",
    "MAX78000/mnist-riscv",
    "MAX78000/cifar-10",
    "MAX78000/kws20_v3",
    "MAX78002/mnist",
    "MAX78002/mnist-riscv",
    "MAX78002/cifar-10",
    "MAX78002/kws20_v3_1",
    "MAX78000/test-faceid",  # ai85faceidnet: the zoo's FaceID with the vendor's checkpoint
    "MAX78002/test-faceid",
]


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("name", DEMOS)
def test_demo_network_8bit_equals_expected_output(name: str, tmp_path: Path) -> None:
    case = CORPUS / name
    info = json.loads((case / "case.json").read_text())
    sample = next((case / "tests").glob("sample_*.npy"))
    out = tmp_path / "out.npy"
    result = run_cli(
        *[
            "evaluate",
            "--device",
            info["device"],
            "--checkpoint",
            str(case / _arg(info["args"], "--checkpoint-file")),
            "--sample-input",
            str(sample),
            "--8-bit",
            "--output",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    expected = np.load(case / "expected_output.npy")
    actual = np.load(out)
    assert actual.dtype == np.int64
    np.testing.assert_array_equal(actual, expected)
