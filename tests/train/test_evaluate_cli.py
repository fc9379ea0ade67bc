"""`edgesynth evaluate`: one sample through the training-side model, errors without tracebacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
MNIST = CORPUS / "MAX78000" / "mnist"
CKPT = MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"
SAMPLE = MNIST / "tests" / "sample_mnist.npy"


def _run(args: list[str], capsys) -> tuple[int, str, str]:
    status = main(args)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_float_and_8bit_agree_on_the_class(tmp_path: Path, capsys) -> None:
    status, out, _ = _run(
        [
            "evaluate",
            "--checkpoint",
            str(CKPT),
            "--sample-input",
            str(SAMPLE),
            "-8",
            "--output",
            str(tmp_path / "q.npy"),
        ],
        capsys,
    )
    assert status == 0 and "class 7" in out
    status, out, _ = _run(
        [
            "evaluate",
            "--checkpoint",
            str(CKPT),
            "--sample-input",
            str(SAMPLE),
            "--output",
            str(tmp_path / "f.npy"),
        ],
        capsys,
    )
    assert status == 0 and "class 7" in out
    q, f = np.load(tmp_path / "q.npy"), np.load(tmp_path / "f.npy")
    assert q.dtype == np.int64 and q.shape == (10, 1, 1)
    # a quantized checkpoint in float mode is the chip's result at training scale
    np.testing.assert_array_equal(f * 2**14, q)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--checkpoint", "missing.pth.tar", "--sample-input", str(SAMPLE)],
            "checkpoint file not found",
        ),
        (
            [
                "--checkpoint",
                str(CKPT),
                "--sample-input",
                str(SAMPLE),
                "--model",
                "ai85netextrasmall",
            ],
            "does not fit the model",
        ),
        (
            ["--checkpoint", str(CKPT), "--sample-input", str(SAMPLE), "--model", "resnet"],
            "unknown model `resnet`",
        ),
        (
            ["--checkpoint", str(SAMPLE), "--sample-input", str(SAMPLE)],
            "not a readable PyTorch checkpoint",
        ),
        (
            ["--checkpoint", str(CKPT), "--sample-input", str(SAMPLE), "--device", "MAX1"],
            "unknown device",
        ),
    ],
)
def test_bad_input_is_one_clear_error(args: list[str], message: str, tmp_path, capsys) -> None:
    status, _, err = _run(["evaluate", *args, "--output", str(tmp_path / "o.npy")], capsys)
    assert status == 1
    assert message in err
    assert "Traceback" not in err and err.count("edgesynth: error:") == 1
    assert not (tmp_path / "o.npy").exists()


def test_any_network_description_with_network(tmp_path: Path, capsys) -> None:
    """An architecture outside the registry: the model comes from the YAML (faceid)."""
    case = CORPUS / "MAX78000" / "test-faceid"
    status, out, err = _run(
        [
            "evaluate",
            "--checkpoint",
            str(case / "tests" / "test-faceid-qat8-q.pth.tar"),
            "--network",
            str(case / "tests" / "test-faceid.yaml"),
            "--sample-input",
            str(next((case / "tests").glob("sample_*.npy"))),
            "-8",
            "--output",
            str(tmp_path / "o.npy"),
        ],
        capsys,
    )
    assert status == 0, err
    assert "output 512x1x1" in out and ", ...]" in out
    np.testing.assert_array_equal(
        np.load(tmp_path / "o.npy"), np.load(case / "expected_output.npy")
    )
