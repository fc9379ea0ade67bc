"""Bring your own network and data: `--model-file`/`--dataset-file` through train, evaluate and
--yaml-template, and `edgesynth export` of the result (ONNX Runtime's top-1 against PyTorch's
on real MNIST images)."""

from __future__ import annotations

from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
import torch

from edgesynth.cli import main
from edgesynth.quant.checkpoint import read_checkpoint
from needs import module
from user_files import write_user_files

pytestmark = [pytest.mark.train, pytest.mark.slow]

MNIST = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mnist"
WIDTH = ["--model-args", '{"width": 8}']


def _user_args(folder: Path) -> list[str]:
    model, data = folder / "my_models.py", folder / "my_data.py"
    return [
        "--model-file",
        f"{model}:MyNet",
        *WIDTH,
        "--dataset-file",
        f"{data}:make_datasets",
        "--data",
        str(MNIST),
    ]


@pytest.fixture(scope="module")
def user_run(tmp_path_factory) -> tuple[Path, str]:
    """Two short epochs (QAT in the second) of the user's network on the user's data."""
    tmp = tmp_path_factory.mktemp("byo")
    write_user_files(tmp / "mine")
    args = ["train", *_user_args(tmp / "mine"), "--epochs", "2", "--batch-size", "64"]
    args += ["--lr", "3e-3", "--no-progress", "--deterministic", "--out-dir", str(tmp / "logs")]
    args += ["--name", "run", "--simulate", "20"]
    buf = StringIO()
    with redirect_stdout(buf):
        assert main(args) == 0
    return tmp, buf.getvalue()


def test_user_network_trains_on_user_data_with_qat(user_run) -> None:
    tmp, out = user_run
    run = tmp / "logs" / "run"
    assert "Training MyNet on my_data (512 train / 1000 test)" in out
    assert "epoch 1/1 QAT" in out and "Network description:" in out
    assert "same class as the 8-bit model 100.00%" in out and "identical outputs 100.00%" in out
    top1 = float(out.split("8-bit (quantized) test top1 ")[1].split("%")[0])
    assert top1 > 60.0  # ten digits after two short epochs on 512 images
    ck = read_checkpoint(run / "qat_best.pth.tar")
    assert ck["arch"] == "MyNet"
    assert ck["extras"]["model_args"] == {"width": 8}
    assert ck["extras"]["model_file"].endswith("my_models.py:MyNet")
    assert (run / "MyNet.yaml").read_text().startswith("---\n# MyNet for MAX78000")


def test_evaluate_and_yaml_template_take_the_user_files(user_run, capsys) -> None:
    tmp, _ = user_run
    q = tmp / "logs" / "run" / "qat_best-q.pth.tar"
    yaml = tmp / "again.yaml"
    args = ["train", *_user_args(tmp / "mine"), "--evaluate", "--checkpoint", str(q), "-8"]
    assert main([*args, "--yaml-template", str(yaml)]) == 0
    out = capsys.readouterr().out
    assert "MyNet on my_data test (1000 items, 8-bit): top1" in out
    assert yaml.read_text() == (tmp / "logs" / "run" / "MyNet.yaml").read_text()
    sample = tmp / "sample.npy"
    np.save(sample, np.zeros((1, 28, 28), dtype=np.int64))
    model = f"{tmp / 'mine' / 'my_models.py'}:MyNet"
    argv = ["evaluate", "--checkpoint", str(q), "--sample-input", str(sample), "-8"]
    assert main([*argv, "--model-file", model, *WIDTH]) == 0
    assert "MyNet on MAX78000 (8-bit): output 10x1x1" in capsys.readouterr().out


