"""The `edgesynth` commands a user runs: simulate, demo, and the entry point's error handling."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import needs
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
    assert "CHECKPOINT" in err and "ai85net5" in err  # simulate's argument, not izer's option
    assert "--checkpoint-file" not in err


def test_unknown_device_is_a_usage_error(capsys) -> None:
    status = main(
        ["simulate", str(MNIST / "networks" / "mnist-chw-ai85.yaml"), "--device", "MAX7800"]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("usage: edgesynth simulate NETWORK [CHECKPOINT] [options]")
    assert "argument --device: unknown device `MAX7800`" in err and "Traceback" not in err


def _reference_demo(folder: Path) -> np.ndarray:
    """The demo network in PyTorch float64 with the hardware's rounding, written independently."""
    torch = needs.module("torch")
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
    printed = capsys.readouterr().out
    assert "Demo finished" in printed
    assert "Global configuration" not in printed  # the register dump is for --verbose


def test_demo_verbose_prints_the_synthesizers_configuration(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--synthetic", "--verbose", "--out", str(tmp_path / "demo")]) == 0
    assert "Global configuration" in capsys.readouterr().out


# The trained demo end to end: tests/test_readme.py runs it as `bash scripts/demo.sh`.


# --- the cases of issue 7, one test each ---------------------------------------------------


def _project(tmp_path: Path, monkeypatch) -> Path:
    import shutil

    root = tmp_path / "proj"
    for sub in ("networks", "trained", "tests"):
        shutil.copytree(MNIST / sub, root / sub)
    monkeypatch.chdir(root)
    return root


def test_simulate_save_into_the_yaml_folder_is_refused_and_deletes_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    root = _project(tmp_path, monkeypatch)
    before = sorted(p.name for p in (root / "networks").iterdir())
    status = main(
        ["simulate", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar",
         "--save", "networks", "--overwrite"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1 and "refusing to write into networks" in err and "an input" in err
    assert sorted(p.name for p in (root / "networks").iterdir()) == before


def test_simulate_save_to_a_file_is_refused_before_simulating(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    root = _project(tmp_path, monkeypatch)
    (root / "layers").write_text("a file")
    status = main(
        ["simulate", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar",
         "--save", "layers"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert status == 1 and "layers is a file, not a folder" in out.err
    assert out.out == ""  # no per-layer table: refused before the simulation ran
    assert (root / "layers").read_text() == "a file"


def test_simulate_swapped_arguments_are_named(tmp_path: Path, monkeypatch, capsys) -> None:
    _project(tmp_path, monkeypatch)
    ck, yaml = "trained/ai85-mnist-qat8-q.pth.tar", "networks/mnist-chw-ai85.yaml"
    assert main(["simulate", ck, yaml]) == 1
    err = capsys.readouterr().err
    assert "is a PyTorch checkpoint, but the first argument must be the YAML" in err
    assert f"the arguments look swapped: `edgesynth simulate {yaml} {ck}`" in err
    assert "UTF-8" not in err


def test_text_file_named_npy_is_called_text(tmp_path: Path, monkeypatch, capsys) -> None:
    root = _project(tmp_path, monkeypatch)
    (root / "tests" / "sample_mnist.npy").write_text("0 1 2 3\n")
    assert (
        main(["simulate", "networks/mnist-chw-ai85.yaml", "trained/ai85-mnist-qat8-q.pth.tar"]) == 1
    )
    err = capsys.readouterr().err
    assert "sample_mnist.npy: sample input file is not a .npy array: it is a text file" in err
    assert "pickled" not in err


def test_truncated_checkpoint_is_called_truncated(tmp_path: Path, monkeypatch, capsys) -> None:
    root = _project(tmp_path, monkeypatch)
    ck = root / "trained" / "ai85-mnist-qat8-q.pth.tar"
    ck.write_bytes(ck.read_bytes()[:20000])
    assert main(["simulate", "networks/mnist-chw-ai85.yaml", str(ck)]) == 1
    err = capsys.readouterr().err
    assert "truncated or damaged" in err and "20000 bytes" in err and "cut short" in err


def test_outputs_get_the_umask_permissions(tmp_path: Path, monkeypatch, capsys) -> None:
    import os
    import stat

    root = _project(tmp_path, monkeypatch)
    old = os.umask(0o022)
    try:
        assert main(
            ["izer", "--device", "MAX78000", "--config-file", "networks/mnist-chw-ai85.yaml",
             "--checkpoint-file", "trained/ai85-mnist-qat8-q.pth.tar", "--test-dir", "out",
             "--prefix", "p", "--sample-numpy-filename", "kat"]
        ) == 0  # fmt: skip
    finally:
        os.umask(old)
    for path, mode in (
        (root / "out", 0o755),
        (root / "out/p", 0o755),
        (root / "out/p/kat.npy", 0o644),
    ):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_demo_with_a_bad_device_writes_nothing_and_says_it_once(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--device", "MAX99999"]) == 2
    err = capsys.readouterr().err
    assert err.count("unknown device `MAX99999`") == 1
    assert list(tmp_path.iterdir()) == []


def test_demo_refuses_a_non_empty_out_and_overwrite_keeps_other_files(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["demo", "--synthetic", "--out", str(out)]) == 1
    assert "is not empty; pass --overwrite" in capsys.readouterr().err
    assert main(["demo", "--synthetic", "--out", str(out), "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "kat" / "output.npy").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["kat", "notes.txt", "tests"]


def test_gati_decode_names_a_file_that_is_no_program(capsys) -> None:
    sample = MNIST / "tests" / "sample_mnist.npy"
    assert main(["gati", "decode", str(sample)]) == 1
    err = capsys.readouterr().err
    assert err == f"edgesynth: error: {sample}: is a NumPy .npy file, not a Gati program " + (
        "(program.bin or a .dwp stream from `gati compile`).\n"
    )
