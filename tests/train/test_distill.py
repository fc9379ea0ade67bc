"""Knowledge distillation: the loss against a hand-computed value, and a run whose student
learns from a teacher checkpoint (QAT as usual)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from edgesynth.cli import main
from edgesynth.train.distill import TeacherSpec, kd_loss


def _softmax(values: list[float]) -> list[float]:
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def test_kd_loss_by_hand() -> None:
    student = [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]
    teacher = [[3.0, 2.0, 1.0], [0.0, 0.0, 4.0]]
    labels = [2, 0]
    t, dw, sw = 2.0, 0.7, 0.3
    hard = sum(-math.log(_softmax(s)[y]) for s, y in zip(student, labels, strict=True)) / 2
    soft = 0.0
    for s, te in zip(student, teacher, strict=True):
        p_s = _softmax([v / t for v in s])
        p_t = _softmax([v / t for v in te])
        soft += sum(pt * (math.log(pt) - math.log(ps)) for pt, ps in zip(p_t, p_s, strict=True))
    want = sw * hard + dw * soft / 2  # KL summed over classes, averaged over the batch
    spec = TeacherSpec(Path("t.pth.tar"), temperature=t, distill_weight=dw, student_weight=sw)
    got = kd_loss(torch.tensor(student), torch.tensor(teacher), torch.tensor(labels), spec)
    assert float(got) == pytest.approx(want, rel=1e-6)


def test_kd_loss_t2_scales_only_the_divergence_by_t_squared() -> None:
    # one item, two classes, T = 2: the student's softened output (0, 0) is (1/2, 1/2), the
    # teacher's (ln 9, 0) / 2 = (ln 3, 0) is (3/4, 1/4); the label's cross-entropy at T = 1 is
    # ln 2 (the student's logits are equal)
    student, teacher, labels = [[0.0, 0.0]], [[math.log(9.0), 0.0]], [0]
    kl = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    want = 0.3 * math.log(2.0) + 0.7 * 4.0 * kl  # T^2 = 4 on the divergence only
    spec = TeacherSpec(Path("t.pth.tar"), temperature=2.0, distill_weight=0.7, student_weight=0.3)
    args = (torch.tensor(student), torch.tensor(teacher), torch.tensor(labels))
    plain = kd_loss(*args, spec)
    scaled = kd_loss(*args, dataclasses.replace(spec, t2_scale=True))
    assert float(scaled) == pytest.approx(want, rel=1e-6)
    assert float(plain) == pytest.approx(0.3 * math.log(2.0) + 0.7 * kl, rel=1e-6)


@pytest.mark.train
def test_student_trains_from_a_teacher_checkpoint_with_qat(tmp_path: Path, capsys) -> None:
    common = ["train", "--dataset", "synthetic", "--no-progress", "--deterministic"]
    common += ["--out-dir", str(tmp_path / "logs"), "--train-limit", "256", "--lr", "3e-3"]
    assert main([*common, "--epochs", "1", "--qat-policy", "None", "--name", "teacher"]) == 0
    teacher = tmp_path / "logs" / "teacher" / "best.pth.tar"
    capsys.readouterr()
    kd = ["--teacher", str(teacher), "--kd-temperature", "4", "--kd-distill-weight", "0.8"]
    kd += ["--kd-student-weight", "0.2"]
    assert main([*common, "--epochs", "2", *kd, "--kd-t2", "--name", "student"]) == 0
    out = capsys.readouterr().out
    assert f"Distillation: teacher {teacher}, temperature 4, distillation weight 0.8" in out
    assert "student weight 0.2, divergence scaled by T^2\n" in out
    assert "epoch 1/1 QAT" in out and "8-bit (quantized) test top1" in out
    # the wrong architecture for the teacher's checkpoint is refused before anything is written
    bad = [*common, "--epochs", "1", *kd, "--teacher-model", "ai85net5", "--name", "bad"]
    status = main(bad)
    assert status == 1 and "(--teacher)" in capsys.readouterr().err
    assert not (tmp_path / "logs" / "bad").exists()
