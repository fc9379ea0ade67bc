"""`--yaml-template` writes descriptions the synthesizer accepts and computes right with.

The template of each demo architecture, with the corpus' trained checkpoint and sample, goes
through the synthesizer's loader, device rules and simulator, which must reproduce the case's
expected_output.npy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgesynth.nn as enn
from edgesynth.targets.max7800x.description.assemble import BuildOptions
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.options import Max7800xOptions
from edgesynth.targets.max7800x.pipeline import SynthesisJob, synthesize
from edgesynth.train.models import create_model
from edgesynth.train.yamlgen import write_yaml_template, yaml_template

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"

CASES = [
    ("MAX78000/mnist", "ai85-mnist-qat8-q", "ai85net5", (1, 28, 28), 10),
    ("MAX78002/mnist", "ai85-mnist-qat8-q", "ai85net5", (1, 28, 28), 10),
    ("MAX78000/cifar-10", "ai85-cifar10-qat8-q", "ai85nascifarnet", (3, 32, 32), 10),
    ("MAX78002/cifar-10", "ai85-cifar10-qat8-q", "ai85nascifarnet", (3, 32, 32), 10),
    ("MAX78000/kws20_v3", "ai85-kws20_v3-qat8-q", "ai85kws20netv3", (128, 128, 1), 21),
    ("MAX78002/kws20_v3_1", "ai87-kws20_v3-qat8-q", "ai87kws20netv3", (128, 128, 1), 21),
]


@pytest.mark.parametrize(
    ("case", "ck", "arch", "shape", "classes"), CASES, ids=[c[0] for c in CASES]
)
def test_template_synthesizes_to_the_known_answer(
    case: str, ck: str, arch: str, shape: tuple[int, ...], classes: int, tmp_path: Path
) -> None:
    folder = CORPUS / case
    device = case.split("/")[0]
    with enn.use(device):
        model = create_model(arch, num_classes=classes, num_channels=shape[0], dimensions=shape[1:])
    text = yaml_template(model, arch=arch, dataset="DEMO", input_channels=shape[0], device=device)
    path = write_yaml_template(tmp_path / "net.yaml", text)
    sample = next((folder / "tests").glob("sample_*.npy"))
    build = BuildOptions(
        device=get_device(device),
        checkpoint=str(folder / "trained" / f"{ck}.pth.tar"),
        sample_input=str(sample),
        base_dir=tmp_path,
    )
    job = SynthesisJob(config_file=str(path), options=Max7800xOptions(build=build))
    result = synthesize(job)  # loader, device rules, simulator
    np.testing.assert_array_equal(result.output, np.load(folder / "expected_output.npy"))


def test_template_content() -> None:
    model = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    text = yaml_template(model, arch="ai85net5", dataset="MNIST", input_channels=1)
    assert "arch: ai85net5\ndataset: MNIST\n" in text
    assert "  - name: conv2\n    max_pool: 2\n    pool_stride: 2\n" in text
    # the placement is left to edgesynth (see test_template_synthesizes_to_the_known_answer)
    assert "processors" not in text.replace("chooses processors", "")
    assert "offset" not in text.replace("memory offsets", "")
    assert "    operation: mlp\n    flatten: true\n    activate: None\n    output_width: 32" in text
