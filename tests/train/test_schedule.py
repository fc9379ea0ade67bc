"""Learning-rate schedules: values at given epochs against hand-computed ones, the vendor's
schedule YAML against PyTorch's schedulers stepped as the vendor's training steps them, and a
real run whose learning rate changes exactly at its milestones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from edgesynth.cli import main
from edgesynth.errors import EdgesynthError
from edgesynth.train.schedule import make_schedule, vendor_schedule


def _lrs(schedule, base: float, epochs: int) -> list[float]:
    return [schedule.lr(base, e, epochs) for e in range(epochs)]


def test_multistep_step_and_warmup_by_hand() -> None:
    multistep = make_schedule("multistep", milestones="2,4", gamma=0.1)
    assert _lrs(multistep, 0.1, 6) == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001, 0.001])
    step = make_schedule("step", step_size=3, gamma=0.5)
    assert _lrs(step, 0.1, 7) == pytest.approx([0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025])
    warm = make_schedule("multistep", milestones="4", warmup=2)
    assert _lrs(warm, 0.1, 5) == pytest.approx([0.1 / 3, 0.2 / 3, 0.1, 0.1, 0.01])


def test_cosine_and_onecycle_by_hand() -> None:
    cosine = make_schedule(None)
    assert cosine.lr(1.0, 0, 10) == pytest.approx(1.0)
    assert cosine.lr(1.0, 5, 10) == pytest.approx(0.01 + 0.99 * 0.5)
    warm = make_schedule("cosine", warmup=2)
    assert [warm.lr(1.0, e, 10) for e in (0, 1, 2, 6)] == pytest.approx([1 / 3, 2 / 3, 1, 0.505])
    one = make_schedule("onecycle")  # 10 epochs: 3 up from 1/25, 7 down to 1/25/1e4
    got = _lrs(one, 1.0, 10)
    assert got[0] == pytest.approx(0.04)
    assert got[1] == pytest.approx(0.04 + 0.96 * 0.25)  # (1 - cos(pi/3)) / 2 = 1/4
    assert got[2] == pytest.approx(0.04 + 0.96 * 0.75)
    assert got[3] == pytest.approx(1.0)
    assert got[6] == pytest.approx(4e-6 + (1 - 4e-6) * 0.5)
    assert got[9] == pytest.approx(4e-6)


VENDOR = """\
---
lr_schedulers:
  training_lr:
    class: {cls}
{args}
policies:
  - lr_scheduler:
      instance_name: training_lr
    starting_epoch: {start}
    ending_epoch: {end}
    frequency: {freq}
"""


@pytest.mark.parametrize(
    ("cls", "args", "make"),
    [
        (
            "MultiStepLR",
            {"milestones": [2, 4], "gamma": 0.5},
            lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [2, 4], 0.5),
        ),
        (
            "StepLR",
            {"step_size": 3, "gamma": 0.3},
            lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.3),
        ),
        ("ExponentialLR", {"gamma": 0.8}, lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.8)),
        (
            "CosineAnnealingLR",
            {"T_max": 6, "eta_min": 0.001},
            lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 6, 0.001),
        ),
    ],
)
@pytest.mark.parametrize(("start", "end", "freq"), [(0, 12, 1), (2, 9, 2)])
def test_vendor_yaml_steps_like_pytorch_schedulers(
    tmp_path: Path, cls, args, make, start: int, end: int, freq: int
) -> None:
    body = "\n".join(f"    {k}: {v}" for k, v in args.items())
    path = tmp_path / "schedule.yaml"
    path.write_text(VENDOR.format(cls=cls, args=body, start=start, end=end, freq=freq))
    schedule = vendor_schedule(path)
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    scheduler = make(optimizer)
    want = []
    for epoch in range(12):  # the vendor's loop: train the epoch, then step when the policy says
        want.append(optimizer.param_groups[0]["lr"])
        if start <= epoch < end and (epoch - start) % freq == 0:
            optimizer.step()
            scheduler.step()
    assert _lrs(schedule, 0.1, 12) == pytest.approx(want)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("linear", {}, "unknown schedule `linear`; choose cosine, multistep, step, onecycle"),
        ("multistep", {}, "multistep needs --milestones"),
        ("multistep", {"milestones": "5,3"}, "milestones must be increasing"),
        ("multistep", {"milestones": "a"}, "expected epochs separated by commas"),
        ("step", {}, "step needs --step-size"),
        ("cosine", {"gamma": 0.5}, "--gamma applies to multistep and step"),
        ("cosine", {"milestones": "3"}, "--milestones apply to multistep"),
    ],
)
def test_schedule_option_errors(name: str, options: dict, message: str) -> None:
    with pytest.raises(EdgesynthError, match=re.escape(message)):
        make_schedule(name, **options)


def test_vendor_yaml_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(VENDOR.format(cls="LambdaLR", args="", start=0, end=5, freq=1))
    with pytest.raises(EdgesynthError, match="`LambdaLR` is not supported; choose MultiStepLR"):
        vendor_schedule(path)
    path.write_text("lr_schedulers:\n  a:\n    class: StepLR\n    step_size: 2\npolicies: []\n")
    with pytest.raises(EdgesynthError, match="no policy runs scheduler `a`"):
        vendor_schedule(path)


def _epoch_lrs(out: str) -> list[float]:
    return [float(m) for m in re.findall(r"^epoch \d+/\d+.*? lr (\S+)$", out, re.MULTILINE)]


@pytest.mark.train
def test_a_run_changes_the_learning_rate_exactly_at_its_milestones(tmp_path: Path, capsys) -> None:
    """The learning rate the optimizer trained each epoch with, read back from the run."""
    common = ["train", "--dataset", "synthetic", "--epochs", "5", "--no-progress", "--lr", "0.01"]
    policy = tmp_path / "policy.yaml"
    policy.write_text("start_epoch: 3\nweight_bits: 8\n")
    common += ["--out-dir", str(tmp_path / "logs"), "--train-limit", "128"]
    common += ["--qat-policy", str(policy)]
    args = ["--lr-schedule", "multistep", "--milestones", "1,3", "--gamma", "0.5"]
    assert main([*common, *args, "--name", "multistep"]) == 0
    out = capsys.readouterr().out
    assert "Learning-rate schedule: multistep, milestones [1, 3], gamma 0.5" in out
    assert _epoch_lrs(out) == [0.01, 0.005, 0.005, 0.0025, 0.0025]  # QAT from epoch 3 too
    ck = torch.load(tmp_path / "logs" / "multistep" / "qat_checkpoint.pth.tar", weights_only=False)
    assert ck["optimizer_state_dict"]["param_groups"][0]["lr"] == pytest.approx(0.0025)
    yaml = tmp_path / "vendor.yaml"
    yaml.write_text(
        VENDOR.format(
            cls="MultiStepLR", args="    milestones: [1, 3]\n    gamma: 0.5", start=0, end=5, freq=1
        )
    )
    assert main([*common, "--lr-schedule", str(yaml), "--name", "vendor"]) == 0
    # the vendor's MultiStepLR counts its steps: the same milestones, the same epochs
    assert _epoch_lrs(capsys.readouterr().out) == [0.01, 0.005, 0.005, 0.0025, 0.0025]
