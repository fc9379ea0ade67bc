"""Bad input to `edgesynth izer` ends in one clear message, exit status 1 and no output."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.cli import main

CASES = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
MNIST = CASES / "MAX78000" / "mnist"
CIFAR = CASES / "MAX78000" / "cifar-10"
YAML = "networks/mnist-chw-ai85.yaml"
CHECKPOINT = "trained/ai85-mnist-qat8-q.pth.tar"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of the MNIST demo case, as the working directory."""
    root = tmp_path / "mnist"
    shutil.copytree(MNIST, root)
    monkeypatch.chdir(root)
    return root


def izer(*extra: str, config: str = YAML, checkpoint: str | None = CHECKPOINT) -> list[str]:
    argv = ["izer", "--device", "MAX78000", "--config-file", config]
    if checkpoint:
        argv += ["--checkpoint-file", checkpoint]
    return [*argv, "--test-dir", "out", "--prefix", "p", "--sample-numpy-filename", "kat", *extra]


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1, err
    assert "Traceback" not in err
    assert err.count("edgesynth: error:") == 1, err
    assert not Path("out/p/kat.npy").exists()
    return err


def edit_yaml(root: Path, old: str, new: str) -> None:
    path = root / YAML
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_unmodified_project_works(project: Path, capsys) -> None:
    assert main(izer()) == 0
    np.testing.assert_array_equal(np.load("out/p/kat.npy"), np.load("expected_output.npy"))


def test_yaml_syntax_error_names_file_and_line(project: Path, capsys) -> None:
    edit_yaml(project, "  - op: mlp", "  - op: [mlp")
    err = refused(izer(), capsys)
    assert f"{YAML}:" in err


def test_unknown_key_suggests_the_closest(project: Path, capsys) -> None:
    edit_yaml(
        project,
        "    activate: ReLU\n    out_offset: 0x2000",
        "    activate: ReLU\n    out_ofset: 0x2000",
    )
    err = refused(izer(), capsys)
    assert f"{YAML}:11" in err
    assert "out_ofset" in err and "out_offset" in err
    assert "layer 0" in err


def test_out_of_range_offset_names_allowed_values(project: Path, capsys) -> None:
    edit_yaml(project, "out_offset: 0x1000", "out_offset: 0x90000")
    err = refused(izer(), capsys)
    assert "layer 4" in err
    assert "out_offset" in err
    assert "0x" in err


def test_bad_value_lists_allowed(project: Path, capsys) -> None:
    edit_yaml(project, "output_width: 32", "output_width: 16")
    err = refused(izer(), capsys)
    assert "output_width" in err and "8" in err and "32" in err


def test_checkpoint_of_another_model(project: Path, capsys) -> None:
    other = next((CIFAR / "trained").glob("*.pth.tar"))
    err = refused(izer(checkpoint=str(other)), capsys)
    assert "ai85net5" in err.lower()
    assert other.name in err


def test_checkpoint_with_matching_arch_but_other_shapes(project: Path, capsys) -> None:
    other = next((CIFAR / "trained").glob("*.pth.tar"))
    from edgesynth.targets.max7800x.description.checkpoint import load_checkpoint

    edit_yaml(project, "arch: ai85net5", f"arch: {load_checkpoint(other).arch}")
    err = refused(izer(checkpoint=str(other)), capsys)
    assert "layer" in err


def test_sample_of_the_wrong_shape(project: Path, capsys) -> None:
    np.save("tests/sample_mnist.npy", np.zeros((3, 28, 28), dtype=np.int64))
    err = refused(izer(), capsys)
    assert "layer 0" in err
    assert "3" in err


def test_sample_out_of_8_bit_range(project: Path, capsys) -> None:
    np.save("tests/sample_mnist.npy", np.full((1, 28, 28), 300, dtype=np.int64))
    err = refused(izer(), capsys)
    assert "sample_mnist.npy" in err and "300" in err


@pytest.mark.parametrize(
    ("argv", "missing"),
    [
        (izer(config="networks/nope.yaml"), "networks/nope.yaml"),
        (izer(checkpoint="trained/nope.pth.tar"), "trained/nope.pth.tar"),
        (izer("--sample-input", "tests/nope.npy"), "tests/nope.npy"),
    ],
)
def test_missing_files(project: Path, capsys, argv: list[str], missing: str) -> None:
    err = refused(argv, capsys)
    assert missing in err


