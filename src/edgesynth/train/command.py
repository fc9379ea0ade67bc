"""`edgesynth train`: argument handling around the training loop.

Everything that can be checked is checked before the run folder exists (dataset files, model,
policy, resume checkpoint), so a bad command line leaves nothing behind. Checkpoints are written
atomically into a new folder under --out-dir; an earlier run is never overwritten.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from edgesynth.errors import EdgesynthError
from edgesynth.nn.qat import QatPolicy, check_policy_fits, load_policy
from edgesynth.outputs import check_output_file
from edgesynth.quant.files import quantize_file
from edgesynth.quant.ptq import QuantizeOptions
from edgesynth.targets.max7800x.device import get_device
from edgesynth.train import accel, defaults, deploy, distributed
from edgesynth.train.datasets import Dataset, Split, get_dataset_info, load_dataset
from edgesynth.train.distill import TeacherSpec, check_spec
from edgesynth.train.loop import TrainConfig, build_model, evaluate, run
from edgesynth.train.metrics import format_confusion
from edgesynth.train.models import get_model_info
from edgesynth.train.regression import choose_loss, is_regression
from edgesynth.train.rundir import run_folder
from edgesynth.train.schedule import Schedule, make_schedule
from edgesynth.train.usermodel import UserModel, probe, user_model
from edgesynth.train.yamlgen import write_yaml_template, yaml_template

Log = Callable[[str], None]


@dataclass
class TrainArgs:
    model: str | None = None
    dataset: str | None = None  # a built-in dataset (default digits)
    model_file: str | None = None  # FILE.py:CLASS, the user's network
    model_args: str | None = None  # its keyword arguments: JSON, or a YAML file
    dataset_file: str | None = None  # FILE.py:FUNCTION, the user's data
    data: Path | None = None
    download: bool = False  # fetch missing MNIST files into `data`
    device: str | None = None  # a MAX chip (the vendor's spelling) or a PyTorch device
    chip: str | None = None  # the MAX chip (default MAX78000)
    epochs: int = defaults.EPOCHS
    batch_size: int = defaults.BATCH_SIZE
    lr: float = defaults.LEARNING_RATE
    optimizer: str = defaults.OPTIMIZER
    weight_decay: float = defaults.WEIGHT_DECAY
    qat_policy: str | None = None  # path, "None", or None for the default policy
    out_dir: Path = Path("logs")
    name: str | None = None
    resume: Path | None = None
    deterministic: bool = False
    seed: int | None = None
    evaluate: bool = False
    checkpoint: Path | None = None  # for --evaluate
    eight_bit: bool = False
    save_sample: int | None = None
    yaml_template: Path | None = None
    overwrite: bool = False  # replace an existing --yaml-template (or --evaluate's sample)
    simulate: int = 0
    tensorboard: bool = False
    progress: bool = True
    augment: bool | None = None
    avg_pool_rounding: bool = False
    use_bias: bool | None = None
    threads: int | None = None
    train_limit: int | None = None  # only the first N training items (quick experiments)
    compile: bool | None = None  # torch.compile (default: on for CUDA)
    amp: bool = False  # mixed precision in the float phase
    workers: int = 0  # data-loader worker processes
    pin_memory: bool | None = None  # page-locked batches (default: on for CUDA)
    nproc_per_node: int | None = None  # data-parallel processes on this node
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    lr_schedule: str | None = None  # cosine (default), multistep, step, onecycle, or a YAML
    milestones: str | None = None
    gamma: float | None = None
    step_size: int | None = None
    warmup_epochs: int = 0
    class_weights: str | None = None  # comma-separated, one per class
    teacher: Path | None = None  # distillation: the teacher's checkpoint
    teacher_model: str | None = None
    teacher_model_file: str | None = None
    teacher_model_args: str | None = None
    kd_temperature: float = 1.0
    kd_distill_weight: float = 0.5
    kd_student_weight: float = 0.5
    kd_t2: bool = False  # scale the distillation term by T^2 (Hinton et al.)
    loss: str | None = None  # ce, or a regression loss (default: by the dataset's targets)
    regression: bool = False  # the vendor's --regression: the targets are vectors
    slice_sample: bool = False  # --save-sample keeps the first 3 channels (RGB models)
    param_hist: bool = False  # TensorBoard histograms of the parameters every epoch
    pr_curves: bool = False  # TensorBoard precision-recall curves of the test set


_PATH_FIELDS = ("data", "out_dir", "resume", "checkpoint", "yaml_template", "teacher")


def train_args_to_json(args: TrainArgs) -> str:
    """The settings as JSON, for the processes of a data-parallel run."""
    return json.dumps({k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(args).items()})


def train_args_from_json(text: str) -> TrainArgs:
    raw = json.loads(text)
    known = {f.name for f in fields(TrainArgs)}
    values = {k: (Path(v) if k in _PATH_FIELDS and v is not None else v) for k, v in raw.items()}
    return TrainArgs(**{k: v for k, v in values.items() if k in known})


def default_policy(epochs: int) -> QatPolicy:
    """QAT for the last 40% of the epochs (at least the last one), 8-bit weights."""
    return QatPolicy(start_epoch=max(0, min(epochs - 1, math.ceil(epochs * 0.6))), weight_bits=8)


def resolve_policy(args: TrainArgs) -> QatPolicy | None:
    if args.qat_policy is None:
        return default_policy(args.epochs)
    return load_policy(args.qat_policy)


def _check_numbers(args: TrainArgs) -> None:
    for key, value, low in (("--epochs", args.epochs, 1), ("--batch-size", args.batch_size, 1)):
        if value < low:
            raise EdgesynthError(f"{key} must be at least {low}, got {value}.")
    if not args.lr > 0:
        raise EdgesynthError(f"--lr must be positive, got {args.lr}.")


def train_main(args: TrainArgs, log: Log = print) -> Path | None:
    """Run the command; returns the run folder (None for --evaluate and for the launcher of
    a data-parallel run, whose rank 0 prints it)."""
    _check_numbers(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    chip, spec = accel.split_device(args.device, args.chip)
    device = get_device(chip).name
    ctx = distributed.from_env()
    launching = args.nproc_per_node is not None and not distributed.in_launched_process()
    launch = _launch_spec(args, spec) if launching else None
    torch_device = accel.resolve(spec, ctx.local_rank if ctx.active else None)
    if launch is not None:
        check_gpus_per_process(launch, torch_device)
    user = _user_model(args)
    model = user.name if user is not None else _builtin_model(args)
    if args.evaluate:
        if launch is not None:
            raise EdgesynthError("--evaluate runs in one process; drop --nproc-per-node.")
        return _evaluate_only(args, model, user, device, torch_device, log)
    cfg = _config(args, model, user, device, torch_device, ctx)
    if ctx.is_main:
        _check_before_writing(args, cfg)
    if launch is not None:
        total = launch.nproc_per_node * launch.nnodes
        log(
            f"Data-parallel training: {total} processes ({launch.nproc_per_node} on this node), "
            f"backend {'NCCL' if torch_device.type == 'cuda' else 'Gloo'}"
        )
        distributed.launch(launch, [train_args_to_json(args)], args.threads)
        return None
    return _train_processes(args, cfg, log)


def _config(
    args: TrainArgs,
    model: str,
    user: UserModel | None,
    device: str,
    torch_device: torch.device,
    ctx: distributed.Context,
) -> TrainConfig:
    """The run's settings, every file they name read and checked."""
    policy = resolve_policy(args)
    schedule = make_schedule(
        args.lr_schedule,
        milestones=args.milestones,
        gamma=args.gamma,
        step_size=args.step_size,
        warmup=args.warmup_epochs,
    )
    teacher = _teacher(args)
    dataset = _training_data(args)
    loss = _loss_for(args, dataset)
    if is_regression(loss) and args.pr_curves:
        raise EdgesynthError(
            "precision-recall curves are of classes; this dataset's targets are vectors.",
            key="--pr-curves",
        )
    if is_regression(loss) and teacher is not None:
        raise EdgesynthError(
            "distillation (--teacher) trains classifiers; a regression dataset learns its "
            "target vectors (a teacher's embeddings can be those targets).",
            key="--teacher",
        )
    if args.workers < 0:
        raise EdgesynthError(f"must be 0 or more, got {args.workers}.", key="--workers")
    if args.optimizer not in ("adam", "sgd"):
        raise EdgesynthError(f"unknown optimizer `{args.optimizer}`; choose adam or sgd.")
    seed = args.seed if args.seed is not None else (1 if args.deterministic else None)
    return TrainConfig(
        model=model,
        dataset=dataset,
        device=device,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        weight_decay=args.weight_decay,
        qat_policy=policy,
        seed=seed,
        deterministic=args.deterministic,
        augment=args.augment,
        avg_pool_rounding=args.avg_pool_rounding,
        bias=args.use_bias,
        progress=args.progress,
        tensorboard=args.tensorboard,
        resume=args.resume,
        torch_device=torch_device,
        amp=args.amp,
        compile=accel.compile_default(torch_device, args.compile),
        compile_qat=accel.compile_qat(args.compile),
        workers=args.workers,
        pin_memory=torch_device.type == "cuda" if args.pin_memory is None else args.pin_memory,
        dist=ctx,
        user_model=user,
        schedule=schedule,
        teacher=teacher,
        extras=_user_extras(args),
        loss=loss,
        param_hist=args.param_hist,
        pr_curves=args.pr_curves,
    )


