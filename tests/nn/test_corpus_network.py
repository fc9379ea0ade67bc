"""Every corpus case with a trained checkpoint, run by a model of edgesynth.nn layers.

The case's YAML and checkpoint are loaded as the synthesizer loads them; `from_network` turns
that into a PyTorch model of edgesynth.nn layers (convolutions, pooling, element-wise layers,
routing), and in 8-bit mode it must return the vendor's expected_output.npy exactly. Cases the
vendor refuses must be refused by the device rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.izer import job_from_options
from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
from edgesynth.targets.max7800x.pipeline import check_network, load_network
from edgesynth.train.vendor_model import from_network

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"


def _trained_cases() -> list[Path]:
    cases = []
    for info_file in sorted(CORPUS.glob("*/*/case.json")):
        if "--checkpoint-file" in json.loads(info_file.read_text())["args"]:
            cases.append(info_file.parent)
    return cases


CASES = _trained_cases()


def test_all_trained_cases_are_here() -> None:
    assert len(CASES) == 72


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.parent.name}/{c.name}")
def test_edgesynth_nn_model_returns_expected_output(case: Path) -> None:
    info = json.loads((case / "case.json").read_text())
    opts = parse_izer_args([*info["args"], "--test-dir", "unused", "--prefix", "unused"])
    job = job_from_options(opts, base_dir=case)
    net, sample = load_network(job)
    if info["expect"] == "error":
        with pytest.raises(EdgesynthError):
            check_network(net, job)
        return
    model = from_network(net)
    assert all(isinstance(m, enn.HardwareLayer) for m in model.ops.values())
    setting = {"simulate": True, "avg_pool_rounding": opts.avg_pool_rounding}
    with enn.use(opts.device_spec.name, **setting), torch.no_grad():
        out = model(torch.from_numpy(sample).double()[None])[0]
    expected = np.load(case / "expected_output.npy")
    np.testing.assert_array_equal(out.numpy().astype(np.int64), expected)
