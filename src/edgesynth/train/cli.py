"""Training-side commands: `train`, `quantize`, `fuse-bn`, `evaluate`, `export`.

`register(subparsers)` adds them to the `edgesynth` command line. Only argparse at import
time: the handlers import PyTorch when they run. Every user error raises EdgesynthError,
which the entry point prints as one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edgesynth.cliargs import (
    add_overwrite,
    non_negative_int,
    positive_float,
    positive_int,
)
from edgesynth.errors import EdgesynthError, warn
from edgesynth.targets.max7800x.device import device_name
from edgesynth.train import defaults
from edgesynth.wording import plural


def _add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", type=device_name, default=defaults.DEVICE, help="MAX78000 or MAX78002"
    )


def _flag(parser: argparse.ArgumentParser, name: str, default: bool | None, help: str) -> None:
    parser.add_argument(name, action=argparse.BooleanOptionalAction, default=default, help=help)


def _add_model_file(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """`--model-file FILE.py:CLASS` and `--model-args` (with `prefix`: the teacher's)."""
    parser.add_argument(
        f"--{prefix}model-file",
        metavar="FILE.py:CLASS",
        help="your own network: an edgesynth.nn network class in a Python file",
    )
    parser.add_argument(
        f"--{prefix}model-args",
        metavar="JSON|YAML",
        help=f"keyword arguments for --{prefix}model-file's class: a JSON object "
        "(e.g. '{\"width\": 32}') or a YAML file",
    )


# --- evaluate ------------------------------------------------------------------------------


def evaluate(args: argparse.Namespace) -> int:
    """Run one sample through the training-side model, as the synthesizer's known-answer test."""
    from edgesynth.frontends.npy import load_sample
    from edgesynth.outputs import check_output_file, save_npy_atomic
    from edgesynth.train.evaluate import run_sample

    inputs = [args.checkpoint, args.sample_input, args.network]
    if args.output is not None:
        check_output_file(args.output, overwrite=args.overwrite, inputs=inputs, option="--output")
    sample = load_sample(args.sample_input)
    net, name, dims = _evaluate_model(args, sample)
    out = run_sample(
        net,
        sample,
        dims=dims,
        eight_bit=args.eight_bit,
        device=args.device,
        avg_pool_rounding=args.avg_pool_rounding,
    )
    flat = out.reshape(out.shape[0], -1)
    mode = "8-bit" if args.eight_bit else "float"
    print(f"{name} on {args.device} ({mode}): output {'x'.join(map(str, out.shape))}")
    if flat.shape[1] == 1:
        values = flat[:, 0].tolist()
        shown = str(values) if len(values) <= 32 else f"{str(values[:16])[:-1]}, ...]"
        print(f"  values: {shown}  (class {int(flat[:, 0].argmax())})")
    if args.output is not None:
        written = save_npy_atomic(
            args.output, out, overwrite=args.overwrite, inputs=inputs, option="--output"
        )
        print(f"  written: {written}")
    return 0


def _evaluate_model(args: argparse.Namespace, sample: Any) -> tuple[Any, str, int]:
    """The model `evaluate` runs: from --network, --model-file or the checkpoint's `arch`;
    its name and data dimensions (1 or 2)."""
    from edgesynth.quant.checkpoint import read_checkpoint
    from edgesynth.train.evaluate import model_for_checkpoint, model_for_user
    from edgesynth.train.models import get_model_info
    from edgesynth.train.usermodel import user_model
    from edgesynth.train.vendor_model import model_for_network

    if args.network is not None:
        net = model_for_network(args.network, args.checkpoint, args.sample_input, args.device)
        return net, str(args.network), sample.ndim - 1
    if args.model_file is not None:
        if args.model is not None:
            raise EdgesynthError("give --model or --model-file, not both.", key="--model-file")
        user = user_model(args.model_file, args.model_args)
        assert user is not None
        ck = read_checkpoint(args.checkpoint)
        shape = tuple(sample.shape)
        net = model_for_user(user, ck, shape, args.device, source=str(args.checkpoint))
        return net, user.name, 2 if sample.ndim == 3 and sample.shape[2] != 1 else 1
    net, name = model_for_checkpoint(
        read_checkpoint(args.checkpoint),
        sample_shape=tuple(sample.shape),
        device=args.device,
        model=args.model,
        source=str(args.checkpoint),
        sample_source=str(args.sample_input),
    )
    return net, name, get_model_info(name).dims


def _register_evaluate(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evaluate",
        help="one sample through the training-side model (float or the chip's integers)",
        description="Run one sample through the training-side model, as the synthesizer's "
        "known-answer test. The output is C x H x W like the corpus' expected_output.npy: "
        "int64 with --8-bit, float64 (training scale) without.",
    )
    p.add_argument("--checkpoint", type=Path, required=True, help="checkpoint (.pth.tar)")
    p.add_argument(
        "--sample-input",
        type=Path,
        required=True,
        metavar="NPY",
        help="sample .npy (C x H x W or C x L, int8 values)",
    )
    p.add_argument("--output", type=Path, metavar="NPY", help="write the network output (.npy)")
    add_overwrite(p, "the --output file")
    _add_device(p)
    p.add_argument(
        "--8-bit", "-8", dest="eight_bit", action="store_true", help="compute the chip's integers"
    )
    p.add_argument("--model", help="architecture (default: the checkpoint's `arch`)")
    _add_model_file(p)
    _flag(p, "--avg-pool-rounding", False, "round average pooling")
    p.add_argument(
        "--network",
        type=Path,
        metavar="YAML",
        help="build the model from this YAML description instead of `arch`",
    )
    p.set_defaults(handler=evaluate)


# --- train ---------------------------------------------------------------------------------


def train(args: argparse.Namespace) -> int:
    """Train a model with hardware-faithful layers; QAT, quantization and checks follow."""
    from edgesynth.train.command import TrainArgs, train_main

    fields = {k: v for k, v in vars(args).items() if k not in ("handler", "command", "target")}
    fields["evaluate"] = fields.pop("evaluate_only")
    if args.target == "gap8":
        from edgesynth.train.gap8 import train_gap8

        train_gap8(TrainArgs(**fields), log=lambda line: print(line, flush=True))
        return 0
    train_main(TrainArgs(**fields), log=lambda line: print(line, flush=True))
    return 0


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train with hardware-faithful layers; QAT, quantization and checks follow",
        description="Train a model with hardware-faithful layers (quantization-aware training "
        "by default), quantize it, evaluate it in 8-bit mode and optionally check the "
        "synthesizer's simulator. Each run writes a new folder under --out-dir.",
    )
    p.add_argument("--model", help="architecture (default: the dataset's)")
    _add_model_file(p)
    p.add_argument("--dataset", help="dataset (listed below; default digits)")
    p.add_argument(
        "--dataset-file",
        metavar="FILE.py:FUNCTION",
        help="your own data: a function returning (train, test[, classes[, class_weights]])",
    )
    p.add_argument("--data", type=Path, help="dataset folder (MNIST: the IDX files)")
    p.add_argument(
        "--download",
        action="store_true",
        help="fetch missing MNIST files into --data (never done without this option)",
    )
    p.add_argument(
        "--device",
        help="PyTorch device: auto (default: CUDA, then MPS, then the CPU), cpu, cuda, "
        "cuda:N, mps; or, as in the vendor's training, the MAX chip (MAX78000, MAX78002)",
    )
    p.add_argument("--chip", type=device_name, help="the MAX chip to train for (default MAX78000)")
    _add_target(p)
    p.add_argument("--epochs", type=positive_int, default=defaults.EPOCHS, help="epochs to train")
    p.add_argument(
        "--batch-size", "-b", type=positive_int, default=defaults.BATCH_SIZE, help="batch size"
    )
    p.add_argument(
        "--lr",
        type=positive_float,
        default=defaults.LEARNING_RATE,
        help="base learning rate (see --lr-schedule)",
    )
    _add_schedule(p)
    p.add_argument(
        "--optimizer", choices=("adam", "sgd"), default=defaults.OPTIMIZER, help="adam or sgd"
    )
    p.add_argument("--weight-decay", type=float, default=defaults.WEIGHT_DECAY)
    p.add_argument(
        "--qat-policy",
        help="QAT policy YAML, or None to disable (default: QAT for the last 40%% of epochs)",
    )
    p.add_argument("--out-dir", type=Path, default=Path("logs"), help="folder for run folders")
    p.add_argument("--name", help="run folder name (default: date-time)")
    p.add_argument("--resume", type=Path, help="continue from this checkpoint")
    _flag(p, "--deterministic", False, "seed everything, deterministic ops")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument(
        "--evaluate",
        "-e",
        dest="evaluate_only",
        action="store_true",
        help="only evaluate --checkpoint on the test set",
    )
    p.add_argument("--checkpoint", type=Path, help="checkpoint for --evaluate")
    p.add_argument(
        "--8-bit", "-8", dest="eight_bit", action="store_true", help="--evaluate in 8-bit mode"
    )
    p.add_argument(
        "--save-sample",
        type=non_negative_int,
        metavar="N",
        help="write test item N as sample_<dataset>.npy",
    )
    p.add_argument("--yaml-template", type=Path, help="write the YAML network description here")
    add_overwrite(p, "an existing --yaml-template file (and --evaluate's --save-sample file)")
    p.add_argument(
        "--simulate",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="after QAT, run N test images through the simulator",
    )
    _flag(p, "--tensorboard", False, "log to TensorBoard in the run folder")
    _flag(p, "--progress", True, "show progress bars")
    _flag(
        p,
        "--augment",
        None,
        "random changes: image shifts/rotations, audio shift and noise (default: per dataset)",
    )
    _flag(p, "--avg-pool-rounding", False, "round average pooling")
    _flag(p, "--use-bias", None, "give the model's convolutions a bias")
    p.add_argument("--threads", type=positive_int, help="CPU threads for torch")
    _flag(p, "--compile", None, "torch.compile the model (default: on for CUDA)")
    _flag(p, "--amp", False, "mixed precision in the float epochs (QAT stays exact)")
    p.add_argument(
        "--workers", type=non_negative_int, default=0, help="data-loader worker processes"
    )
    _flag(p, "--pin-memory", None, "page-locked batches (default: on for CUDA)")
    _add_data_parallel(p)
    p.add_argument(
        "--train-limit",
        type=positive_int,
        metavar="N",
        help="train on the first N items only (quick experiments)",
    )
    _add_distillation(p)
    _add_regression_and_logs(p)
    p.set_defaults(handler=train)
    _list_catalog_in_help(p)


