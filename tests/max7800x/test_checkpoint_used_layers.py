"""Float weights are refused only in the layers the run uses.

A checkpoint whose later layers hold float (unquantized) weights runs with `--stop-after` before
them, as the vendor's tool runs it; a float weight in a layer of the run stays refused. The
checkpoint and the network are built here (3 small convolutions, MAX78000).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.frontends.torchfile import write_torch_file

YAML = """\
arch: tiny
dataset: tiny
layers:
  - processors: 0x0000000000000007
    out_offset: 0x2000
    op: conv2d
    pad: 1
    activate: ReLU
    data_format: HWC
  - processors: 0x000000000000000f
    out_offset: 0x0000
    op: conv2d
    pad: 1
    activate: ReLU
  - processors: 0x000000000000000f
    out_offset: 0x2000
    op: conv2d
    pad: 1
"""


def _checkpoint(path: Path, float_layer: int | None) -> None:
    """Three 3x3 convolutions (3 -> 4 -> 4 -> 4 channels) with integer weights, except
    `float_layer`, whose weights are unquantized floats."""
    rng = np.random.default_rng(7)
    state: dict[str, np.ndarray] = {}
    for i, shape in enumerate([(4, 3, 3, 3), (4, 4, 3, 3), (4, 4, 3, 3)]):
        weight = rng.integers(-40, 40, shape).astype(np.float32)
        if i == float_layer:
            weight = rng.uniform(-0.9, 0.9, shape).astype(np.float32)
        state[f"conv{i + 1}.op.weight"] = weight
        state[f"conv{i + 1}.op.bias"] = rng.integers(-500, 500, 4).astype(np.float32)
    write_torch_file(path, {"state_dict": state, "arch": "tiny", "epoch": 1})


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("tiny.yaml").write_text(YAML)
    sample = np.random.default_rng(3).integers(-128, 128, (3, 8, 8)).astype(np.int64)
    np.save("sample.npy", sample)
    return tmp_path


def _izer(checkpoint: str, prefix: str, *extra: str, device: str = "MAX78000") -> list[str]:
    return [
        "izer",
        "--device",
        device,
        "--config-file",
        "tiny.yaml",
        "--checkpoint-file",
        checkpoint,
        "--sample-input",
        "sample.npy",
        "--test-dir",
        "out",
        "--prefix",
        prefix,
        "--sample-numpy-filename",
        "kat",
        *extra,
    ]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err, err
    assert not Path("out").exists()
    return err


def test_float_weights_after_stop_after_run_as_the_vendor_runs_them(folder: Path, capsys) -> None:
    _checkpoint(Path("float3.pth.tar"), float_layer=2)
    _checkpoint(Path("int.pth.tar"), float_layer=None)
    assert main(_izer("float3.pth.tar", "float3", "--stop-after", "1")) == 0
    assert main(_izer("int.pth.tar", "int", "--stop-after", "1")) == 0
    # layers 0 and 1 are the same in both checkpoints: so is the known answer
    float_kat = np.load("out/float3/kat.npy")
    np.testing.assert_array_equal(float_kat, np.load("out/int/kat.npy"))
    assert float_kat.shape == (4, 8, 8)


def test_float_weights_in_a_layer_the_run_uses_are_refused(folder: Path, capsys) -> None:
    _checkpoint(Path("float3.pth.tar"), float_layer=2)
    err = _refused(_izer("float3.pth.tar", "p"), capsys)
    assert "float3.pth.tar" in err
    assert "`conv3.op.weight` holds weights that are not integers" in err
    _checkpoint(Path("float2.pth.tar"), float_layer=1)
    err = _refused(_izer("float2.pth.tar", "p", "--stop-after", "1"), capsys)
    assert "`conv2.op.weight` holds weights that are not integers" in err
    assert "edgesynth quantize float2.pth.tar float2-q.pth.tar" in err


def test_float_weights_before_start_layer_run(folder: Path, capsys) -> None:
    """--start-layer 1 (MAX78002): layer 0 is not run, so its float weights are not refused."""
    sample = np.random.default_rng(4).integers(-128, 128, (4, 8, 8)).astype(np.int64)
    np.save("sample.npy", sample)
    _checkpoint(Path("float1.pth.tar"), float_layer=0)
    argv = _izer("float1.pth.tar", "p", "--start-layer", "1", device="MAX78002")
    assert main(argv) == 0, capsys.readouterr().err
    assert np.load("out/p/kat.npy").shape == (4, 8, 8)
    shutil.rmtree("out")
    err = _refused(_izer("float1.pth.tar", "q", device="MAX78002"), capsys)
    assert "`conv1.op.weight` holds weights that are not integers" in err
