"""A ±1 binary MAX78002 layer trained in edgesynth.nn, through the whole command line: train
(QAT with a binary override) -> quantized checkpoint -> YAML -> `edgesynth synth` for the
MAX78002 -> the project's known answer equals the training model's 8-bit output, and the
virtual device reproduces it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.cli import main
from edgesynth.quant.checkpoint import read_checkpoint

pytestmark = [pytest.mark.train, pytest.mark.slow]

MODEL = """\
from torch import nn
import edgesynth.nn as enn


class BinNet(nn.Module):
    def __init__(self, num_classes=10, num_channels=1, dimensions=(16, 16), width=8):
        super().__init__()
        self.conv1 = enn.FusedConv2dReLU(num_channels, width, 3, padding=1, bias=True)
        self.conv2 = enn.FusedMaxPoolConv2dReLU(width, 32, 3, pool_size=2, pool_stride=2,
                                                padding=1, bias=True)
        self.conv3 = enn.FusedMaxPoolConv2dReLU(32, width, 3, pool_size=2, pool_stride=2,
                                                padding=1, bias=True)
        self.fc = enn.Linear(width * (dimensions[0] // 4) ** 2, num_classes, wide=True)

    def forward(self, x):
        return self.fc(self.conv3(self.conv2(self.conv1(x))).flatten(1))
"""

POLICY = "start_epoch: 1\nweight_bits: 8\noverrides:\n  conv2: {weight_bits: binary}\n"


def test_binary_layer_trains_and_the_project_known_answer_is_its_8_bit_output(
    tmp_path: Path, capsys
) -> None:
    from edgesynth.targets.max7800x.vdevice.knownanswer import parse_sampleoutput

    (tmp_path / "binnet.py").write_text(MODEL)
    (tmp_path / "policy.yaml").write_text(POLICY)
    model = ["--model-file", f"{tmp_path / 'binnet.py'}:BinNet"]
    yaml = tmp_path / "binnet.yaml"
    args = ["train", *model, "--dataset", "digits", "--device", "MAX78002", "--epochs", "2"]
    args += ["--qat-policy", str(tmp_path / "policy.yaml"), "--train-limit", "512"]
    args += ["--no-progress", "--deterministic", "--out-dir", str(tmp_path / "logs")]
    args += ["--name", "bin", "--simulate", "20", "--save-sample", "0"]
    assert main([*args, "--yaml-template", str(yaml)]) == 0
    out = capsys.readouterr().out
    assert "'overrides': {'conv2': {'weight_bits': 'binary'}}" in out
    assert "identical outputs 100.00%" in out
    run = tmp_path / "logs" / "bin"
    quantized, sample = run / "qat_best-q.pth.tar", run / "sample_digits.npy"
    state = read_checkpoint(quantized)["state_dict"]
    assert state["conv2.weight_bits"].item() == 1.0
    assert set(state["conv2.op.weight"].unique().tolist()) == {-1.0, 1.0}

    eight_bit = tmp_path / "eight_bit.npy"
    argv = ["evaluate", "--device", "MAX78002", "--checkpoint", str(quantized), *model]
    assert main([*argv, "--sample-input", str(sample), "-8", "--output", str(eight_bit)]) == 0
    project = tmp_path / "project"
    argv = ["synth", str(yaml), str(quantized), "--device", "MAX78002"]
    assert main([*argv, "--sample-input", str(sample), "-o", str(project)]) == 0
    assert "known answer reproduced on the virtual MAX78002: 10 of 10 words" in (
        capsys.readouterr().out
    )
    # the wide output: one 32-bit word per class, in the project's sampleoutput.h
    kat = parse_sampleoutput(project / "sampleoutput.h")
    words = np.sort(kat.expected.view(np.int32).astype(np.int64))
    np.testing.assert_array_equal(words, np.sort(np.load(eight_bit).reshape(-1)))
    needs.tool("gcc")
    assert main(["device", "run", str(project)]) == 0
    report = capsys.readouterr().out
    assert "known answer: all 10 words match" in report and "binary" in report
