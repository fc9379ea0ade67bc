"""A ResNet-style float CNN with a ReLU after each residual addition (tests/resnet_mnist.py:
relu(x + conv(relu(conv(x)))) twice) exported by torch.onnx, compiled with `edgesynth compile -t
max78000` and `-t max78002` (post-training quantization on 300 real images; the proof runs the
project on the virtual device): each addition is one layer, the sum convolved with 1x1 identity
kernels (depthwise on the MAX78002) and activated. `edgesynth validate` on 1,000 other real
images: top-1 agreement with ONNX Runtime's float model at least 98%; the simulator equals the
program graph's reference value for value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from edgesynth.cli import main
from edgesynth.flow import compile_to, load_model
from edgesynth.sim.graph import run
from edgesynth.targets.base import get_target
from mnist_lenet import EVAL, load_mnist
from resnet_mnist import resnet_onnx

CALIBRATION = slice(8000, 8300)  # after the training images, before EVAL


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("device", ["max78000", "max78002"])
def test_resnet_blocks_with_relu_after_the_addition(device: str, tmp_path: Path, capsys) -> None:
    model = resnet_onnx()
    x, y = load_mnist()
    for name, array in (("cal", x[CALIBRATION]), ("x", x[EVAL]), ("y", y[EVAL])):
        np.save(tmp_path / f"{name}.npy", array)
    out = tmp_path / "out"
    args = ["compile", str(model), "-t", device, "--calibration", str(tmp_path / "cal.npy")]
    assert main([*args, "-o", str(out)]) == 0
    assert f"known answer reproduced on the virtual {device.upper()}" in capsys.readouterr().out
    layers = yaml.safe_load((out / "network.yaml").read_text())["layers"]
    sums = [layer for layer in layers if layer.get("eltwise") == "add"]
    assert [layer["name"] for layer in sums] == ["Add", "Add_1"]
    for layer in sums:
        assert (layer["operation"], layer["kernel_size"], layer["activate"]) == (
            "conv2d", "1x1", "ReLU"
        )  # fmt: skip
        assert layer.get("groups") == (8 if device == "max78002" else None)

    report = tmp_path / "validate.json"
    args = ["validate", str(out), "--reference", str(model), "--data", str(tmp_path / "x.npy")]
    args += ["--labels", str(tmp_path / "y.npy"), "--json", str(report)]
    assert main(args) == 0
    (output,) = json.loads(report.read_text())["outputs"]
    assert output["top1_agreement"] >= 0.98, output["top1_agreement"]

    program, _ = compile_to(load_model(model), device, calibration=x[CALIBRATION])
    codes = program.inputs[0].quantize(x[EVAL])
    simulated = get_target(device).simulate(program, [codes])[0]
    reference = run(program.graph, codes, keep=False)[program.graph.outputs[0]]
    np.testing.assert_array_equal(simulated, reference.reshape(simulated.shape))
