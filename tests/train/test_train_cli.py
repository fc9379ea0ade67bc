"""`edgesynth train`: a short run end to end, determinism, resume, evaluate, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from edgesynth.cli import main
from edgesynth.quant.checkpoint import read_checkpoint

FAST = [
    "--dataset",
    "synthetic",
    "--epochs",
    "2",
    "--lr",
    "3e-3",
    "--no-progress",
    "--deterministic",
]


def _train(tmp_path: Path, capsys, *extra: str) -> tuple[int, str, str]:
    status = main(["train", *FAST, "--out-dir", str(tmp_path / "logs"), *extra])
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("train")
    policy = tmp / "policy.yaml"
    policy.write_text("start_epoch: 1\nweight_bits: 8\n")
    args = [
        "train",
        *FAST,
        "--out-dir",
        str(tmp / "logs"),
        "--name",
        "run",
        "--qat-policy",
        str(policy),
        "--save-sample",
        "5",
        "--simulate",
        "40",
        "--yaml-template",
        str(tmp / "net.yaml"),
    ]
    from contextlib import redirect_stdout
    from io import StringIO

    buf = StringIO()
    with redirect_stdout(buf):
        assert main(args) == 0
    return tmp, buf.getvalue()


def test_run_writes_checkpoints_yaml_sample_and_checks_the_simulator(first_run) -> None:
    tmp, out = first_run
    run = tmp / "logs" / "run"
    names = sorted(p.name for p in run.iterdir())
    assert names == [
        "best.pth.tar",
        "checkpoint.pth.tar",
        "qat_best-q.pth.tar",
        "qat_best.pth.tar",
        "qat_checkpoint.pth.tar",
        "sample_synthetic.npy",
    ]
    assert "epoch 0/1: train loss" in out and "epoch 1/1 QAT: train loss" in out
    assert "quantization-aware training starts" in out
    assert "Confusion matrix" in out
    assert "Simulator on 40 test images" in out and "same class as the 8-bit model 100.00%" in out
    assert "identical outputs 100.00%" in out
    sample = np.load(run / "sample_synthetic.npy")
    assert sample.dtype == np.int64 and sample.shape == (1, 12, 12)
    assert (tmp / "net.yaml").read_text().startswith("---\n# ai85netextrasmall")
    ck = read_checkpoint(run / "qat_best-q.pth.tar")
    assert ck["arch"] == "ai85netextrasmall"
    assert ck["state_dict"]["conv1.adjust_output_shift"].item() == 0
    top1 = float(out.split("8-bit (quantized) test top1 ")[1].split("%")[0])
    assert top1 > 50.0  # four classes: well above chance after two short epochs


def test_deterministic_runs_repeat_and_never_overwrite(first_run, capsys) -> None:
    tmp, _ = first_run
    policy = tmp / "policy.yaml"
    status, _, err = _train(tmp, capsys, "--name", "run", "--qat-policy", str(policy))
    assert status == 0, err
    assert (tmp / "logs" / "run-1").is_dir()  # the first run is untouched
    a = read_checkpoint(tmp / "logs" / "run" / "qat_checkpoint.pth.tar")["state_dict"]
    b = read_checkpoint(tmp / "logs" / "run-1" / "qat_checkpoint.pth.tar")["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resume_continues_after_the_saved_epoch(first_run, capsys) -> None:
    tmp, _ = first_run
    ck = tmp / "logs" / "run" / "qat_checkpoint.pth.tar"
    status, out, err = _train(
        tmp,
        capsys,
        "--name",
        "resumed",
        "--resume",
        str(ck),
        "--epochs",
        "3",
        "--qat-policy",
        str(tmp / "policy.yaml"),
        "--tensorboard",
    )
    assert status == 0, err
    assert list((tmp / "logs" / "resumed" / "tensorboard").glob("events.out.tfevents.*"))
    assert "epoch 2/2 QAT" in out and "epoch 0/" not in out and "epoch 1/" not in out
    assert read_checkpoint(tmp / "logs" / "resumed" / "qat_checkpoint.pth.tar")["epoch"] == 2


def test_evaluate_float_and_8bit(first_run, capsys) -> None:
    tmp, _ = first_run
    q = tmp / "logs" / "run" / "qat_best-q.pth.tar"
    assert (
        main(["train", "--dataset", "synthetic", "--evaluate", "--checkpoint", str(q), "-8"]) == 0
    )
    out = capsys.readouterr().out
    assert "(128 items, 8-bit): top1" in out
    assert main(["train", "--dataset", "synthetic", "--evaluate", "--checkpoint", str(q)]) == 0
    assert "(128 items, float): top1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--qat-policy", "{policy}"], "unknown key `start`"),
        (["--dataset", "mnist", "--data", "{empty}"], "pass --download to fetch them"),
        (["--dataset", "mnist", "--data", "{empty}", "--download"], "could not be downloaded"),
        (["--model", "ai85nascifarnet"], "model `ai85nascifarnet` cannot take synthetic's"),
        (["--model", "ai85kws20netv3"], "takes 1D data"),
        (["--resume", "{other}"], "trained as `ai85net5`"),
        (["--evaluate"], "--evaluate needs --checkpoint"),
    ],
)
def test_bad_input_leaves_nothing_behind(
    tmp_path: Path, capsys, monkeypatch, extra: list[str], message: str
) -> None:
    import urllib.error

    from edgesynth.train import datasets

    def offline(*args, **kwargs):
        raise urllib.error.URLError("offline")

    monkeypatch.setattr(datasets.urllib.request, "urlopen", offline)
    (tmp_path / "policy.yaml").write_text("start: 1\nweight_bits: 8\n")
    (tmp_path / "empty").mkdir()
    mnist_ck = (
        Path(__file__).resolve().parents[2].parent
        / "shared"
        / "corpus"
        / "cases"
        / "MAX78000"
        / "mnist"
        / "trained"
        / "ai85-mnist-qat8-q.pth.tar"
    )
    subst = {
        "{policy}": str(tmp_path / "policy.yaml"),
        "{empty}": str(tmp_path / "empty"),
        "{other}": str(mnist_ck),
    }
    status, _, err = _train(tmp_path, capsys, *[subst.get(a, a) for a in extra])
    assert status == 1
    assert message in err and err.count("edgesynth: error:") == 1 and "Traceback" not in err
    assert not (tmp_path / "logs").exists()
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epochs", "0"], "argument --epochs: must be at least 1, got 0"),
        (["--epochs", "abc"], "argument --epochs: expected an integer, got `abc`"),
        (["--optimizer", "adamw"], "argument --optimizer: invalid choice: 'adamw'"),
        (["--name", "a/b"], "--name takes a plain name"),
    ],
)
def test_usage_errors_exit_2_and_leave_nothing(
    tmp_path: Path, capsys, extra: list[str], message: str
) -> None:
    status, _, err = _train(tmp_path, capsys, *extra)
    assert status == (1 if "--name" in extra else 2), err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "logs").exists()


def _interrupt_at_epoch(monkeypatch, epoch: int) -> None:
    """Ctrl-C while epoch `epoch` trains (train_epoch is called once per epoch)."""
    from edgesynth.train import loop

    real, calls = loop.train_epoch, []

    def train_epoch(*args, **kwargs):
        calls.append(1)
        if len(calls) > epoch:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "train_epoch", train_epoch)


def test_interrupt_keeps_completed_checkpoints_and_exits_130(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    _interrupt_at_epoch(monkeypatch, 1)
    status, _, err = _train(tmp_path, capsys, "--name", "run", "--epochs", "3")
    assert status == 130
    assert err.strip().endswith("edgesynth: interrupted") and "Traceback" not in err
    run = tmp_path / "logs" / "run"
    assert sorted(p.name for p in run.iterdir()) == ["best.pth.tar", "checkpoint.pth.tar"]
    assert read_checkpoint(run / "checkpoint.pth.tar")["epoch"] == 0


def test_interrupt_before_the_first_checkpoint_leaves_nothing(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    _interrupt_at_epoch(monkeypatch, 0)
    status, _, err = _train(tmp_path, capsys, "--name", "run", "--tensorboard")
    assert status == 130 and "edgesynth: interrupted" in err
    assert not (tmp_path / "logs").exists()
