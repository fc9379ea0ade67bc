"""A float MNIST CNN written for the gap8 quantizer's check (not one of the repository's):
Conv/BatchNorm/ReLU/MaxPool, a third convolution, two Linear layers; trained briefly on real
MNIST through `mnist_lenet.trained` (cached per source and torch version) and exported by
torch.onnx."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import needs
from mnist_lenet import EVAL, load_mnist, trained

torch = needs.module("torch")
CALIBRATION = slice(8000, 8200)  # 200 images neither trained on nor evaluated
__all__ = ["CALIBRATION", "EVAL", "export", "load_mnist", "model", "ort_logits"]


def small_cnn():  # type: ignore[no-untyped-def]
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )


def model(mnist):  # type: ignore[no-untyped-def]
    """The CNN trained for 2 epochs of 125 steps on the first 8,000 images."""
    return trained("gap8-ptq-cnn", small_cnn, mnist, epochs=2)


def export(m, path: Path) -> Path:  # type: ignore[no-untyped-def]
    torch.onnx.export(
        m, torch.zeros(1, 1, 28, 28), str(path), input_names=["image"],
        output_names=["logits"], opset_version=13, dynamo=False,
    )  # fmt: skip
    return path


def ort_logits(path: Path, x: np.ndarray) -> np.ndarray:
    ort = needs.module("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: x[i : i + 1]})[0] for i in range(len(x))])


def agreement(folder: Path, x: np.ndarray, reference_top1: np.ndarray, rv32: int = 0) -> dict:
    """Top-1 agreement of the compiled gap8 folder with `reference_top1` on float images `x`:
    through `edgesynth run` (the bit-exact simulator) and through the generated C built for the
    host (`edgesynth pulp run`), and whether the two give the same output codes; with `rv32`,
    whether the first `rv32` images built for RV32 under qemu give the host's codes too."""
    import tempfile

    from cli_helpers import run_cli
    from edgesynth.targets.base import TensorFormat, read_manifest
    from edgesynth.targets.pulp.cli import run_program

    fmt = TensorFormat.from_json(read_manifest(folder)["inputs"][0])
    codes = fmt.quantize(x)
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "codes.npy", codes)
        r = run_cli("run", folder, "-i", Path(tmp) / "codes.npy", "--integer",
                    "-o", Path(tmp) / "sim.npy")  # fmt: skip
        assert r.exit_code == 0, r.output
        sim = np.load(Path(tmp) / "sim.npy").reshape(len(x), -1)
    host = _last_layer(run_program(folder, [codes]), len(x))
    out = {
        "simulator": float((sim.argmax(1) == reference_top1).mean()),
        "host_c": float((host.argmax(1) == reference_top1).mean()),
        "host_equals_simulator": bool(np.array_equal(host, sim)),
    }
    if rv32:
        riscv = _last_layer(run_program(folder, [codes[:rv32]], "rv32"), rv32)
        out["rv32_equals_host"] = bool(np.array_equal(riscv, host[:rv32]))
    return out


def _last_layer(ran: dict, samples: int) -> np.ndarray:
    last = max(int(k.rsplit("layer", 1)[1]) for k in ran if k.startswith("out_"))
    if samples == 1:
        return np.asarray(ran[f"out_layer{last}"]).reshape(1, -1)
    return np.stack([np.asarray(ran[f"out_{i}_layer{last}"]) for i in range(samples)])
