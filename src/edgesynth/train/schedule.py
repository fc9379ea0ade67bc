"""Learning-rate schedules: the learning rate of each epoch (set before the epoch runs).

`--lr-schedule` names one (all count epochs from 0; `--lr` is the base rate):
- `cosine` (default): from lr down to 1% of it over the run, `lr * (0.01 + 0.99 * (1 +
  cos(pi * t)) / 2)` with t = (epoch - warm-up) / (epochs - warm-up);
- `multistep`: lr times gamma^k, k the number of `--milestones` at or before the epoch;
- `step`: lr times gamma^(epoch // step size);
- `onecycle`: up from lr/25 to lr over the first 30% of the epochs (or the warm-up epochs), then
  down to lr/25/10^4 at the last epoch, both halves of a cosine;
- a schedule YAML in the vendor's form (ai8x-training's `--compress` files): `lr_schedulers:`
  with one scheduler (`class:` MultiStepLR, StepLR, ExponentialLR or CosineAnnealingLR and its
  arguments), and the `policies:` entry that runs it (`starting_epoch`, `ending_epoch`,
  `frequency`). The scheduler steps at the end of every `frequency`-th epoch from
  `starting_epoch` until `ending_epoch`, as the vendor's training steps it.
`--warmup-epochs W`: epochs 0..W-1 train at lr * (e + 1) / (W + 1), whatever the schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError

KINDS = ("cosine", "multistep", "step", "onecycle")
VENDOR_CLASSES = {
    "MultiStepLR": "multistep",
    "StepLR": "step",
    "ExponentialLR": "exponential",
    "CosineAnnealingLR": "cosine-annealing",
}


@dataclass(frozen=True)
class Schedule:
    kind: str = "cosine"
    milestones: tuple[int, ...] = ()
    gamma: float = 0.1
    step_size: int = 1
    warmup: int = 0
    t_max: int = 1  # CosineAnnealingLR
    eta_min: float = 0.0
    start: int = 0  # the first epoch after which the scheduler steps (vendor policies)
    end: int | None = None  # the epoch it stops stepping at (None: never)
    frequency: int = 1

    def lr(self, base: float, epoch: int, epochs: int) -> float:
        """The learning rate of `epoch` (0-based) in a run of `epochs` epochs."""
        if epoch < self.warmup:
            return base * (epoch + 1) / (self.warmup + 1)
        if self.kind == "cosine":
            t = (epoch - self.warmup) / max(epochs - self.warmup, 1)
            return base * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * t)))
        if self.kind == "onecycle":
            return _one_cycle(base, epoch, epochs, self.warmup)
        steps = self.steps_before(epoch)
        if self.kind == "multistep":
            return base * self.gamma ** sum(1 for m in self.milestones if m <= steps)
        if self.kind == "step":
            return base * self.gamma ** (steps // self.step_size)
        if self.kind == "exponential":
            return base * self.gamma**steps
        if self.kind == "cosine-annealing":
            cos = 1 + math.cos(math.pi * steps / self.t_max)
            return self.eta_min + (base - self.eta_min) * cos / 2
        raise AssertionError(self.kind)

    def steps_before(self, epoch: int) -> int:
        """How many times the scheduler has stepped when `epoch` starts."""
        last = epoch if self.end is None else min(epoch, self.end)
        return max(0, math.ceil((last - self.start) / self.frequency))

    def describe(self) -> str:
        parts = [self.kind]
        if self.kind == "multistep":
            parts.append(f"milestones {list(self.milestones)}, gamma {self.gamma:g}")
        elif self.kind == "step":
            parts.append(f"every {self.step_size} epochs, gamma {self.gamma:g}")
        elif self.kind == "exponential":
            parts.append(f"gamma {self.gamma:g}")
        elif self.kind == "cosine-annealing":
            parts.append(f"T_max {self.t_max}, eta_min {self.eta_min:g}")
        if self.warmup:
            parts.append(f"warm-up {self.warmup} epochs")
        return ", ".join(parts)


def _one_cycle(base: float, epoch: int, epochs: int, warmup: int) -> float:
    low = base / 25
    up = warmup or max(1, round(0.3 * epochs))
    if epoch < up:
        return low + (base - low) * (1 - math.cos(math.pi * epoch / up)) / 2
    final = low / 1e4
    t = (epoch - up) / max(epochs - 1 - up, 1)
    return final + (base - final) * (1 + math.cos(math.pi * t)) / 2


def parse_milestones(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        values = tuple(int(v) for v in str(text).split(","))
    except ValueError:
        raise EdgesynthError(
            f"expected epochs separated by commas (e.g. 10,20), got `{text}`.", key="--milestones"
        ) from None
    if any(v < 1 for v in values) or list(values) != sorted(set(values)):
        raise EdgesynthError(
            f"milestones must be increasing epochs of 1 or more, got `{text}`.", key="--milestones"
        )
    return values


def make_schedule(
    name: str | None,
    *,
    milestones: str | None = None,
    gamma: float | None = None,
    step_size: int | None = None,
    warmup: int = 0,
) -> Schedule:
    """`--lr-schedule` and its options -> Schedule; a YAML path reads the vendor's form."""
    name = name or "cosine"
    if warmup < 0:
        raise EdgesynthError(f"must be 0 or more, got {warmup}.", key="--warmup-epochs")
    if name.endswith((".yaml", ".yml")):
        if milestones or step_size:
            raise EdgesynthError(
                "--milestones and --step-size come from the schedule file; drop them.",
                file=name,
            )
        return vendor_schedule(Path(name), warmup)
    if name not in KINDS:
        raise EdgesynthError(
            f"unknown schedule `{name}`; choose {', '.join(KINDS)} or a schedule YAML file.",
            key="--lr-schedule",
        )
    marks = parse_milestones(milestones)
    if name == "multistep" and not marks:
        raise EdgesynthError("multistep needs --milestones (e.g. 10,20).", key="--lr-schedule")
    if marks and name != "multistep":
        raise EdgesynthError(f"--milestones apply to multistep, not {name}.", key="--milestones")
    if name == "step" and not step_size:
        raise EdgesynthError("step needs --step-size N (epochs).", key="--lr-schedule")
    if step_size and name != "step":
        raise EdgesynthError(f"--step-size applies to step, not {name}.", key="--step-size")
    if gamma is not None and name not in ("multistep", "step"):
        raise EdgesynthError(f"--gamma applies to multistep and step, not {name}.", key="--gamma")
    return Schedule(
        name,
        milestones=marks,
        gamma=0.1 if gamma is None else gamma,
        step_size=step_size or 1,
        warmup=warmup,
    )