def _check_before_writing(args: TrainArgs, cfg: TrainConfig) -> None:
    """Refuse what the device cannot run, before any file is written or process started."""
    probe = build_model(cfg)
    check_model_takes_data(probe, cfg)
    if cfg.qat_policy is not None:
        from edgesynth import nn as enn

        with enn.use(cfg.device):
            check_policy_fits(probe, cfg.qat_policy, args.qat_policy or "QAT policy")
    if args.resume is not None:
        from edgesynth.train.loop import resume_state

        resume_state(cfg, probe)
    if cfg.teacher is not None:
        from edgesynth.train.distill import load_teacher

        ds = cfg.dataset
        shape, classes = ds.input_shape, ds.num_classes
        load_teacher(cfg.teacher, num_classes=classes, input_shape=shape, device=cfg.device)
    inputs = [args.data, args.resume, args.qat_policy if args.qat_policy != "None" else None]
    inputs += [_file_of(args.model_file), _file_of(args.dataset_file), args.teacher]
    if args.yaml_template is not None:
        check_output_file(
            args.yaml_template, overwrite=args.overwrite, inputs=inputs, option="--yaml-template"
        )


def _train_processes(args: TrainArgs, cfg: TrainConfig, log: Log) -> Path | None:
    """This process's part of the run (all of it without data parallelism)."""
    ctx = cfg.dist
    distributed.start(ctx, cfg.torch_device)
    try:
        run_dir: Path | None = None
        if not ctx.is_main:
            _train_in(args, cfg, cfg.qat_policy, None, lambda line: None)
        else:
            with run_folder(args.out_dir, args.name) as run_dir:
                _train_in(args, cfg, cfg.qat_policy, run_dir, log)
        # all processes leave together: none tears its connections down while rank 0 still
        # quantizes and checks, which Gloo does not always survive
        distributed.barrier(ctx)
        return run_dir
    except RuntimeError as err:
        if not (ctx.active and distributed.lost_contact(err)):
            raise
        detail = str(err).split("] ", 1)[-1].split(". ")[0]
        raise EdgesynthError(
            f"rank {ctx.rank} lost contact with another process of the run ({detail}); "
            "it stops too."
        ) from None
    finally:
        distributed.stop(ctx)


