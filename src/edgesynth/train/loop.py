"""The training loop behind `edgesynth train`: float epochs, then QAT from the policy's
`start_epoch` (batchnorm folded), checkpoints in the vendor's layout in a fresh run folder."""

from __future__ import annotations

import copy
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.nn.qat import QatPolicy, bits_label, check_policy_fits, enable_qat, is_qat
from edgesynth.quant.checkpoint import load_state, model_state, read_checkpoint, write_checkpoint
from edgesynth.train import accel, defaults, distributed
from edgesynth.train.audio_datasets import augment_audio
from edgesynth.train.datasets import Dataset, Split
from edgesynth.train.distill import TeacherSpec, kd_loss, load_teacher
from edgesynth.train.metrics import MetricAccumulator, Metrics
from edgesynth.train.models import create_model, get_model_info
from edgesynth.train.regression import (
    OutputUnit,
    RegressionAccumulator,
    is_regression,
    regression_loss,
)
from edgesynth.train.schedule import Schedule
from edgesynth.train.usermodel import UserModel

Log = Callable[[str], None]


@dataclass
class TrainConfig:
    model: str
    dataset: Dataset
    device: str = defaults.DEVICE
    epochs: int = defaults.EPOCHS
    batch_size: int = defaults.BATCH_SIZE
    lr: float = defaults.LEARNING_RATE
    optimizer: str = defaults.OPTIMIZER
    weight_decay: float = defaults.WEIGHT_DECAY
    qat_policy: QatPolicy | None = None
    seed: int | None = None
    deterministic: bool = False
    augment: bool | None = None  # default: the dataset's recommendation
    avg_pool_rounding: bool = False
    bias: bool | None = None
    progress: bool = True
    tensorboard: bool = False
    resume: Path | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    torch_device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    amp: bool = False  # mixed precision in the float phase (never in QAT)
    compile: bool = False  # torch.compile the training forward pass
    compile_qat: bool = False  # ... in the QAT epochs too (only when asked: accel.compile_qat)
    workers: int = 0  # data-loader worker processes
    pin_memory: bool = False
    dist: distributed.Context = distributed.SINGLE
    user_model: UserModel | None = None  # the user's class (`model` is then its name)
    schedule: Schedule = field(default_factory=Schedule)
    teacher: TeacherSpec | None = None  # knowledge distillation
    loss: str = "ce"  # ce (classification) or a regression loss (see train/regression.py)
    param_hist: bool = False  # TensorBoard: histograms of every parameter, every epoch
    pr_curves: bool = False  # TensorBoard: precision-recall curves of the test set

    @property
    def rank_batch_size(self) -> int:
        """Each process's share of --batch-size (the batch of one optimizer step)."""
        return math.ceil(self.batch_size / self.dist.world_size)


@dataclass
class EpochRecord:
    epoch: int
    qat: bool
    train_loss: float
    train_top1: float
    test: Metrics


@dataclass
class TrainResult:
    model: nn.Module
    history: list[EpochRecord]
    checkpoints: dict[str, Path]
    best_top1: float


# --- setup --------------------------------------------------------------------------------


def seed_everything(seed: int, deterministic: bool) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def build_model(cfg: TrainConfig) -> nn.Module:
    ds = cfg.dataset
    shape = ds.input_shape
    if cfg.user_model is not None:
        spatial = tuple(shape[1:]) if len(shape) == 3 else (shape[1], 1)
        return cfg.user_model.build(
            num_classes=ds.num_classes,
            num_channels=shape[0],
            dimensions=spatial,
            bias=cfg.bias,
            device=cfg.device,
        )
    dims = get_model_info(cfg.model).dims
    if dims == 1 and len(shape) != 2:
        raise EdgesynthError(f"model `{cfg.model}` takes 1D data; {ds.name} is {shape}.")
    if dims == 2 and len(shape) != 3:
        raise EdgesynthError(f"model `{cfg.model}` takes 2D data; {ds.name} is {shape}.")
    spatial = tuple(shape[1:]) if dims == 2 else (shape[1], 1)
    with enn.use(cfg.device):
        return create_model(
            cfg.model,
            num_classes=ds.num_classes,
            num_channels=shape[0],
            dimensions=spatial,
            bias=cfg.bias,
        )


def make_optimizer(cfg: TrainConfig, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=cfg.weight_decay)
    raise EdgesynthError(f"unknown optimizer `{cfg.optimizer}`; choose adam or sgd.")


def lr_at(cfg: TrainConfig, epoch: int) -> float:
    """The learning rate of `epoch` (`schedule`; by default cosine decay to 1% of --lr)."""
    return cfg.schedule.lr(cfg.lr, epoch, cfg.epochs)


