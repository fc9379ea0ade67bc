"""`edgesynth export --8-bit` of the vendor's quantized MNIST network (average pooling: the
exporter's gaps are filled): ONNX Runtime gives the chip's integers on real MNIST images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import edgesynth.nn as enn
from edgesynth.cli import main
from edgesynth.quant.checkpoint import read_checkpoint
from edgesynth.train.datasets import load_dataset
from edgesynth.train.evaluate import model_for_checkpoint
from needs import module

pytestmark = pytest.mark.corpus

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CHECKPOINT = SHARED / "corpus/cases/MAX78000/mnist/trained/ai85-mnist-qat8-q.pth.tar"


def test_8bit_export_of_an_avgpool_network_is_the_chips_arithmetic(tmp_path: Path, capsys):
    ort = module("onnxruntime")
    out = tmp_path / "mnist-8bit.onnx"
    argv = ["export", str(CHECKPOINT), "-o", str(out), "--8-bit", "--input-shape", "1,28,28"]
    assert main(argv) == 0
    assert "largest difference 0" in capsys.readouterr().out
    x = torch.round(load_dataset("mnist-test-split", SHARED / "data/mnist").test.x[:300] * 128)
    net, _ = model_for_checkpoint(read_checkpoint(CHECKPOINT), sample_shape=(1, 28, 28))
    with torch.no_grad(), enn.use("MAX78000", simulate=True):
        want = net(x.double()).numpy()
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x.float().numpy()})[0]
    assert np.array_equal(got, want.reshape(got.shape))
    # without --input-shape: the vendor's checkpoint does not record it
    assert main(["export", str(CHECKPOINT), "-o", str(tmp_path / "b.onnx"), "-8"]) == 1
    assert "give it with --input-shape C,H,W" in capsys.readouterr().err
    assert not (tmp_path / "b.onnx").exists()