def _add_data_parallel(p: argparse.ArgumentParser) -> None:
    dp = p.add_argument_group(
        "data-parallel training (torch.distributed; NCCL on GPUs, Gloo on CPUs)"
    )
    dp.add_argument(
        "--nproc-per-node",
        type=positive_int,
        metavar="N",
        help="train in N processes on this node (one per GPU); --batch-size is split among "
        "all processes",
    )
    dp.add_argument("--nnodes", type=positive_int, default=1, help="nodes taking part")
    dp.add_argument(
        "--node-rank", type=non_negative_int, default=0, help="this node's number (0 first)"
    )
    dp.add_argument("--master-addr", default="127.0.0.1", help="address of node 0 (several nodes)")
    dp.add_argument("--master-port", type=positive_int, help="port on node 0 (default: a free one)")


def _add_schedule(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("learning-rate schedule and loss")
    s.add_argument(
        "--lr-schedule",
        metavar="NAME|YAML",
        help="cosine (default: down to 1%% of --lr), multistep, step, onecycle, or a schedule "
        "YAML in ai8x-training's --compress form",
    )
    s.add_argument("--milestones", metavar="E1,E2,...", help="multistep: epochs where lr drops")
    s.add_argument("--gamma", type=positive_float, help="multistep/step: the factor (0.1)")
    s.add_argument("--step-size", type=positive_int, metavar="N", help="step: every N epochs")
    s.add_argument(
        "--warmup-epochs",
        type=non_negative_int,
        default=0,
        metavar="W",
        help="epochs 0..W-1 at lr*(e+1)/(W+1)",
    )
    s.add_argument("--class-weights", metavar="W0,W1,...", help="the loss's weight of each class")


def _add_regression_and_logs(p: argparse.ArgumentParser) -> None:
    from edgesynth.train.defaults import LOSSES

    r = p.add_argument_group("regression, samples and TensorBoard (the vendor's options)")
    r.add_argument(
        "--loss",
        choices=LOSSES,
        help="ce (classification; the default for class labels), or for a dataset of target "
        "vectors mse (the default), l1, smoothl1, cosine",
    )
    r.add_argument(
        "--regression",
        action="store_true",
        help="the targets are vectors (a --dataset-file returning N x D floats); like --loss mse",
    )
    r.add_argument(
        "--slice-sample",
        action="store_true",
        help="--save-sample keeps the first 3 channels (RGB models of data with more)",
    )
    r.add_argument(
        "--param-hist",
        action="store_true",
        help="with --tensorboard: histograms of every parameter tensor, every epoch",
    )
    r.add_argument(
        "--pr-curves",
        action="store_true",
        help="with --tensorboard: precision-recall curves of the test set, every epoch",
    )


def _add_distillation(p: argparse.ArgumentParser) -> None:
    kd = p.add_argument_group("knowledge distillation (the vendor's --kd-* options)")
    kd.add_argument("--teacher", type=Path, metavar="CHECKPOINT", help="the teacher's checkpoint")
    kd.add_argument("--teacher-model", help="its architecture (default: the checkpoint's arch)")
    _add_model_file(kd, "teacher-")
    kd.add_argument(
        "--kd-temperature", type=positive_float, default=1.0, help="softmax temperature (1)"
    )
    kd.add_argument(
        "--kd-distill-weight",
        type=float,
        default=0.5,
        help="weight of the student-teacher loss (0.5)",
    )
    kd.add_argument(
        "--kd-student-weight",
        type=float,
        default=0.5,
        help="weight of the student-labels loss (0.5)",
    )
    kd.add_argument(
        "--kd-t2",
        action="store_true",
        help="multiply the distillation term by T^2 (Hinton et al.; the vendor's loss has no "
        "such factor, so it is off by default)",
    )


def _list_catalog_in_help(parser: argparse.ArgumentParser) -> None:
    """`edgesynth train --help` ends with the datasets and models (`train.catalog`: plain data,
    no PyTorch)."""
    plain = parser.format_help

    def with_catalog() -> str:
        from edgesynth.train.catalog import DATASETS, MODELS

        width = max(len(n) for n in [*DATASETS, *MODELS]) + 2
        lines = ["", "datasets (--dataset; default model in brackets):"]
        lines += [f"  {n:<{width}}{text} [{model}]" for n, (text, model) in DATASETS.items()]
        lines += ["", "models (--model):"]
        lines += [f"  {n:<{width}}{text}" for n, text in MODELS.items()]
        return plain() + "\n".join(lines) + "\n"

    parser.format_help = with_catalog  # type: ignore[method-assign]


# --- quantize, fuse-bn ---------------------------------------------------------------------


def quantize(args: argparse.Namespace) -> int:
    """Quantize a checkpoint for the chip (QAT as trained, or post-training clipping)."""
    from edgesynth.outputs import check_output_file
    from edgesynth.quant.files import quantize_file
    from edgesynth.quant.ptq import DEFAULT_SCALE, DEFAULT_STDDEV, QuantizeOptions
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.targets.max7800x.yaml_model import yaml_layer_bits

    check_output_file(
        args.output,
        overwrite=args.overwrite,
        inputs=[args.input, args.config_file],
        option="OUTPUT",
    )
    dev = get_device(args.device)
    if args.weight_bits is not None and args.weight_bits not in dev.weight_bits:
        raise EdgesynthError(
            f"{args.weight_bits}-bit weights are not supported on the {dev.name}; choose "
            f"{', '.join(map(str, dev.weight_bits[:-1]))} or {dev.weight_bits[-1]}.",
            key="--weight-bits",
        )
    method = args.clip_method.upper() if args.clip_method else None
    opts = QuantizeOptions(
        clip_method=method,
        scale=DEFAULT_SCALE if args.scale is None else args.scale,
        stddev=DEFAULT_STDDEV if args.stddev is None else args.stddev,
        weight_bits=args.weight_bits,
        layer_bits=yaml_layer_bits(args.config_file) if args.config_file else None,
        allowed_bits=dev.weight_bits,
        binary_weights=dev.supports_binary_weights,
    )
    if args.scale is not None and method != "SCALE":
        print("note: --scale only applies to --clip-method SCALE")
    reports = quantize_file(
        args.input, args.output, opts, inputs=[args.config_file], overwrite=args.overwrite
    )
    from edgesynth.nn.qat import bits_label

    for r in reports:
        clipped = f", {r.clipped}/{r.total} weights clipped" if r.clipped else ""
        print(
            f"  {r.name}: {r.method}, {bits_label(r.weight_bits)}, "
            f"output_shift {r.output_shift}{clipped}"
        )
    print(f"Quantized {plural(len(reports), 'layer')} for {dev.name}: {args.output}")
    return 0


def fuse_bn(args: argparse.Namespace) -> int:
    """Fold batchnorm into the preceding convolutions of a (non-QAT) checkpoint."""
    from edgesynth.outputs import check_output_file
    from edgesynth.quant.files import fuse_file

    check_output_file(args.output, overwrite=args.overwrite, inputs=[args.input], option="OUTPUT")
    count = fuse_file(args.input, args.output, args.out_arch, overwrite=args.overwrite)
    print(f"Folded {count} batchnorm layers: {args.output}")
    return 0


def _register_quantize(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "quantize",
        help="quantize a checkpoint for the chip",
        description="Quantize a checkpoint for the chip (QAT layers as trained, float layers "
        "by post-training clipping). The output is a new checkpoint in the vendor's layout.",
    )
    p.add_argument("input", type=Path, metavar="INPUT", help="trained checkpoint (.pth.tar)")
    p.add_argument("output", type=Path, metavar="OUTPUT", help="quantized checkpoint to write")
    add_overwrite(p, "OUTPUT")
    _add_device(p)
    p.add_argument(
        "--clip-method",
        type=str.upper,
        choices=("SCALE", "MAX", "AVGMAX", "AVG", "STDDEV"),
        help="default: QAT layers as trained, float layers SCALE",
    )
    p.add_argument("--scale", type=positive_float, help="factor for SCALE (default 0.85)")
    p.add_argument("--stddev", type=positive_float, help="deviations for STDDEV (default 2)")
    p.add_argument(
        "--weight-bits", type=int, help="weight bits for layers that do not say (default 8)"
    )
    p.add_argument("--config-file", "-c", type=Path, help="network YAML whose `quantization` wins")
    p.set_defaults(handler=quantize)

    f = subparsers.add_parser(
        "fuse-bn",
        help="fold batchnorm into the preceding convolutions",
        description="Fold batchnorm into the preceding convolutions of a (non-QAT) checkpoint.",
    )
    f.add_argument("input", type=Path, metavar="INPUT", help="checkpoint with batchnorm layers")
    f.add_argument("output", type=Path, metavar="OUTPUT", help="checkpoint to write")
    f.add_argument("--out-arch", help="arch name to record (default: the same)")
    add_overwrite(f, "OUTPUT")
    f.set_defaults(handler=fuse_bn)


# --- export --------------------------------------------------------------------------------


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        choices=TARGETS,
        default=TARGETS[0],
        help="max7800x (default: the MAX chip's layers, edgesynth.nn) or gap8 (a network of "
        "edgesynth.quant.qat_gap8 layers; its integer network is RequantShift ONNX)",
    )


