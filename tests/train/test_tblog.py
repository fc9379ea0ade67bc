"""--param-hist and --pr-curves: the vendor's TensorBoard extras, read back from the event file
of a short run (a histogram per parameter tensor, a precision-recall curve per class)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgesynth.cli import main
from needs import module

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_histograms_and_pr_curves_are_in_the_run_folder(tmp_path: Path, capsys) -> None:
    module("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = ["train", "--dataset", "digits", "--epochs", "2", "--train-limit", "128"]
    args += ["--qat-policy", "None", "--no-progress", "--deterministic", "--param-hist"]
    args += ["--pr-curves", "--out-dir", str(tmp_path), "--name", "tb", "--threads", "1"]
    assert main(args) == 0
    capsys.readouterr()
    keep_all = {"tensors": 0, "histograms": 0}
    events = EventAccumulator(str(tmp_path / "tb" / "tensorboard"), size_guidance=keep_all)
    events.Reload()
    tags = events.Tags()
    assert "params/conv1.op.weight" in tags["histograms"]
    assert len(events.Histograms("params/conv1.op.weight")) == 2  # one per epoch
    assert {f"pr/{d}" for d in range(10)} <= set(tags["tensors"])
    assert len(events.Tensors("pr/3")) == 2
    assert "test/top1" in tags["scalars"]  # the scalars come with them (no --tensorboard)
