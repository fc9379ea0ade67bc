"""One network, every front end, every target, on real data (issue: one network graph).

A small MNIST CNN is trained with `edgesynth train` on the first 8,000 images of the real MNIST
test set (../shared/data/mnist; the mnist-test-split dataset); 1,000 of the last 2,000 images,
used for neither training nor calibration, are the test images. Three models go through
`edgesynth compile` to every registered target (`edgesynth targets`; REFUSALS names the models
a target refuses, and the message) and through `edgesynth run`:

- the trained, quantized checkpoint with the YAML training wrote (vendor-format front end);
- its float ONNX export (ONNX front end, each target's own post-training quantization);
- the vendor's MNIST demo network (corpus YAML + checkpoint), fed the same images scaled as the
  vendor's training does.

Each target's top-1 agrees with the float model (ONNX Runtime / PyTorch) on at least 99% of the
images, or for the vendor network with the MAX78000 simulation; where an executor checks emitted
files (Gati's functional model on program.dwp), it equals the program's reference graph.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.targets.base import target_names

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MNIST = SHARED / "data" / "mnist"
VENDOR_MNIST = SHARED / "corpus" / "cases" / "MAX78000" / "mnist"
TARGETS = target_names()  # every registered target (edgesynth.targets entry points)
# What a target refuses, by model kind ("yaml": the vendor description + checkpoint, an integer
# network; "onnx": the float export), and a line of its message: every other pair must compile
# and agree (a new target is expected to run every model until it is listed here).
REFUSALS = {
    ("gap8", "yaml"): "is not supported",
    ("xdnn", "yaml"): "xDNN needs calibration inputs",
    ("xdnn", "onnx"): "operator `clip` does not run on xDNN",  # the export's ReLU6-style clips
}
TEST_IMAGES = 1000

pytestmark = [pytest.mark.slow, pytest.mark.train]


@pytest.fixture(scope="module")
def mnist():
    from edgesynth.train.datasets import load_dataset, to_chip

    ds = load_dataset("mnist-test-split", MNIST)
    x = ds.test.x[:TEST_IMAGES]
    return {
        "x": x.numpy().astype(np.float32),
        "chip": to_chip(x),  # the 8-bit input the chip takes (the vendor's scaling)
        "labels": ds.test.y[:TEST_IMAGES].numpy(),
        "calibration": ds.train.x[-500:].numpy().astype(np.float32),
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """`edgesynth train`: two epochs (QAT in the second) on 2,000 training images."""
    root = tmp_path_factory.mktemp("matrix")
    status = main(
        [
            "train",
            "--dataset", "mnist-test-split",
            "--data", str(MNIST),
            "--epochs", "2",
            "--train-limit", "2000",
            "--out-dir", str(root),
            "--name", "run",
            "--yaml-template", str(root / "net.yaml"),
            "--save-sample", "0",
            "--deterministic",
            "--no-progress",
            "--no-tensorboard",
        ]
    )  # fmt: skip
    assert status == 0
    run = root / "run"
    tests = root / "tests"
    tests.mkdir()
    shutil.copy(run / "sample_mnist.npy", tests / "sample_mnist.npy")
    return {"root": root, "yaml": root / "net.yaml", "float": run / "qat_best.pth.tar",
            "quantized": run / "qat_best-q.pth.tar"}  # fmt: skip


def _compile(args: list[str], out: Path, cwd: Path, refusal: str | None = None) -> dict | None:
    """`edgesynth compile`; with `refusal`, the one message it must refuse with (None back)."""
    here = Path.cwd()
    os.chdir(cwd)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            status = main(["compile", *args, "-o", str(out)])
    finally:
        os.chdir(here)
    if refusal is not None:
        assert status == 1 and err.getvalue().startswith("edgesynth: error:"), err.getvalue()
        assert refusal in err.getvalue()
        assert not out.exists()
        return None
    assert status == 0, err.getvalue()
    return json.loads((out / "compiled.json").read_text())


def _run(folder: Path, x: np.ndarray, tmp: Path) -> np.ndarray:
    np.save(tmp / "x.npy", x)
    assert main(["run", str(folder), "-i", str(tmp / "x.npy"), "-o", str(tmp / "y.npy")]) == 0
    return np.load(tmp / "y.npy")


def _agreement(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a.reshape(len(a), -1).argmax(1) == b.reshape(len(b), -1).argmax(1)))


def _float_model(trained: dict[str, Path], x: np.ndarray) -> np.ndarray:
    """The trained network as PyTorch computes it in float."""
    import torch

    from edgesynth.quant.checkpoint import read_checkpoint
    from edgesynth.train.evaluate import model_for_checkpoint
    from edgesynth.train.export import float_model

    net, _ = model_for_checkpoint(read_checkpoint(trained["float"]), sample_shape=x.shape[1:])
    net = float_model(net, str(trained["float"]))
    with torch.no_grad():
        return net(torch.from_numpy(x)).numpy()


def _fewer(mnist: dict, target: str) -> dict:
    """The MAX78002 runs the MAX78000's arithmetic: 300 images check it (1,000 elsewhere)."""
    if target != "max78002":
        return mnist
    return {k: v[:300] if k != "calibration" else v for k, v in mnist.items()}