TARGETS = ("max7800x", "gap8")


def export(args: argparse.Namespace) -> int:
    """A trained checkpoint as an ONNX model (float, or the chip's 8-bit arithmetic)."""
    from edgesynth.train.export import ExportRequest, export_checkpoint

    if args.target == "gap8":
        return _export_gap8(args)
    report = export_checkpoint(
        ExportRequest(
            checkpoint=args.checkpoint,
            output=args.output,
            model=args.model,
            model_file=args.model_file,
            model_args=args.model_args,
            eight_bit=args.eight_bit,
            device=args.device,
            input_shape=args.input_shape,
            overwrite=args.overwrite,
        )
    )
    mode = "8-bit (the chip's integers)" if args.eight_bit else "float"
    print(
        f"{report.arch} ({mode}, input {'x'.join(map(str, report.input_shape))}, "
        f"{report.num_classes} outputs): {report.path}"
    )
    print(f"  ONNX Runtime against PyTorch on random inputs: largest difference {report.diff:.3g}")
    if report.inexact:
        warn(
            f"layer(s) {', '.join(report.inexact)} can sum past 2^24, where the graph's float32 "
            "arithmetic rounds; their 8-bit outputs may then differ from the chip's."
        )
    return 0


def _register_export(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="a trained checkpoint as an ONNX model",
        description="Write a trained checkpoint as an ONNX model with a dynamic batch axis. "
        "Float: the network PyTorch trains (a QAT checkpoint's float weights; input in [-1, 1)). "
        "--8-bit: the chip's integer arithmetic from a quantized (-q) checkpoint (input: the "
        "chip's integers -128..127 as floats). ONNX Runtime runs it and is compared with PyTorch.",
    )
    p.add_argument("checkpoint", type=Path, metavar="CHECKPOINT", help="trained checkpoint")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="ONNX", help="file to write")
    add_overwrite(p, "the output file")
    p.add_argument("--model", help="architecture (default: the checkpoint's `arch`)")
    _add_model_file(p)
    _add_device(p)
    _add_target(p)
    p.add_argument(
        "--8-bit", "-8", dest="eight_bit", action="store_true", help="the chip's integers"
    )
    p.add_argument(
        "--input-shape",
        metavar="C,H,W",
        type=_input_shape,
        help="one input's shape (default: the checkpoint's, as `edgesynth train` records it)",
    )
    p.set_defaults(handler=export)


