"""The model zoo end to end: every architecture trains (a float step, then a QAT step with
batchnorm folded), writes its YAML template, and that YAML with the quantized checkpoint goes
through the synthesizer's simulator to the same outputs as the 8-bit model.

The vendor's own checkpoints of the demo architectures reproduce the corpus' known answers in
tests/nn/test_corpus_8bit.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import needs
from edgesynth.cli import main
from edgesynth.nn.qat import QatPolicy
from edgesynth.quant.files import quantize_file
from edgesynth.quant.ptq import QuantizeOptions
from edgesynth.train import deploy
from edgesynth.train.datasets import Dataset, Split
from edgesynth.train.loop import TrainConfig, run
from edgesynth.train.models import MODELS
from edgesynth.train.yamlgen import write_yaml_template, yaml_template

pytestmark = pytest.mark.train


# the data each architecture is built for: (channels, *spatial), classes
INPUTS = {
    "ai85net5": ((1, 28, 28), 10),
    "ai85netextrasmall": ((1, 28, 28), 10),
    "ai85nascifarnet": ((3, 32, 32), 10),
    "ai85simplenet": ((3, 32, 32), 100),
    "ai85ressimplenet": ((3, 32, 32), 100),
    "ai85kws20netv2": ((128, 128), 21),
    "ai85kws20netv3": ((128, 128), 21),
    "ai87kws20netv3": ((128, 128), 21),
    "ai85cdnet": ((3, 64, 64), 2),
    "ai85faceidnet": ((3, 160, 120), 512),  # an embedding: trained by regression, below
}
# KWS v2 pads 1D convolutions of more than 64 channels, which the MAX78002 cannot (its v3 is
# ai87kws20netv3), so it is a MAX78000 model only.
CASES = [
    *(
        (name, "MAX78002" if name.startswith("ai87") else "MAX78000")
        for name in INPUTS
        if name != "ai85faceidnet"
    ),
    ("ai85ressimplenet", "MAX78002"),
    ("ai85simplenet", "MAX78002"),
    ("ai85cdnet", "MAX78002"),
]


def test_every_registered_model_is_covered() -> None:
    assert set(MODELS) == set(INPUTS)


def _random_dataset(shape: tuple[int, ...], classes: int, n: int) -> Dataset:
    gen = torch.Generator().manual_seed(5)
    x = torch.randint(-128, 128, (n, *shape), generator=gen).float() / 128
    y = torch.randint(0, classes, (n,), generator=gen)
    names = [str(i) for i in range(classes)]
    return Dataset("random", Split(x[:8], y[:8]), Split(x[8:], y[8:]), classes, names)


@pytest.mark.parametrize(("name", "chip"), CASES)
def test_zoo_model_trains_exports_and_synthesizes_to_its_8_bit_outputs(
    name: str, chip: str, tmp_path: Path, capsys
) -> None:
    shape, classes = INPUTS[name]
    ds = _random_dataset(shape, classes, 12)
    cfg = TrainConfig(
        model=name,
        dataset=ds,
        device=chip,
        epochs=2,
        batch_size=8,
        qat_policy=QatPolicy(start_epoch=1, weight_bits=8),
        seed=1,
        progress=False,
    )
    result = run(cfg, tmp_path, log=lambda line: None)
    assert [r.qat for r in result.history] == [False, True]
    yaml_path = write_yaml_template(
        tmp_path / f"{name}.yaml",
        yaml_template(
            result.model, arch=name, dataset="random", input_channels=shape[0], device=chip
        ),
    )
    quantized = tmp_path / "q.pth.tar"
    quantize_file(result.checkpoints["qat_checkpoint"], quantized, QuantizeOptions())
    net = deploy.load_model(quantized, name, ds, chip)
    metrics = deploy.eight_bit_metrics(net, ds, chip)
    check = deploy.simulator_check(yaml_path, quantized, ds, chip, metrics.predictions, 2, net)
    assert check.count == 2
    assert check.exact == 100.0
    _synthesize_and_run_on_the_virtual_device(yaml_path, quantized, ds, chip, tmp_path, capsys)


def _synthesize_and_run_on_the_virtual_device(
    yaml_path: Path, quantized: Path, ds: Dataset, chip: str, tmp_path: Path, capsys
) -> None:
    """The C project for the first test item; its own register and memory writes, run on the
    virtual device, reproduce the known answer (the 8-bit model's output) with no hazard."""
    sample = deploy.save_sample(ds.test, 0, tmp_path, "zoo")
    out = tmp_path / "synth"
    args = ["synth", str(yaml_path), str(quantized), "--device", chip]
    assert main([*args, "--sample-input", str(sample), "-o", str(out)]) == 0
    needs.tool("gcc")  # device run records the project with the host compiler
    capsys.readouterr()
    assert main(["device", "run", str(out)]) == 0
    report = capsys.readouterr().out
    assert "known answer: all" in report and "hazard:" not in report


# A 160x120 face fills more than a MAX78000 data-memory instance: the vendor streams it in
# (izer --fifo), which a YAML does not say; the MAX78000 case takes 96x64 faces.
@pytest.mark.parametrize(("chip", "size"), [("MAX78000", (96, 64)), ("MAX78002", (160, 120))])
def test_faceid_trains_by_regression_and_synthesizes_to_its_8_bit_outputs(
    chip: str, size: tuple[int, int], tmp_path: Path, capsys
) -> None:
    """FaceID learns a 512-value embedding (the vendor matches a teacher's with a squared
    error): a float step, a QAT step, then the YAML and quantized checkpoint through the
    synthesizer's arithmetic equal the 8-bit model on two faces."""
    import numpy as np
    import torch.nn.functional as F

    import edgesynth.nn as enn
    from edgesynth.flow import load_model
    from edgesynth.quant.checkpoint import model_state, write_checkpoint
    from edgesynth.sim.graph import run as run_graph
    from edgesynth.train.datasets import to_chip
    from edgesynth.train.evaluate import run_sample
    from edgesynth.train.models import create_model

    gen = torch.Generator().manual_seed(3)
    faces = torch.randint(-128, 128, (4, 3, *size), generator=gen).float() / 128
    teacher = torch.randn(4, 512, generator=gen) * 0.1
    with enn.use(chip):
        model = create_model("ai85faceidnet", num_classes=512, num_channels=3, dimensions=size)
    for qat in (False, True):
        if qat:
            from edgesynth.nn.qat import enable_qat

            enable_qat(model, QatPolicy(start_epoch=0, weight_bits=8))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        with enn.use(chip, simulate=False):
            loss = F.mse_loss(model(faces).flatten(1), teacher)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        assert torch.isfinite(loss)
    trained = write_checkpoint(
        tmp_path / "qat.pth.tar", arch="ai85faceidnet", state_dict=model_state(model)
    )
    quantized = tmp_path / "q.pth.tar"
    quantize_file(trained, quantized, QuantizeOptions())
    yaml_path = write_yaml_template(
        tmp_path / "faceid.yaml",
        yaml_template(model, arch="ai85faceidnet", dataset="faces", input_channels=3, device=chip),
    )
    samples = np.stack([to_chip(x) for x in faces[:2]])
    np.save(tmp_path / "sample.npy", samples[0])
    graph = load_model(
        yaml_path,
        checkpoint=quantized,
        sample_input=tmp_path / "sample.npy",
        options={"device": chip, "check_rules": True},
    )
    simulated = run_graph(graph, samples, keep=False)[graph.outputs[0]]
    ds = _random_dataset((3, *size), 512, 12)
    net = deploy.load_model(quantized, "ai85faceidnet", ds, chip)
    for i in range(2):
        expected = run_sample(net, samples[i], dims=2, eight_bit=True, device=chip)
        np.testing.assert_array_equal(simulated[i].reshape(-1), expected.reshape(-1))
    _synthesize_and_run_on_the_virtual_device(yaml_path, quantized, ds, chip, tmp_path, capsys)