def vendor_schedule(path: Path, warmup: int = 0) -> Schedule:
    """A schedule YAML in the vendor's (`--compress`) form."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise EdgesynthError(f"cannot read it ({err.strerror}).", file=str(path)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise EdgesynthError(
            f"not valid YAML ({err}).".splitlines()[0], file=str(path), line=line
        ) from None
    schedulers = doc.get("lr_schedulers") if isinstance(doc, dict) else None
    if not isinstance(schedulers, dict) or len(schedulers) != 1:
        raise EdgesynthError(
            "needs `lr_schedulers:` with exactly one scheduler (name: {class: ..., ...}).",
            file=str(path),
            key="lr_schedulers",
        )
    ((instance, spec),) = schedulers.items()
    if not isinstance(spec, dict):
        raise EdgesynthError("expected a mapping.", file=str(path), key=f"lr_schedulers.{instance}")
    policy = _policy_for(doc.get("policies"), str(instance), path)
    return Schedule(
        warmup=warmup,
        start=int(policy.get("starting_epoch", 0)),
        end=None if policy.get("ending_epoch") is None else int(policy["ending_epoch"]),
        frequency=max(1, int(policy.get("frequency", 1))),
        **_vendor_args(spec, str(instance), path),
    )


def _vendor_args(spec: dict[str, Any], instance: str, path: Path) -> dict[str, Any]:
    cls = spec.get("class")
    kind = VENDOR_CLASSES.get(str(cls))
    key = f"lr_schedulers.{instance}.class"
    if kind is None:
        raise EdgesynthError(
            f"scheduler class `{cls}` is not supported; choose {', '.join(VENDOR_CLASSES)}.",
            file=str(path),
            key=key,
        )
    allowed = {
        "multistep": {"milestones", "gamma"},
        "step": {"step_size", "gamma"},
        "exponential": {"gamma"},
        "cosine-annealing": {"T_max", "eta_min"},
    }[kind]
    unknown = sorted(k for k in spec if k not in allowed | {"class"})
    if unknown:
        raise EdgesynthError(
            f"{cls} takes {', '.join(sorted(allowed))}, not `{unknown[0]}`.",
            file=str(path),
            key=f"lr_schedulers.{instance}",
        )
    args: dict[str, Any] = {"kind": kind, "gamma": float(spec.get("gamma", 0.1))}
    if kind == "multistep":
        args["milestones"] = tuple(int(m) for m in spec.get("milestones") or ())
    if kind == "step":
        args["step_size"] = int(spec.get("step_size", 1))
    if kind == "cosine-annealing":
        if "T_max" not in spec:
            raise EdgesynthError("CosineAnnealingLR needs T_max.", file=str(path), key=key)
        args["t_max"] = max(1, int(spec["T_max"]))
        args["eta_min"] = float(spec.get("eta_min", 0.0))
    return args


def _policy_for(policies: Any, instance: str, path: Path) -> dict[str, Any]:
    for entry in policies or []:
        if not isinstance(entry, dict):
            continue
        ref = entry.get("lr_scheduler")
        if isinstance(ref, dict) and ref.get("instance_name") == instance:
            return entry
    raise EdgesynthError(
        f"no policy runs scheduler `{instance}`; add `- lr_scheduler: {{instance_name: "
        f"{instance}}}` with starting_epoch, ending_epoch and frequency.",
        file=str(path),
        key="policies",
    )