def _mnist_images(tmp: Path, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The user's test images (float, as trained) and the chip's integers."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("my_data_for_test", tmp / "mine" / "my_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = mod.make_datasets(MNIST)[1].tensors[0][:count].double()
    ints = torch.clamp(torch.floor(x * 128 + 0.5), -128, 127)
    return (ints / 128).float().numpy(), ints.float().numpy()


def test_export_float_and_8bit_match_pytorch_top1_on_real_images(user_run, capsys) -> None:
    ort = module("onnxruntime")
    import edgesynth.nn as enn
    from edgesynth.train.deploy import load_model
    from edgesynth.train.export import float_model
    from edgesynth.train.userdata import load_user_dataset
    from edgesynth.train.usermodel import user_model

    tmp, _ = user_run
    run = tmp / "logs" / "run"
    floats, ints = _mnist_images(tmp, 1000)
    user = user_model(f"{tmp / 'mine' / 'my_models.py'}:MyNet", '{"width": 8}')
    dataset = load_user_dataset(f"{tmp / 'mine' / 'my_data.py'}:make_datasets", MNIST)
    for ck, extra, x in (("qat_best", [], floats), ("qat_best-q", ["--8-bit"], ints)):
        out = tmp / f"{ck}.onnx"
        args = ["export", str(run / f"{ck}.pth.tar"), "-o", str(out), *extra]
        assert main([*args, "--model-file", f"{tmp / 'mine' / 'my_models.py'}:MyNet", *WIDTH]) == 0
        assert "largest difference 0" in capsys.readouterr().out or not extra
        session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        got = session.run(None, {"input": x})[0].reshape(len(x), -1)
        net = load_model(run / f"{ck}.pth.tar", "MyNet", dataset, "MAX78000", user=user)
        with torch.no_grad():
            if extra:
                with enn.use("MAX78000", simulate=True):
                    want = net(torch.from_numpy(x).double()).numpy().reshape(len(x), -1)
                assert np.array_equal(got, want)  # the chip's integers, exactly
            else:
                want = float_model(net, ck)(torch.from_numpy(x)).numpy().reshape(len(x), -1)
        assert np.array_equal(got.argmax(1), want.argmax(1))
        # an existing output is refused, and left as it was
        before = out.read_bytes()
        assert main([*args, "--model-file", f"{tmp / 'mine' / 'my_models.py'}:MyNet", *WIDTH]) == 1
        assert "exists; pass --overwrite" in capsys.readouterr().err
        assert out.read_bytes() == before


def test_export_of_a_float_checkpoint_in_8bit_is_refused(user_run, capsys) -> None:
    tmp, _ = user_run
    out = tmp / "no.onnx"
    model = f"{tmp / 'mine' / 'my_models.py'}:MyNet"
    argv = ["export", str(tmp / "logs" / "run" / "qat_best.pth.tar"), "-o", str(out), "-8"]
    assert main([*argv, "--model-file", model, *WIDTH]) == 1
    assert "--8-bit exports a quantized checkpoint" in capsys.readouterr().err
    assert not out.exists()


def test_two_processes_import_the_user_files_and_distill(user_run, tmp_path: Path) -> None:
    """Data parallel: every process imports the model and dataset files (and the teacher's)
    itself; the options reach them through the launcher."""
    import os
    import subprocess
    import sys

    tmp, _ = user_run
    model = f"{tmp / 'mine' / 'my_models.py'}:MyNet"
    args = ["train", *_user_args(tmp / "mine"), "--epochs", "1", "--qat-policy", "None"]
    args += ["--train-limit", "256", "--nproc-per-node", "2", "--device", "cpu", "--seed", "3"]
    args += ["--no-progress", "--out-dir", str(tmp_path / "logs"), "--lr-schedule", "onecycle"]
    args += ["--teacher", str(tmp / "logs" / "run" / "qat_best.pth.tar")]
    args += ["--teacher-model-file", model, "--teacher-model-args", '{"width": 8}']
    done = subprocess.run(
        [sys.executable, "-m", "edgesynth", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Data-parallel training: 2 processes" in out
    assert out.count("Training MyNet on my_data (256 train / 1000 test)") == 1
    assert "Distillation: teacher" in out and "Learning-rate schedule: onecycle" in out
    assert out.count("epoch 0/0: train loss") == 1 and "Traceback" not in done.stderr


def test_two_processes_reach_the_single_process_accuracy(user_run, tmp_path: Path) -> None:
    """Data parallel with the user's files: the same run in two processes (Gloo, the same
    global batch and seed) ends within 0.3 points of the single process's 8-bit top-1."""
    import os
    import subprocess
    import sys

    tmp, single = user_run
    args = ["train", *_user_args(tmp / "mine"), "--epochs", "2", "--batch-size", "64"]
    args += ["--lr", "3e-3", "--no-progress", "--deterministic", "--out-dir", str(tmp_path)]
    args += ["--name", "dp", "--nproc-per-node", "2", "--device", "cpu"]
    done = subprocess.run(
        [sys.executable, "-m", "edgesynth", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "Data-parallel training: 2 processes" in done.stdout

    def top1(out: str) -> float:
        return float(out.split("8-bit (quantized) test top1 ")[1].split("%")[0])

    print(f"single process {top1(single):.2f}%, two processes {top1(done.stdout):.2f}%")
    assert abs(top1(done.stdout) - top1(single)) <= 0.3