def _launch_spec(args: TrainArgs, spec: str) -> distributed.Launch:
    launch = distributed.Launch(
        nproc_per_node=int(args.nproc_per_node or 1),
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
    )
    launch.check()
    if ":" in spec and launch.nproc_per_node > 1:
        raise EdgesynthError(
            f"{spec} puts every process on one GPU; with --nproc-per-node each process "
            "takes the GPU of its local rank: use --device cuda.",
            key="--device",
        )
    return launch


def check_gpus_per_process(launch: distributed.Launch, torch_device: torch.device) -> None:
    """On CUDA each process of this node takes the GPU of its local rank: refused before any
    process starts where the node has fewer GPUs than processes."""
    if torch_device.type != "cuda":
        return
    count = torch.cuda.device_count()
    if launch.nproc_per_node > count:
        raise EdgesynthError(
            f"{launch.nproc_per_node} processes on CUDA need {launch.nproc_per_node} GPUs (one "
            f"per process) and this machine has {count}: ask for at most {count}, or "
            "--device cpu for processes on the CPU.",
            key="--nproc-per-node",
        )


def check_model_takes_data(model: torch.nn.Module, cfg: TrainConfig) -> None:
    """One training image through the model before any file is written: an architecture
    built for other images (e.g. CIFAR's 3x32x32 on MNIST) is named, not a torch traceback."""
    from edgesynth import nn as enn

    x = cfg.dataset.train.x[:1]
    if cfg.user_model is not None:
        with enn.use(cfg.device):
            model.eval()
            probe(model, cfg.user_model, x, f"{cfg.dataset.name}'s data")
            model.train()
        return
    try:
        with torch.no_grad(), enn.use(cfg.device):
            model.eval()
            model(x)
    except (RuntimeError, ValueError) as err:
        shape = "x".join(str(d) for d in cfg.dataset.input_shape)
        detail = str(err).splitlines()[0]
        raise EdgesynthError(
            f"model `{cfg.model}` cannot take {cfg.dataset.name}'s {shape} images ({detail}); "
            "choose a model built for this data with --model."
        ) from None
    finally:
        model.train()