# --- data ---------------------------------------------------------------------------------


class _Batches(torch.utils.data.Dataset):
    """A split indexed by lists of positions: one `__getitem__` per batch, no collation."""

    def __init__(self, split: Split) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split.x[idx], self.split.y[idx]


def loader(
    split: Split,
    batch_size: int,
    *,
    shuffle: bool,
    seed: int | None = None,
    epoch: int = 0,
    dist: distributed.Context = distributed.SINGLE,
    workers: int = 0,
    pin_memory: bool = False,
) -> torch.utils.data.DataLoader:
    """Batches of `split`: shuffled per epoch (the same order on every process of a
    data-parallel run, each taking its own share), prefetched by `workers` processes."""
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler
    from torch.utils.data.distributed import DistributedSampler

    data = _Batches(split)
    sampler: torch.utils.data.Sampler[int]
    if dist.active:
        sampler = DistributedSampler(
            data,
            num_replicas=dist.world_size,
            rank=dist.rank,
            shuffle=shuffle,
            seed=seed or 0,
        )
        sampler.set_epoch(epoch)
    elif shuffle:
        gen = torch.Generator()
        gen.manual_seed((seed if seed is not None else torch.seed()) + epoch)
        sampler = RandomSampler(data, generator=gen)
    else:
        sampler = SequentialSampler(data)
    return DataLoader(
        data,
        sampler=BatchSampler(sampler, batch_size, drop_last=False),
        batch_size=None,
        num_workers=workers,
        pin_memory=pin_memory,
        persistent_workers=False,
    )


def augment(x: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """Small random rotations, scalings and shifts of 2D images, back on the 1/128 grid."""
    if x.dim() != 4:
        return x
    n = x.shape[0]
    r = (torch.rand(n, 4, generator=gen) * 2 - 1).to(x.device)
    angle = r[:, 0] * math.radians(10)
    scale = 1 + r[:, 1] * 0.1
    shift = r[:, 2:] * (2.0 / x.shape[-1]) * 2  # up to 2 pixels
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack(
        [torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1
    )
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    moved = F.grid_sample(x + 1.0, grid, align_corners=False, padding_mode="zeros") - 1.0
    return torch.clamp(torch.floor(moved * 128 + 0.5), -128, 127) / 128


# --- epochs -------------------------------------------------------------------------------


def _progress(iterable: Any, total: int, desc: str, enabled: bool) -> Any:
    # Bars only on a terminal: in logs and CI they would be carriage-return noise.
    if not enabled or not sys.stderr.isatty():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)


def train_epoch(
    step_model: nn.Module,
    data: Split,
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    gen: torch.Generator | None,
    desc: str,
    num_classes: int,
    *,
    epoch: int = 0,
    qat: bool = False,
    scaler: torch.amp.GradScaler | None = None,
    teacher: nn.Module | None = None,
) -> tuple[float, float]:
    """One epoch of `step_model` (the model, or its DDP/compiled wrapper); returns the
    loss and top-1 over every process's share."""
    step_model.train()
    device = cfg.torch_device
    precision = accel.Precision(device.type, cfg.amp)
    acc = _accumulator(cfg.loss, num_classes)
    batches_ = loader(
        data,
        cfg.rank_batch_size,
        shuffle=True,
        seed=cfg.seed,
        epoch=epoch,
        dist=cfg.dist,
        workers=cfg.workers,
        pin_memory=cfg.pin_memory,
    )
    use_aug = cfg.dataset.augment if cfg.augment is None else cfg.augment
    weights = cfg.dataset.class_weights
    weight = None if weights is None else torch.tensor(weights, device=device)
    with enn.use(cfg.device, simulate=False, avg_pool_rounding=cfg.avg_pool_rounding):
        for x, y in _progress(batches_, len(batches_), desc, cfg.progress and cfg.dist.is_main):
            x = x.to(device, non_blocking=cfg.pin_memory)
            y_dev = y.to(device, non_blocking=cfg.pin_memory)
            if use_aug:
                x = augment_audio(x, gen) if cfg.dataset.kind == "audio" else augment(x, gen)
            if x.dim() == 4:  # oneDNN and cuDNN convolutions run fastest on channels-last data
                x = x.contiguous(memory_format=torch.channels_last)
            with precision.autocast(active=not qat):
                logits = step_model(x)
                if teacher is not None and cfg.teacher is not None:
                    with torch.no_grad():
                        taught = teacher(x).float()
                    loss = kd_loss(logits.float(), taught, y_dev, cfg.teacher, weight)
                elif is_regression(cfg.loss):
                    loss = regression_loss(cfg.loss, logits.float(), y_dev)
                else:
                    loss = F.cross_entropy(logits.float(), y_dev, weight=weight)
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None and scaler.is_enabled():
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            acc.add(logits.detach().float().cpu(), y, float(loss.detach()))
    loss_sum, correct, n = distributed.sum_over_ranks(
        cfg.dist, [acc.loss_sum, float(acc.correct1), float(acc.n)], _reduce_device(cfg)
    )
    n = max(n, 1.0)
    return loss_sum / n, 100.0 * correct / n


def _accumulator(loss: str, num_classes: int) -> MetricAccumulator | RegressionAccumulator:
    return RegressionAccumulator() if is_regression(loss) else MetricAccumulator(num_classes)


def _reduce_device(cfg: TrainConfig) -> torch.device:
    # NCCL reduces GPU tensors only; Gloo CPU tensors.
    return cfg.torch_device if cfg.torch_device.type == "cuda" else torch.device("cpu")


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: Split,
    *,
    num_classes: int,
    device: str,
    eight_bit: bool = False,
    avg_pool_rounding: bool = False,
    batch_size: int = 256,
    loss: str = "ce",
) -> Metrics:
    """Accuracy on `data` (or the regression scores, for a regression `loss`), in float or
    in 8-bit mode (the chip's integers), on the device the model is on (8-bit mode needs
    float64: on Apple's GPU it runs on the CPU)."""
    if is_regression(loss):
        return _evaluate_regression(model, data, device, eight_bit, avg_pool_rounding, loss)
    where = _model_device(model)
    if eight_bit and where.type == "mps":
        model, where = copy.deepcopy(model).cpu(), torch.device("cpu")
    model.eval()
    acc = MetricAccumulator(num_classes)
    with enn.use(device, simulate=eight_bit, avg_pool_rounding=avg_pool_rounding):
        for x, y in loader(data, batch_size, shuffle=False):
            x = x.to(where)
            inp = torch.round(x.double() * 128) if eight_bit else x
            logits = model(inp).float().cpu()
            loss = float(F.cross_entropy(logits / (2**14 if eight_bit else 1), y))
            acc.add(logits, y, loss)
    return acc.result()


