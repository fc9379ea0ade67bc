"""The `edgesynth` commands a user runs: simulate, demo, and the entry point's error handling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main

MNIST = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "corpus"
    / "cases"
    / "MAX78000"
    / "mnist"
)


def test_simulate_prints_every_layer_and_saves_outputs(tmp_path: Path, capsys) -> None:
    status = main(
        [
            "simulate",
            str(MNIST / "networks" / "mnist-chw-ai85.yaml"),
            str(MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"),
            "--device",
            "MAX78000",
            "--sample-input",
            str(MNIST / "tests" / "sample_mnist.npy"),
            "--save",
            str(tmp_path / "layers"),
            "--output",
            str(tmp_path / "kat.npy"),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    for shape in ("1x28x28", "60x28x28", "60x16x16", "56x8x8", "12x4x4", "10x1x1"):
        assert shape in out
    saved = sorted((tmp_path / "layers").glob("layer*.npy"))
    assert [p.name for p in saved] == [f"layer{i:02d}.npy" for i in range(5)]
    expected = np.load(MNIST / "expected_output.npy")
    np.testing.assert_array_equal(np.load(saved[-1]), expected)
    np.testing.assert_array_equal(np.load(tmp_path / "kat.npy"), expected)
    assert np.load(saved[0]).shape == (60, 28, 28)


def test_simulate_missing_checkpoint_for_trained_arch(capsys) -> None:
    status = main(["simulate", str(MNIST / "networks" / "mnist-chw-ai85.yaml")])
    err = capsys.readouterr().err
    assert status == 1
    assert "--checkpoint-file" in err and "ai85net5" in err


def test_unknown_device(capsys) -> None:
    status = main(
        ["simulate", str(MNIST / "networks" / "mnist-chw-ai85.yaml"), "--device", "MAX7800"]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert "MAX78000" in err and "Traceback" not in err


def _reference_demo(folder: Path) -> np.ndarray:
    """The demo network in PyTorch float64 with the hardware's rounding, written independently."""
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    arrays = []
    with open(folder / "tests" / "weights_demo.npy", "rb") as handle:
        for _ in range(4):
            arrays.append(torch.from_numpy(np.load(handle)).double())
    x = torch.from_numpy(np.load(folder / "tests" / "sample_demo.npy")).double()[None]

    def requant(acc, shift):  # round half up, then clip to 8 bits
        return torch.clamp(torch.floor(acc * 2.0**shift / 128 + 0.5), -128, 127)

    x = torch.relu(requant(f.conv2d(x, arrays[0], padding=1), -2 + 0))
    x = torch.relu(requant(f.conv2d(f.max_pool2d(x, 2), arrays[1], padding=1), -3))
    x = torch.relu(requant(f.conv2d(f.max_pool2d(x, 2), arrays[2], padding=1), -3))
    x = torch.trunc(f.avg_pool2d(x, 7))  # average truncated toward zero
    x = f.linear(x.flatten(1), arrays[3])  # 32-bit output: the raw accumulator
    return x.reshape(10, 1, 1).numpy().astype(np.int64)


def test_synthetic_demo_matches_an_independent_reference(tmp_path: Path, capsys) -> None:
    status = main(["demo", "--synthetic", "--out", str(tmp_path / "demo")])
    assert status == 0
    output = np.load(tmp_path / "demo" / "kat" / "output.npy")
    assert output.dtype == np.int64 and output.shape == (10, 1, 1)
    np.testing.assert_array_equal(output, _reference_demo(tmp_path / "demo"))
    assert "Demo finished" in capsys.readouterr().out


def test_trained_demo_end_to_end(tmp_path: Path, capsys) -> None:
    """Train + QAT + quantize, synthesize, and the 8-bit model agrees with the known answer."""
    pytest.importorskip("torch")
    status = main(["demo", "--out", str(tmp_path / "demo")])
    out = capsys.readouterr().out
    assert status == 0, out
    run = tmp_path / "demo" / "run"
    kat = np.load(run / "kat" / "output.npy")
    assert kat.shape == (10, 1, 1) and kat.dtype == np.int64
    np.testing.assert_array_equal(kat, np.load(run / "evaluate.npy"))
    assert "equals the 8-bit training model's output value for value" in out
    assert "identical outputs 100.00%" in out