def _train_in(
    args: TrainArgs, cfg: TrainConfig, policy: QatPolicy | None, run_dir: Path | None, log: Log
) -> None:
    """Train; then, on rank 0 (the only process with a `run_dir`), quantize and check."""
    model, dataset, device = cfg.model, cfg.dataset, cfg.device
    log(
        f"Training {model} on {dataset.name} ({len(dataset.train)} train / "
        f"{len(dataset.test)} test) for {device}; run folder {run_dir}"
    )
    extras = [f"compile {'on' if cfg.compile else 'off'}", f"amp {'on' if cfg.amp else 'off'}"]
    if cfg.dist.active:
        extras.append(f"{cfg.dist.world_size} processes")
    log(f"PyTorch device: {accel.describe(cfg.torch_device)} ({', '.join(extras)})")
    if policy is not None:
        log(f"QAT policy: {policy.to_dict()}")
    if cfg.schedule != Schedule():
        log(f"Learning-rate schedule: {cfg.schedule.describe()}")
    if cfg.teacher is not None:
        log(f"Distillation: {cfg.teacher.describe()}")
    result = run(cfg, run_dir, log)
    if run_dir is None:
        return
    last = result.history[-1].test if result.history else None
    if last is not None and last.regression is None:
        log("Confusion matrix (rows: true class, columns: predicted):")
        log(format_confusion(last.confusion, dataset.classes))
    if args.save_sample is not None:
        sample = deploy.save_sample(
            dataset.test, args.save_sample, run_dir, dataset.name, channels=_channels(args)
        )
        log(f"Sample: {sample}")
    template = yaml_template(
        result.model,
        arch=model,
        dataset=dataset.name,
        input_channels=dataset.input_shape[0],
        device=device,
    )
    yaml_path = write_yaml_template(
        args.yaml_template or run_dir / f"{model}.yaml", template, overwrite=args.overwrite
    )
    log(f"Network description: {yaml_path}")
    best_qat = result.checkpoints.get("qat_best")
    if best_qat is not None:
        _finish_qat(args, cfg, best_qat, yaml_path, log)