@torch.no_grad()
def _evaluate_regression(
    model: nn.Module, data: Split, device: str, eight_bit: bool, rounding: bool, loss: str
) -> Metrics:
    """Regression scores; in 8-bit mode the chip's integers, rescaled to training values."""
    where = _model_device(model)
    if eight_bit and where.type == "mps":
        model, where = copy.deepcopy(model).cpu(), torch.device("cpu")
    model.eval()
    acc = RegressionAccumulator()
    with enn.use(device, simulate=eight_bit, avg_pool_rounding=rounding):
        for x, y in loader(data, 256, shuffle=False):
            x = x.to(where)
            if eight_bit:
                watch = OutputUnit(model)
                out = model(torch.round(x.double() * 128)).double().cpu()
                out = out / watch.unit()
            else:
                out = model(x).double().cpu()
            acc.add(out, y, float(regression_loss(loss, out, y.double())))
    return acc.result()


# --- checkpoints --------------------------------------------------------------------------


def checkpoint_extras(cfg: TrainConfig, **more: Any) -> dict[str, Any]:
    ds = cfg.dataset
    return {
        **cfg.extras,
        **more,
        "dataset": ds.name,
        "device": cfg.device,
        "num_classes": ds.num_classes,
        "input_shape": list(ds.input_shape),
        "qat_policy": cfg.qat_policy.to_dict() if cfg.qat_policy else None,
        "bias": cfg.bias,
    }


def resume_state(cfg: TrainConfig, model: nn.Module) -> tuple[int, dict[str, Any], dict]:
    """Load --resume into `model`: the next epoch, the saved extras and optimizer state."""
    assert cfg.resume is not None
    ck = read_checkpoint(cfg.resume)
    arch = str(ck.get("arch") or "")
    if arch and arch.lower() != cfg.model.lower():
        raise EdgesynthError(
            f"the checkpoint was trained as `{arch}`, not `{cfg.model}`.", file=str(cfg.resume)
        )
    load_state(model, ck["state_dict"], source=str(cfg.resume))
    return (
        int(ck.get("epoch", -1)) + 1,
        dict(ck.get("extras") or {}),
        ck.get("optimizer_state_dict") or {},
    )


