"""A residual, concatenating float CNN (tests/residual_mnist.py: two skip additions, a
concatenation of a block's input with its output) exported by torch.onnx, compiled with
`edgesynth compile -t max78000` and `-t max78002` (post-training quantization on 300 real
images, placed automatically: the passthrough copies a tensor read in two layouts needs are
made and placed, and the proof runs the project on the virtual device). On 1,000 other real
images the simulator equals the program graph's reference value for value, and its top-1 agrees
with ONNX Runtime's float top-1 on at least 98%."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.cli import main
from edgesynth.flow import compile_to, load_model
from edgesynth.sim.graph import run
from edgesynth.targets.base import get_target
from mnist_lenet import EVAL, load_mnist
from residual_mnist import residual_onnx

CALIBRATION = slice(8000, 8300)  # after the training images, before EVAL


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("device", ["max78000", "max78002"])
def test_residual_concat_mnist(device: str, tmp_path: Path, capsys) -> None:
    ort = needs.module("onnxruntime")
    model = residual_onnx()
    x, _ = load_mnist()
    xe = x[EVAL]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    logits = [session.run(None, {"input": xe[i : i + 1]})[0] for i in range(len(xe))]
    float_top1 = np.concatenate(logits).argmax(1)

    np.save(tmp_path / "cal.npy", x[CALIBRATION])
    out = tmp_path / "out"
    args = ["compile", str(model), "-t", device, "--calibration", str(tmp_path / "cal.npy")]
    assert main([*args, "-o", str(out)]) == 0
    report = capsys.readouterr().out
    assert f"known answer reproduced on the virtual {device.upper()}" in report
    text = (out / "network.yaml").read_text()
    assert "name: Add_copy" in text  # the copy of the block input the concatenation keeps

    program, _ = compile_to(load_model(model), device, calibration=x[CALIBRATION])
    codes = program.inputs[0].quantize(xe)
    simulated = get_target(device).simulate(program, [codes])[0]
    reference = run(program.graph, codes, keep=False)[program.graph.outputs[0]]
    np.testing.assert_array_equal(simulated, reference.reshape(simulated.shape))
    agree = float((simulated.reshape(len(xe), -1).argmax(1) == float_top1).mean())
    assert agree >= 0.98, agree
    print(f"residual/concat CNN on {device}: top-1 agreement with ONNX Runtime {agree:.3f}")