def _finish_qat(args: TrainArgs, cfg: TrainConfig, best: Path, yaml_path: Path, log: Log) -> None:
    quantized = best.with_name("qat_best-q.pth.tar")
    quantize_file(best, quantized, QuantizeOptions())
    log(f"Quantized checkpoint: {quantized}")
    net = deploy.load_model(quantized, cfg.model, cfg.dataset, cfg.device, user=cfg.user_model)
    m = deploy.eight_bit_metrics(net, cfg.dataset, cfg.device, cfg.avg_pool_rounding, loss=cfg.loss)
    if m.regression is not None:
        log(f"8-bit (quantized) test {m.describe()} loss {m.loss:.4f}")
    else:
        log(f"8-bit (quantized) test top1 {m.top1:.2f}%")
    if args.simulate:
        check = deploy.simulator_check(
            yaml_path,
            quantized,
            cfg.dataset,
            cfg.device,
            m.predictions,
            args.simulate,
            net,
            avg_pool_rounding=cfg.avg_pool_rounding,
        )
        if m.regression is not None:
            log(
                f"Simulator on {check.count} test items: identical outputs to the 8-bit "
                f"model {check.exact:.2f}%"
            )
            return
        log(
            f"Simulator on {check.count} test images: top1 {check.sim_top1:.2f}%, "
            f"same class as the 8-bit model {check.agree:.2f}%, identical outputs "
            f"{check.exact:.2f}%"
        )


def _evaluate_only(
    args: TrainArgs,
    model: str,
    user: UserModel | None,
    device: str,
    torch_device: torch.device,
    log: Log,
) -> None:
    if args.checkpoint is None:
        raise EdgesynthError("--evaluate needs --checkpoint CK.pth.tar.")
    dataset = _load_data(args)
    net = deploy.load_model(args.checkpoint, model, dataset, device, user=user)
    m = evaluate(
        net.to(torch_device),
        dataset.test,
        num_classes=dataset.num_classes,
        device=device,
        eight_bit=args.eight_bit,
        avg_pool_rounding=args.avg_pool_rounding,
        loss=_loss_for(args, dataset),
    )
    mode = "8-bit" if args.eight_bit else "float"
    log(
        f"{model} on {dataset.name} test ({len(dataset.test)} items, {mode}): "
        f"{m.describe()} loss {m.loss:.4f}"
    )
    if m.regression is None:
        log(format_confusion(m.confusion, dataset.classes))
    if args.save_sample is not None:
        log(
            "Sample: "
            + str(
                deploy.save_sample(
                    dataset.test,
                    args.save_sample,
                    Path("."),
                    dataset.name,
                    args.overwrite,
                    channels=_channels(args),
                )
            )
        )
    if args.yaml_template is not None:
        text = yaml_template(
            net,
            arch=model,
            dataset=dataset.name,
            input_channels=dataset.input_shape[0],
            device=device,
        )
        written = write_yaml_template(args.yaml_template, text, overwrite=args.overwrite)
        log(f"Network description: {written}")
    return None


# --- the user's files, schedules, distillation ----------------------------------------------


def _file_of(ref: str | None) -> str | None:
    """The file of `FILE.py:NAME` (an input of the run: never an output)."""
    return ref.rpartition(":")[0] or None if ref else None