def _placed(model: nn.Module, cfg: TrainConfig) -> nn.Module:
    """The model on the training device; images in channels-last layout (the fastest for
    oneDNN and cuDNN), the weights too (also the QAT model's, which folding made afresh)."""
    model = model.to(cfg.torch_device)
    if len(cfg.dataset.input_shape) == 3:
        model = model.to(memory_format=torch.channels_last)
    return model


def _step_model(model: nn.Module, cfg: TrainConfig) -> nn.Module:
    """What the training steps call: the model, wrapped for data parallelism (which copies
    rank 0's weights to every process) and compiled when asked."""
    wrapped = distributed.wrap(model, cfg.dist, cfg.torch_device)
    if not cfg.compile or (is_qat(model) and not cfg.compile_qat):
        return wrapped
    enn.prime_modes(model)  # the layers' modes read before tracing: no graph breaks
    return torch.compile(wrapped)


@dataclass
class _State:
    """What changes during a run: the model (folded at QAT), its step wrapper, optimizer."""

    model: nn.Module
    step_model: nn.Module
    optimizer: torch.optim.Optimizer
    start: int
    best: dict[str, float]
    teacher: nn.Module | None = None
    history: list[EpochRecord] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)


def _setup(cfg: TrainConfig, log: Log) -> tuple[TrainConfig, _State, torch.Generator | None]:
    """Seed, build (or resume) the model, wrap it, make the optimizer; load the teacher."""
    ctx = cfg.dist
    seed = distributed.shared_seed(ctx, cfg.seed)
    if seed is not None and cfg.seed is None:
        cfg = replace(cfg, seed=seed)
    gen = seed_everything(cfg.seed + ctx.rank, cfg.deterministic) if cfg.seed is not None else None
    model = build_model(cfg)
    if cfg.qat_policy is not None:
        with enn.use(cfg.device):
            check_policy_fits(model, cfg.qat_policy)
    start, saved, opt_state = 0, {}, {}
    if cfg.resume is not None:
        start, saved, opt_state = resume_state(cfg, model)
    model = _placed(model, cfg)
    step_model = _step_model(model, cfg)
    optimizer = make_optimizer(cfg, model, lr_at(cfg, start))
    if opt_state:
        try:
            optimizer.load_state_dict(opt_state)
        except (ValueError, KeyError):
            log("note: the optimizer state does not fit this run; starting it afresh")
    saved_best = float(saved.get("best_top1", -saved.get("best_loss", math.inf)))
    best = {
        "float": saved_best if not is_qat(model) else -math.inf,
        "qat": saved_best if is_qat(model) else -math.inf,
    }
    state = _State(model, step_model, optimizer, start, best)
    if cfg.teacher is not None:
        ds = cfg.dataset
        teacher = load_teacher(
            cfg.teacher, num_classes=ds.num_classes, input_shape=ds.input_shape, device=cfg.device
        )
        state.teacher = teacher.to(cfg.torch_device)
    return cfg, state, gen


def _start_qat_if_due(cfg: TrainConfig, state: _State, epoch: int, log: Log) -> None:
    """At the policy's epoch every process folds batchnorm and switches to QAT; the new
    wrapper then copies rank 0's folded weights to all of them."""
    policy = cfg.qat_policy
    if policy is None or epoch < policy.start_epoch or is_qat(state.model):
        return
    with enn.use(cfg.device):  # the device's limits (binary weights: MAX78002 only)
        folded = enable_qat(state.model, policy)
    state.model = _placed(state.model, cfg)
    if cfg.compile:  # the QAT model is another graph: trace it afresh, not over the float one
        torch._dynamo.reset()
    state.step_model = _step_model(state.model, cfg)
    state.optimizer = make_optimizer(cfg, state.model, lr_at(cfg, epoch))
    log(
        f"epoch {epoch}: quantization-aware training starts "
        f"({bits_label(policy.weight_bits)} weights, {folded} batchnorm layers folded)"
    )
    if cfg.compile and not cfg.compile_qat:
        log(f"epoch {epoch}: the QAT epochs run uncompiled (--compile compiles them too)")


def _log_epoch(
    writer: Any, desc: str, epoch: int, loss: float, top1: float, m: Metrics, lr: float, log: Log
) -> None:
    train = f"train loss {loss:.4f}" + ("" if m.regression else f" top1 {top1:.2f}%")
    log(f"{desc}: {train} | test loss {m.loss:.4f} {m.describe()} lr {lr:.2e}")
    if writer is None:
        return
    if m.regression is not None:
        r = m.regression
        scalars = [("train/loss", loss), ("test/loss", m.loss), ("test/mse", r.mse)]
        scalars += [("test/mae", r.mae), ("test/cosine", r.cosine)]
    else:
        scalars = [("train/loss", loss), ("train/top1", top1), ("test/loss", m.loss)]
        scalars += [("test/top1", m.top1), ("test/top5", m.top5)]
    for tag, value in scalars:
        writer.add_scalar(tag, value, epoch)
    writer.flush()


