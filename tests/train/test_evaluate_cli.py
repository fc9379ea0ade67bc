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
            "a NumPy .npy file, not a PyTorch checkpoint",
        ),
    ],
)
def test_bad_input_is_one_clear_error(args: list[str], message: str, tmp_path, capsys) -> None:
    status, _, err = _run(["evaluate", *args, "--output", str(tmp_path / "o.npy")], capsys)
    assert status == 1
    assert message in err
    assert "Traceback" not in err and err.count("edgesynth: error:") == 1
    assert not (tmp_path / "o.npy").exists()


def test_unknown_device_is_a_usage_error(tmp_path: Path, capsys) -> None:
    argv = ["evaluate", "--checkpoint", str(CKPT), "--sample-input", str(SAMPLE)]
    status, _, err = _run([*argv, "--device", "MAX1", "--output", str(tmp_path / "o.npy")], capsys)
    assert status == 2
    assert "argument --device: unknown device `MAX1`" in err and "Traceback" not in err
    assert not (tmp_path / "o.npy").exists()


def test_sample_with_other_channels_blames_the_sample(tmp_path: Path, capsys) -> None:
    """A 3-channel sample for a 1-channel network names the sample, not internal keys."""
    rgb = tmp_path / "rgb.npy"
    np.save(rgb, np.zeros((3, 28, 28), dtype=np.int64))
    status, _, err = _run(
        ["evaluate", "--checkpoint", str(CKPT), "--sample-input", str(rgb)], capsys
    )
    assert status == 1
    assert f"{rgb}: the sample has 3 channels" in err and "first layer takes 1" in err
    assert "state_dict" not in err and ".op." not in err


def test_output_must_not_replace_an_input(tmp_path: Path, capsys) -> None:
    sample = tmp_path / "s.npy"
    sample.write_bytes(SAMPLE.read_bytes())
    argv = ["evaluate", "--checkpoint", str(CKPT), "--sample-input", str(sample)]
    status, _, err = _run([*argv, "--output", str(sample)], capsys)
    assert status == 1 and "is an input of this run" in err
    assert sample.read_bytes() == SAMPLE.read_bytes()


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