def _user_model(args: TrainArgs) -> UserModel | None:
    if args.model_file is not None and args.model is not None:
        raise EdgesynthError("give --model or --model-file, not both.", key="--model-file")
    return user_model(args.model_file, args.model_args)


def _builtin_model(args: TrainArgs) -> str:
    if args.model is not None:
        return get_model_info(args.model).name
    if args.dataset_file is not None:
        raise EdgesynthError(
            "a --dataset-file has no default model; name one with --model or --model-file.",
            key="--dataset-file",
        )
    return get_model_info(get_dataset_info(args.dataset or "digits").default_model).name


def _load_data(args: TrainArgs) -> Dataset:
    if args.dataset_file is not None:
        if args.dataset is not None:
            raise EdgesynthError("give --dataset or --dataset-file, not both.", key="--dataset")
        from edgesynth.train.userdata import load_user_dataset

        return load_user_dataset(args.dataset_file, args.data)
    return load_dataset(args.dataset or "digits", args.data, allow_download=args.download)


def _channels(args: TrainArgs) -> int | None:
    """--slice-sample: the sample keeps the first 3 channels (the vendor's RGB slice)."""
    return 3 if args.slice_sample else None


def _loss_for(args: TrainArgs, dataset: Dataset) -> str:
    """--loss, or the dataset's default (cross-entropy for labels, mse for vectors)."""
    loss = choose_loss(args.loss, args.regression, dataset.regression)
    if is_regression(loss) and dataset.class_weights is not None:
        raise EdgesynthError(
            "class weights weigh class labels; this dataset's targets are vectors.",
            key="--class-weights",
        )
    return loss


def _training_data(args: TrainArgs) -> Dataset:
    """The dataset, cut to --train-limit, with --class-weights."""
    dataset = _load_data(args)
    if args.train_limit is not None:
        if args.train_limit < 1:
            raise EdgesynthError(f"--train-limit must be at least 1, got {args.train_limit}.")
        dataset.train = Split(
            dataset.train.x[: args.train_limit], dataset.train.y[: args.train_limit]
        )
    if args.class_weights is not None:
        dataset.class_weights = parse_class_weights(args.class_weights, dataset)
    return dataset


def parse_class_weights(text: str, dataset: Dataset) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != dataset.num_classes or any(not (v >= 0) for v in values):
        raise EdgesynthError(
            f"expected {dataset.num_classes} weights of 0 or more separated by commas (one per "
            f"class of {dataset.name}: {', '.join(dataset.classes)}), got `{text}`.",
            key="--class-weights",
        )
    return values


def _teacher(args: TrainArgs) -> TeacherSpec | None:
    given = [args.teacher_model, args.teacher_model_file, args.teacher_model_args]
    if args.teacher is None:
        if any(v is not None for v in given):
            raise EdgesynthError("the teacher's model needs --teacher CHECKPOINT.", key="--teacher")
        return None
    if args.teacher_model is not None and args.teacher_model_file is not None:
        raise EdgesynthError(
            "give --teacher-model or --teacher-model-file, not both.", key="--teacher-model"
        )
    spec = TeacherSpec(
        checkpoint=args.teacher,
        model=get_model_info(args.teacher_model).name if args.teacher_model else None,
        user=user_model(args.teacher_model_file, args.teacher_model_args),
        temperature=args.kd_temperature,
        distill_weight=args.kd_distill_weight,
        student_weight=args.kd_student_weight,
        t2_scale=args.kd_t2,
    )
    check_spec(spec)
    return spec


def _user_extras(args: TrainArgs) -> dict[str, object]:
    """What a checkpoint records of the user's files (so a reader knows what built it)."""
    extras: dict[str, object] = {}
    if args.model_file is not None:
        extras["model_file"] = args.model_file
        extras["model_args"] = user_model(args.model_file, args.model_args).args  # type: ignore[union-attr]
    if args.dataset_file is not None:
        extras["dataset_file"] = args.dataset_file
    return extras
