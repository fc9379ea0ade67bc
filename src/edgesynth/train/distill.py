"""Knowledge distillation: a trained teacher's softened outputs guide the student.

The loss is the vendor's (ai8x-training's `--kd-*` options): student_weight times the
cross-entropy against the labels, plus distill_weight times the Kullback-Leibler divergence
between the teacher's and the student's softmax at temperature T, summed over the classes and
averaged over the batch (without a T^2 factor). Its defaults are the vendor's: T = 1, weights
0.5 and 0.5. With `t2_scale` (`--kd-t2`) the divergence is multiplied by T^2, Hinton et al.'s
scaling, which keeps the soft targets' gradients about the size they have at T = 1. The
teacher runs in float, without gradients; the student trains as usual (QAT from the policy's
epoch on).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.train.usermodel import UserModel


@dataclass(frozen=True)
class TeacherSpec:
    checkpoint: Path
    model: str | None = None  # a built-in architecture (default: the checkpoint's `arch`)
    user: UserModel | None = None  # or the user's class
    temperature: float = 1.0
    distill_weight: float = 0.5
    student_weight: float = 0.5
    t2_scale: bool = False  # multiply the divergence by T^2 (not the vendor's loss)

    def describe(self) -> str:
        scaled = ", divergence scaled by T^2" if self.t2_scale else ""
        return (
            f"teacher {self.checkpoint}, temperature {self.temperature:g}, distillation "
            f"weight {self.distill_weight:g}, student weight {self.student_weight:g}{scaled}"
        )


def kd_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    labels: torch.Tensor,
    spec: TeacherSpec,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    t = spec.temperature
    hard = F.cross_entropy(student, labels, weight=weight)
    soft = F.kl_div(
        F.log_softmax(student / t, dim=1),
        F.softmax(teacher.detach() / t, dim=1),
        reduction="batchmean",
    )
    if spec.t2_scale:
        soft = soft * (t * t)
    return spec.student_weight * hard + spec.distill_weight * soft


def check_spec(spec: TeacherSpec) -> None:
    if not spec.temperature > 0:
        raise EdgesynthError(f"must be positive, got {spec.temperature}.", key="--kd-temperature")
    for key, value in (
        ("--kd-distill-weight", spec.distill_weight),
        ("--kd-student-weight", spec.student_weight),
    ):
        if value < 0:
            raise EdgesynthError(f"must be 0 or more, got {value}.", key=key)
    if not spec.checkpoint.is_file():
        raise EdgesynthError("no such checkpoint.", file=str(spec.checkpoint), key="--teacher")


def load_teacher(
    spec: TeacherSpec,
    *,
    num_classes: int,
    input_shape: tuple[int, ...],
    device: str,
) -> nn.Module:
    """The teacher, built for the data, its checkpoint loaded, in eval mode, frozen."""
    from edgesynth.quant.checkpoint import load_state, read_checkpoint
    from edgesynth.train.models import create_model, get_model_info

    ck = read_checkpoint(spec.checkpoint)
    spatial = tuple(input_shape[1:]) if len(input_shape) == 3 else (input_shape[1], 1)
    sizes = {"num_classes": num_classes, "num_channels": input_shape[0], "dimensions": spatial}
    if spec.user is not None:
        net = spec.user.build(**sizes, device=device)
    else:
        name = spec.model or ck.get("arch")
        if not name:
            raise EdgesynthError(
                "the checkpoint names no `arch`; choose the teacher's model with "
                "--teacher-model or --teacher-model-file.",
                file=str(spec.checkpoint),
            )
        import edgesynth.nn as enn

        with enn.use(device):
            net = create_model(get_model_info(str(name)).name, **sizes)
    load_state(net, ck["state_dict"], source=f"{spec.checkpoint} (--teacher)")
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net