def _log_extras(writer: Any, cfg: TrainConfig, model: nn.Module, epoch: int) -> None:
    """--param-hist and --pr-curves: TensorBoard histograms and precision-recall curves."""
    if writer is None or not (cfg.param_hist or cfg.pr_curves):
        return
    from edgesynth.train import tblog

    if cfg.param_hist:
        tblog.log_param_histograms(writer, model, epoch)
    if cfg.pr_curves:
        ds = cfg.dataset
        tblog.log_pr_curves(writer, model, ds.test, ds.classes, cfg.device, epoch)
    writer.flush()


def _save_epoch(
    cfg: TrainConfig, state: _State, run_dir: Path, epoch: int, qat: bool, m: Metrics
) -> None:
    """The epoch's checkpoint, and the best one when this epoch is the best of its phase."""
    phase = "qat" if qat else "float"
    prefix = "qat_" if qat else ""
    best = state.best[phase]
    score = m.score  # top-1, or the negative loss for regression
    kind = ("loss", -1.0) if m.regression is not None else ("top1", 1.0)
    extras = checkpoint_extras(
        cfg,
        **{
            f"current_{kind[0]}": kind[1] * score,
            f"best_{kind[0]}": kind[1] * max(best, score),
            "best_epoch": epoch if score > best else None,
        },
    )
    weights = model_state(state.model)
    names = [f"{prefix}checkpoint"] + ([f"{prefix}best"] if score > best else [])
    for name in names:
        state.paths[name] = write_checkpoint(
            run_dir / f"{name}.pth.tar",
            arch=cfg.model,
            state_dict=weights,
            epoch=epoch,
            extras=extras,
            optimizer=state.optimizer,
            overwrite=True,  # the run folder's own files, rewritten every epoch
        )
    state.best[phase] = max(best, score)


def run(cfg: TrainConfig, run_dir: Path | None, log: Log = print) -> TrainResult:
    """Train (and QAT) `cfg.model` on `cfg.dataset`, writing checkpoints into `run_dir`.

    In a data-parallel run every process calls this; only rank 0 has a `run_dir` and
    evaluates, logs and writes; the others train their share and wait for it.
    """
    cfg, state, gen = _setup(cfg, log)
    scaler = accel.Precision(cfg.torch_device.type, cfg.amp).scaler()
    logs = cfg.tensorboard or cfg.param_hist or cfg.pr_curves
    writer = _tensorboard(run_dir) if logs and run_dir is not None else None
    ds = cfg.dataset
    for epoch in range(state.start, cfg.epochs):
        _start_qat_if_due(cfg, state, epoch, log)
        for group in state.optimizer.param_groups:
            group["lr"] = lr_at(cfg, epoch)
        qat = is_qat(state.model)
        desc = f"epoch {epoch}/{cfg.epochs - 1}{' QAT' if qat else ''}"
        loss, top1 = train_epoch(
            state.step_model,
            ds.train,
            state.optimizer,
            cfg,
            gen,
            desc,
            ds.num_classes,
            epoch=epoch,
            qat=qat,
            scaler=scaler,
            teacher=state.teacher,
        )
        if run_dir is None:  # not rank 0: rank 0 evaluates and writes, then all go on
            distributed.barrier(cfg.dist)
            continue
        m = evaluate(
            state.model,
            ds.test,
            num_classes=ds.num_classes,
            device=cfg.device,
            avg_pool_rounding=cfg.avg_pool_rounding,
            loss=cfg.loss,
        )
        state.history.append(EpochRecord(epoch, qat, loss, top1, m))
        lr = state.optimizer.param_groups[0]["lr"]
        _log_epoch(writer, desc, epoch, loss, top1, m, lr, log)
        _log_extras(writer, cfg, state.model, epoch)
        _save_epoch(cfg, state, run_dir, epoch, qat, m)
        distributed.barrier(cfg.dist)
    if writer is not None:
        writer.close()
    return TrainResult(state.model, state.history, state.paths, max(state.best.values()))


def _tensorboard(run_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:  # pragma: no cover - tensorboard is a training extra
        raise EdgesynthError("--tensorboard needs the `tensorboard` package installed.") from err
    return SummaryWriter(log_dir=str(run_dir / "tensorboard"))
