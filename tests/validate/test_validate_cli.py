"""`edgesynth validate` on 1,000 real MNIST images with the third-party ONNX LeNet of
tests/mnist_lenet.py (trained on the first 8,000 t10k images, cached): what it prints equals
`edgesynth run` sample by sample on every target, --per-layer names the layer of a deliberately
wrong weight scale, and bad input is one message with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli, snapshot
from mnist_lenet import EVAL, lenet, load_mnist, third_party_onnx, trained

pytestmark = pytest.mark.train
SAMPLES = 1000  # the issue asks for 1,000 real images


@pytest.fixture(scope="module")
def mnist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The float LeNet as ONNX, 300 calibration images, SAMPLES evaluation images and labels."""
    needs.module("onnxruntime")
    root = tmp_path_factory.mktemp("mnist")
    x, y = load_mnist()
    files = {
        "model": root / "lenet.onnx",
        "calibration": root / "calibration.npy",
        "x": root / "x.npy",
        "y": root / "y.npy",
    }
    third_party_onnx(trained("lenet", lenet, (x, y)), files["model"], opset=11)
    np.save(files["calibration"], x[:300])
    np.save(files["x"], x[EVAL][:SAMPLES])
    np.save(files["y"], y[EVAL][:SAMPLES])
    return files


def _float_top1(model: Path, x: np.ndarray) -> np.ndarray:
    ort = needs.module("onnxruntime")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return np.array([session.run(None, {"input": s[None]})[0].argmax() for s in x])


def _validate(mnist: dict[str, Path], model: Path | str, *extra: str | Path) -> dict:
    """Run validate with --json and return the JSON it wrote."""
    out = Path(mnist["x"]).parent / f"v{len(list(mnist['x'].parent.glob('v*.json')))}.json"
    result = run_cli("validate", model, "--data", mnist["x"], "--json", out, *extra)
    assert result.exit_code == 0, result.output
    return {"stdout": result.stdout, **json.loads(out.read_text())}


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("max78000", marks=pytest.mark.slow),
        pytest.param("max78002", marks=pytest.mark.slow),
        "gati",
        "xdnn",
        "gap8",
    ],
)
def test_agreement_is_what_run_gives_sample_by_sample(
    mnist: dict[str, Path], tmp_path: Path, target: str
) -> None:
    folder = tmp_path / "compiled"
    compiled = run_cli("compile", mnist["model"], "-t", target, "-c", mnist["calibration"],
                       "-o", folder, "--no-verify")  # fmt: skip
    assert compiled.exit_code == 0, compiled.output
    assert run_cli("run", folder, "-i", mnist["x"], "-o", tmp_path / "y.npy").exit_code == 0
    run_top1 = np.load(tmp_path / "y.npy").reshape(SAMPLES, -1).argmax(axis=1)
    float_top1 = _float_top1(mnist["model"], np.load(mnist["x"]))
    want = float(np.mean(run_top1 == float_top1))

    from_model = _validate(mnist, mnist["model"], "-t", target, "-c", mnist["calibration"],
                           "--labels", mnist["y"])  # fmt: skip
    from_folder = _validate(mnist, folder, "--reference", mnist["model"])
    for report in (from_model, from_folder):
        out = report["outputs"][0]
        assert out["target_top1"] == run_top1.tolist()
        assert out["float_top1"] == float_top1.tolist()
        assert out["top1_agreement"] == pytest.approx(want)
        assert f"{100 * want:.2f}% ({round(want * SAMPLES)} of {SAMPLES})" in report["stdout"]
    labels = np.load(mnist["y"])
    accuracy = from_model["outputs"][0]["accuracy"]
    assert accuracy["target"] == pytest.approx(np.mean(run_top1 == labels))
    assert accuracy["float"] == pytest.approx(np.mean(float_top1 == labels))


def _wrong_scale(model: Path, path: Path, initializer: str, factor: float) -> None:
    """`model` with one layer's weights scaled by `factor` (an exporter's wrong scale)."""
    onnx = needs.module("onnx")
    from onnx import numpy_helper

    proto = onnx.load(str(model))
    for i, init in enumerate(proto.graph.initializer):
        if init.name == initializer:
            scaled = numpy_helper.to_array(init) * np.float32(factor)
            proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(scaled, init.name))
    onnx.save(proto, str(path))