@pytest.mark.parametrize("target", TARGETS)
def test_trained_checkpoint(target: str, trained, mnist, tmp_path: Path) -> None:
    mnist = _fewer(mnist, target)
    out = tmp_path / "out"
    args = [str(trained["yaml"]), "--checkpoint", str(trained["quantized"]), "-t", target]
    refusal = REFUSALS.get((target, "yaml"))
    if _compile(args, out, trained["root"], refusal) is None:
        return
    reference = _float_model(trained, mnist["x"])
    if not target.startswith("max7800"):
        assert _agreement(_run(out, mnist["chip"], tmp_path), reference) >= 0.99
        return
    # the chip's integer output codes: they rank the classes as its scaled output does
    import torch

    import edgesynth.nn as enn
    from edgesynth.quant.checkpoint import read_checkpoint
    from edgesynth.train.evaluate import model_for_checkpoint

    codes = tmp_path / "codes.npy"
    np.save(tmp_path / "x.npy", mnist["chip"])
    assert main(["run", str(out), "-i", str(tmp_path / "x.npy"), "--integer",
                 "-o", str(codes)]) == 0  # fmt: skip
    y = np.load(codes)
    assert _agreement(y, reference) >= 0.99
    # the chip computes what the 8-bit training model does
    ck = read_checkpoint(trained["quantized"])
    net, _ = model_for_checkpoint(ck, sample_shape=mnist["x"].shape[1:])
    with enn.use(target.upper(), simulate=True), torch.no_grad():
        eight_bit = net(torch.from_numpy(mnist["chip"]).double()).numpy()
    np.testing.assert_array_equal(y, eight_bit.reshape(len(eight_bit), -1))


@pytest.mark.parametrize("target", TARGETS)
def test_onnx_export(target: str, trained, mnist, tmp_path: Path) -> None:
    import onnxruntime as ort

    mnist = _fewer(mnist, target)
    from edgesynth.quant.checkpoint import read_checkpoint
    from edgesynth.train.evaluate import model_for_checkpoint
    from edgesynth.train.export import export_onnx, float_model

    net, _ = model_for_checkpoint(read_checkpoint(trained["float"]), sample_shape=(1, 28, 28))
    model = tmp_path / "model.onnx"
    export_onnx(float_model(net, "ck"), (1, 28, 28), model)
    np.save(tmp_path / "calib.npy", mnist["calibration"])
    out = tmp_path / "out"
    args = [str(model), "-t", target, "-c", str(tmp_path / "calib.npy")]
    if _compile(args, out, tmp_path, REFUSALS.get((target, "onnx"))) is None:
        return
    y = _run(out, mnist["x"], tmp_path)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    reference = session.run(None, {"input": mnist["x"]})[0]
    assert _agreement(y, reference) >= 0.99
    if target == "gati":  # the functional model on program.dwp == the program's reference
        from edgesynth.flow import prepare_inputs, run_folder
        from edgesynth.sim.graph import run

        result = run_folder(out, mnist["x"][:200])
        program = result.program
        codes = prepare_inputs(program.inputs[0], mnist["x"][:200])
        ref = run(program.graph, codes, keep=False)[program.graph.outputs[0]]
        np.testing.assert_array_equal(result.codes, ref.reshape(result.codes.shape))


def _vendor_output(target: str, mnist, tmp: Path) -> np.ndarray | None:
    """The vendor network's outputs on `target`; None where the target refuses it."""
    case = tmp / "mnist"
    if not case.is_dir():
        shutil.copytree(VENDOR_MNIST, case)
    yaml, ck = "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar"
    out = tmp / f"out-{target}"
    refusal = REFUSALS.get((target, "yaml"))
    if _compile([yaml, "--checkpoint", ck, "-t", target], out, case, refusal) is None:
        return None
    return _run(out, mnist["chip"], tmp)


@pytest.fixture(scope="module")
def vendor_reference(mnist, tmp_path_factory) -> np.ndarray:
    """The vendor's MNIST network on the MAX78000 simulation (computed once)."""
    y = _vendor_output("max78000", mnist, tmp_path_factory.mktemp("vendor"))
    assert y is not None
    return y


def test_vendor_mnist_on_max78000(mnist, vendor_reference) -> None:
    assert np.mean(vendor_reference.argmax(1) == mnist["labels"]) > 0.97


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "max78000"])
def test_vendor_mnist(target: str, mnist, vendor_reference, tmp_path: Path) -> None:
    """The other targets agree with the vendor network's MAX78000 simulation."""
    images = len(_fewer(mnist, target)["chip"])
    y = _vendor_output(target, _fewer(mnist, target), tmp_path)
    if y is None:  # refused, as REFUSALS says
        return
    assert _agreement(y, vendor_reference[:images]) >= 0.99