def _export_gap8(args: argparse.Namespace) -> int:
    """A gap8 QAT checkpoint's integer network as RequantShift ONNX, checked against the
    training side's 8-bit mode."""
    from edgesynth.train.gap8 import check_export, export_gap8

    if args.eight_bit or args.model or args.input_shape:
        raise EdgesynthError(
            "--8-bit, --model and --input-shape are not used with --target gap8 (the integer "
            "network is what it writes; the checkpoint records the rest)",
            key="--target",
        )
    path, net, shape = export_gap8(
        args.checkpoint, args.output, args.model_file, args.model_args, args.overwrite
    )
    same, count = check_export(path, net, shape)
    print(f"{type(net.body).__name__} (gap8 integer network, RequantShift ONNX, input "
          f"{'x'.join(map(str, shape))}): {path}")  # fmt: skip
    verdict = "identical" if same else "DIFFERENT"
    print(f"  edgesynth's integer front end against the 8-bit mode on {count} random inputs: "
          f"{verdict}")  # fmt: skip
    return 0 if same else 1


def _input_shape(text: str) -> tuple[int, ...]:
    """`C,H,W` or `C,L` of positive integers (a usage error otherwise)."""
    parts = text.split(",")
    if len(parts) not in (2, 3) or not all(v.strip().isdigit() and int(v) > 0 for v in parts):
        raise argparse.ArgumentTypeError(f"expected C,H,W or C,L (e.g. 1,28,28), got `{text}`")
    return tuple(int(v) for v in parts)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `train`, `quantize`, `fuse-bn`, `evaluate` and `export` to the command line."""
    _register_train(subparsers)
    _register_quantize(subparsers)
    _register_evaluate(subparsers)
    _register_export(subparsers)