def test_per_layer_names_the_layer_with_the_wrong_weight_scale(
    mnist: dict[str, Path], tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong.onnx"
    _wrong_scale(mnist["model"], wrong, "conv2.w", 4.0)
    report = _validate(mnist, wrong, "-t", "max78000", "-c", mnist["calibration"],
                       "--reference", mnist["model"], "--per-layer")  # fmt: skip
    assert report["first_jump"] == "c2"
    assert "first layer whose error jumps: `c2` (Conv)" in report["stdout"]
    layers = {lay["tensor"]: lay for lay in report["layers"]}
    assert layers["p1"]["l2r"] < 0.05 < layers["c2"]["l2r"]


def test_per_layer_finds_no_jump_in_the_right_network(mnist: dict[str, Path]) -> None:
    report = _validate(mnist, mnist["model"], "-t", "max78000", "-c", mnist["calibration"],
                       "--per-layer")  # fmt: skip
    assert report["first_jump"] is None
    tensors = [lay["tensor"] for lay in report["layers"]]
    assert tensors[0] == "input" and tensors[-1] == "logits" and "c2" in tensors
    assert report["layers"][-1]["rmse"] == pytest.approx(report["outputs"][0]["metrics"]["rmse"])


def _bad_data(root: Path) -> Path:
    x = np.load(root / "x.npy")
    np.save(root / "cropped.npy", x[:, :, :27])
    return root / "cropped.npy"


def _text_data(root: Path) -> Path:
    np.save(root / "text.npy", np.array([["a"] * 28] * 28))
    return root / "text.npy"


def _short_labels(root: Path) -> Path:
    np.save(root / "short.npy", np.load(root / "y.npy")[:-1])
    return root / "short.npy"


def _pixel_codes(root: Path) -> Path:
    np.save(root / "pixels.npy", np.full((2, 1, 28, 28), 200, dtype=np.uint8))
    return root / "pixels.npy"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("shape", f"the samples have shape ({SAMPLES}, 1, 27, 28); the model takes (N, 1, 28, 28)"),
        ("type", "the samples must be numbers, not <U1"),
        ("labels", f"{SAMPLES - 1} labels for {SAMPLES} samples"),
        ("codes", "outside the program's 8-bit signed input codes"),
        ("empty folder", "is not a compiled program (no compiled.json)"),
    ],
)
def test_bad_input_is_one_message_and_nothing_written(
    mnist: dict[str, Path], tmp_path: Path, case: str, message: str
) -> None:
    root = mnist["x"].parent
    model: Path = mnist["model"]
    args: list[str | Path] = ["-t", "max78000", "-c", mnist["calibration"], "--data"]
    if case == "shape":
        args.append(_bad_data(root))
    elif case == "type":
        args.append(_text_data(root))
    elif case == "labels":
        args += [mnist["x"], "--labels", _short_labels(root)]
    elif case == "codes":
        args.append(_pixel_codes(root))
    else:
        model = tmp_path / "not-compiled"
        model.mkdir()
        args = ["--reference", mnist["model"], "--data", mnist["x"]]
    before = snapshot(tmp_path)
    result = run_cli("validate", model, *args, "--json", tmp_path / "v.json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("edgesynth: error: ")
    assert message in result.stderr
    assert snapshot(tmp_path) == before


def test_json_is_not_overwritten_without_overwrite(mnist: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("mine\n")
    args = ["validate", mnist["model"], "-t", "gati", "-c", mnist["calibration"],
            "--data", mnist["x"], "--limit", "5", "--json", out]  # fmt: skip
    refused = run_cli(*args)
    assert refused.exit_code == 1 and "exists; pass --overwrite" in refused.stderr
    assert out.read_text() == "mine\n"
    assert run_cli(*args, "--overwrite").exit_code == 0
    report = json.loads(out.read_text())
    assert report["format"] == "edgesynth-validate/1" and report["samples"] == 5


@pytest.fixture(scope="module")
def gati_folder(mnist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gati") / "compiled"
    compiled = run_cli("compile", mnist["model"], "-t", "gati", "-c", mnist["calibration"],
                       "-o", folder, "--no-verify")  # fmt: skip
    assert compiled.exit_code == 0, compiled.output
    return folder


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reference", "MODEL", "--per-layer"], "a compiled gati folder does not keep"),
        ([], "nothing to compare the target with"),
        (["--reference", "MODEL", "-t", "xdnn"], "was compiled for gati, not xdnn"),
    ],
)
def test_a_compiled_folder_refuses_what_it_cannot_do(
    mnist: dict[str, Path], gati_folder: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    args = [mnist["model"] if a == "MODEL" else a for a in extra]
    result = run_cli("validate", gati_folder, "-d", mnist["x"], *args, "--json", tmp_path / "v")
    assert result.exit_code == 1 and result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "v").exists()


def test_labels_count_before_limit(mnist: dict[str, Path], gati_folder: Path) -> None:
    report = _validate(mnist, gati_folder, "--labels", mnist["y"], "--limit", "7")
    out = report["outputs"][0]
    assert report["samples"] == 7 and out["top1_agreement"] is None
    want = np.mean(np.array(out["target_top1"]) == np.load(mnist["y"])[:7])
    assert out["accuracy"]["target"] == pytest.approx(want)
    assert "against the labels" in report["stdout"]