def test_missing_implicit_sample(project: Path, capsys) -> None:
    (project / "tests" / "sample_mnist.npy").unlink()
    err = refused(izer(), capsys)
    assert "sample_mnist.npy" in err


def test_corrupt_checkpoint(project: Path, capsys) -> None:
    (project / CHECKPOINT).write_bytes(b"not a checkpoint")
    err = refused(izer(), capsys)
    assert CHECKPOINT in err


def test_unknown_option_is_a_usage_error_that_suggests(project: Path, capsys) -> None:
    """Usage errors exit with status 2, as the vendor's argparse does, with the usage line."""
    assert main(izer("--softmx")) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: edgesynth izer ") and "Traceback" not in err
    assert err.count("edgesynth izer: error:") == 1 and "Did you mean `--softmax`?" in err
    assert not Path("out").exists()


def test_existing_output_folder_needs_overwrite(project: Path, capsys) -> None:
    """The vendor refuses an existing TEST_DIR/PREFIX without --overwrite, even an empty one;
    with --overwrite only the project's files are replaced."""
    Path("out/p").mkdir(parents=True)
    err = refused(izer(), capsys)
    assert "out/p exists" in err and "--overwrite" in err
    Path("out/p/notes.txt").write_text("mine")
    assert main(izer("--overwrite")) == 0
    np.testing.assert_array_equal(np.load("out/p/kat.npy"), np.load("expected_output.npy"))
    assert Path("out/p/notes.txt").read_text() == "mine"
    names = {p.name for p in Path("out/p").iterdir()}
    assert {"kat.npy", "notes.txt", "cnn.c", "cnn.h", "main.c", "weights.h"} <= names


def test_float_checkpoint_points_to_quantize(project: Path, capsys) -> None:
    """An unquantized checkpoint is refused (the vendor truncates every weight to 0)."""
    torch = needs.module("torch")
    ck = torch.load(CHECKPOINT, weights_only=False)
    ck["state_dict"] = {
        k: (v / 128.0 if k.endswith("op.weight") else v) for k, v in ck["state_dict"].items()
    }
    torch.save(ck, "trained/float.pth.tar")
    err = refused(izer(checkpoint="trained/float.pth.tar"), capsys)
    assert "trained/float.pth.tar" in err and "conv1.op.weight" in err
    assert "not integers" in err and "edgesynth quantize float.pth.tar float-q.pth.tar" in err


def test_rtl_run_without_known_answer_is_refused(project: Path, capsys) -> None:
    """RTL-simulation files are not generated: an RTL run that does not ask for the
    known-answer output would write nothing, so it is refused, naming what to ask for."""
    err = refused([*izer()[:-2], "--rtl"], capsys)
    assert "--sample-numpy-filename NAME" in err and "RTL" in err
    assert not Path("out").exists()


def test_no_kat_writes_the_project_without_known_answer(project: Path, capsys) -> None:
    """--no-kat: the project is written, without the known-answer file and check."""
    assert main(izer("--no-kat")) == 0
    names = {p.name for p in Path("out/p").iterdir()}
    assert "cnn.c" in names and "main.c" in names and "kat.npy" not in names


def test_stop_after_beyond_the_network(project: Path, capsys) -> None:
    err = refused(izer("--stop-after", "99"), capsys)
    assert "--stop-after 99 names no layer: the network has layers 0 to 4" in err


def test_arch_test_without_weights_file(project: Path, capsys) -> None:
    edit_yaml(project, "arch: ai85net5", "arch: test")
    err = refused(izer(checkpoint=None), capsys)
    assert "weights_mnist.npy" in err


def test_command_line_remarks_are_printed(project: Path, capsys) -> None:
    """The vendor's non-fatal remarks about the options reach the user (once, on stderr)."""
    assert main(izer("--energy", "--timer", "0")) == 0
    err = capsys.readouterr().err
    assert err.count("edgesynth: warning: `--timer` is ignored with `--energy`") == 1, err
