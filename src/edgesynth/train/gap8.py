"""`edgesynth train --target gap8`: quantization-aware training for the PULP/GAP8 target.

The user's network (`--model-file FILE.py:CLASS`, written with `edgesynth.quant.qat_gap8`
layers) trains in float, then (from the QAT policy's `start_epoch`; default the last 40% of
the epochs) with fake quantization: clips calibrated on the first training batches, then
learned. At the end the network is translated to the RequantShift integer network and evaluated
in 8-bit mode; the run folder gets the checkpoint (`qat_gap8.pth.tar`) and the integer ONNX
(`network.onnx`, what `edgesynth export --target gap8` writes and `compile -t gap8` reads).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from edgesynth.errors import EdgesynthError
from edgesynth.quant.qat_network import Network, integer_mode
from edgesynth.train.datasets import Dataset, Split

Log = Callable[[str], None]
CHECKPOINT = "qat_gap8.pth.tar"
ONNX = "network.onnx"
CALIBRATION_BATCHES = 8
# TrainArgs fields the gap8 flow reads; any other one given (not its default) is refused
USED = (
    "model_file", "model_args", "dataset", "dataset_file", "data", "download", "device",
    "epochs", "batch_size", "lr", "qat_policy", "out_dir", "name", "seed", "threads",
    "train_limit", "progress", "class_weights",
)  # fmt: skip


def check_args(args: Any) -> None:
    """Options of the MAX7800x flow that gap8 training does not take: one message."""
    unused = [
        f.name for f in fields(args) if f.name not in USED and getattr(args, f.name) != _default(f)
    ]
    if unused:
        names = ["--" + n.replace("_", "-") for n in unused]
        more = f" (nor {', '.join(names[1:])})" if len(names) > 1 else ""
        raise EdgesynthError(f"not used with --target gap8{more}", key=names[0])
    if args.model_file is None:
        raise EdgesynthError(
            "--target gap8 trains your network: give --model-file FILE.py:CLASS (a network of "
            "edgesynth.quant.qat_gap8 layers)",
            key="--model-file",
        )


def _default(f: Any) -> Any:
    from dataclasses import MISSING

    return f.default if f.default is not MISSING else f.default_factory()


def build(
    model_file: str, model_args: Any, shape: tuple[int, ...], classes: int, bits: int
) -> Network:
    """The user's class built for inputs of `shape` and `classes` outputs, in a `Network` with
    `bits`-wide weights."""
    from edgesynth.quant.requant_shift import WEIGHT_BITS
    from edgesynth.train.userfile import describe_user_failure
    from edgesynth.train.usermodel import constructor_args, model_class, user_model

    if bits not in WEIGHT_BITS:
        raise EdgesynthError(
            f"weight_bits {bits}: gap8 takes {', '.join(map(str, WEIGHT_BITS))}",
            key="--qat-policy",
        )
    user = user_model(model_file, model_args)
    assert user is not None
    cls = model_class(user.ref)
    given = {"num_classes": classes, "num_channels": shape[0], "dimensions": tuple(shape[1:])}
    kwargs = constructor_args(cls, user.ref, given, user.args)
    try:
        body = cls(**kwargs)
    except EdgesynthError:
        raise
    except Exception as err:
        raise describe_user_failure(err, user.ref.path, f"{cls.__name__}(...)") from None
    return Network(body, weight_bits=bits)


def batches(split: Split, size: int, gen: torch.Generator | None) -> list[tuple[Any, Any]]:
    order = (
        torch.randperm(len(split), generator=gen) if gen is not None else torch.arange(len(split))
    )
    return [
        (split.x[order[i : i + size]], split.y[order[i : i + size]])
        for i in range(0, len(split), size)
    ]


@torch.no_grad()
def top1(net: nn.Module, split: Split, device: torch.device, size: int = 500) -> float:
    net.eval()
    right = 0
    for x, y in batches(split, size, None):
        right += int((net(x.to(device)).argmax(1).cpu() == y).sum())
    return right / max(len(split), 1)


def train_epoch(
    net: nn.Module, data: list[tuple[Any, Any]], opt: torch.optim.Optimizer,
    device: torch.device, weights: torch.Tensor | None,
) -> float:  # fmt: skip
    net.train()
    total = 0.0
    for x, y in data:
        loss = F.cross_entropy(net(x.to(device)), y.to(device), weight=weights)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += float(loss.detach()) * len(y)
    return total / sum(len(y) for _, y in data)


def checkpoint_bytes(net: Network, args: Any, dataset: Dataset, extras: dict) -> bytes:
    state = {
        "arch": type(net.body).__name__,
        "target": "gap8",
        "model_file": args.model_file,
        "model_args": args.model_args,
        "state_dict": net.state_dict(),
        "extras": {"input_shape": list(dataset.input_shape),
                   "num_classes": dataset.num_classes,
                   "weight_bits": net.options.weight_bits, **extras},
    }  # fmt: skip
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def train_gap8(args: Any, log: Log = print) -> Path:
    """Train, translate, evaluate; the run folder."""
    from edgesynth.outputs import write_file_atomic
    from edgesynth.train import accel
    from edgesynth.train.command import _training_data, resolve_policy
    from edgesynth.train.rundir import run_folder

    check_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    start, bits = qat_settings(resolve_policy(args), args.epochs)
    dataset = _training_data(args)
    if args.seed is not None:
        torch.manual_seed(args.seed)
    net = build(args.model_file, args.model_args, dataset.input_shape, dataset.num_classes, bits)
    device = accel.resolve(args.device or "auto")
    net.to(device)
    with run_folder(args.out_dir, args.name) as run_dir:
        sizes = f"{len(dataset.train)} training, {len(dataset.test)} test items"
        log(f"gap8 QAT: {type(net.body).__name__} on {dataset.name} ({sizes}), "
            f"{accel.describe(device)}")  # fmt: skip
        result = _loop(net, args, dataset, device, start, log)
        shape = dataset.input_shape
        quantized = integer_mode(net, shape, type(net.body).__name__)
        result["integer_top1"] = top1(net, dataset.test, device)
        log(f"integer network (8-bit mode): test top-1 {100 * result['integer_top1']:.2f}%")
        net.restore_mode()
        data = checkpoint_bytes(net, args, dataset, result)
        write_file_atomic(run_dir / CHECKPOINT, data)
        write_file_atomic(run_dir / ONNX, quantized.onnx)
        log(f"wrote {run_dir / CHECKPOINT} and {run_dir / ONNX} (RequantShift integer ONNX)")
    return run_dir


def qat_settings(policy: Any, epochs: int) -> tuple[int, int]:
    """The QAT policy's first QAT epoch and weight bits; what gap8 does not take is refused."""
    if policy is None or policy.start_epoch >= epochs:
        start = "never" if policy is None else f"at epoch {policy.start_epoch}"
        raise EdgesynthError(
            f"QAT starts {start}, with {epochs} epochs (0 to {epochs - 1}); the gap8 flow needs "
            "at least one QAT epoch",
            key="--qat-policy",
        )
    if policy.overrides or policy.shift_quantile != 1.0:
        raise EdgesynthError(
            "gap8 QAT takes start_epoch and one weight_bits for every layer (no overrides, no "
            "shift_quantile: MAX7800x settings)",
            key="--qat-policy",
        )
    return policy.start_epoch, policy.weight_bits


def lr_at(base: float, epoch: int, epochs: int) -> float:
    """Cosine from `base` down to 1% of it over `epochs`."""
    return base * (0.01 + 0.99 * (1 + math.cos(math.pi * epoch / epochs)) / 2)


def _loop(
    net: Network, args: Any, dataset: Dataset, device: torch.device, start: int, log: Log
) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(args.seed or 0)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    weights = None
    if dataset.class_weights is not None:
        weights = torch.tensor(dataset.class_weights, device=device)
    result: dict[str, Any] = {}
    for epoch in range(args.epochs):
        if epoch == start:
            calib = batches(dataset.train, args.batch_size, gen)[:CALIBRATION_BATCHES]
            params = {id(p) for p in net.parameters()}
            net.start_qat(x.to(device) for x, _ in calib)
            if params != {id(p) for p in net.parameters()}:  # a folded batch norm's new bias
                opt = torch.optim.Adam(net.parameters(), lr=args.lr)
            result["float_top1"] = top1(net_in_float(net), dataset.test, device)
            net.restore_mode()
            log(
                f"QAT from epoch {epoch}: {net.options.weight_bits}-bit weights per "
                f"{net.options.weights}, 8-bit activations (clips calibrated on "
                f"{sum(len(x) for x, _ in calib)} items); the float network's test top-1 "
                f"{100 * result['float_top1']:.2f}%"
            )
        for group in opt.param_groups:
            group["lr"] = lr_at(args.lr, epoch, args.epochs)
        loss = train_epoch(net, batches(dataset.train, args.batch_size, gen), opt, device, weights)
        acc = top1(net, dataset.test, device)
        log(f"epoch {epoch} ({net.mode}): loss {loss:.4f}, test top-1 {100 * acc:.2f}%")
    result["qat_top1"] = top1(net, dataset.test, device)
    return result


def net_in_float(net: Network) -> Network:
    net.set_mode("float")
    return net


def export_gap8(
    checkpoint: Path, output: Path, model_file: str | None, model_args: Any, overwrite: bool
) -> tuple[Path, Network, tuple[int, ...]]:
    """The integer ONNX of a gap8 QAT checkpoint written to `output` (staged, never over an
    existing file without `overwrite`); the network, left in 8-bit mode, and its input shape."""
    from edgesynth.outputs import check_output_file, write_file_atomic

    inputs = [checkpoint, model_file.rpartition(":")[0] if model_file else None]
    check_output_file(output, overwrite=overwrite, inputs=inputs, option="--output")
    ck = read_gap8_checkpoint(checkpoint)
    extras = ck["extras"]
    shape = tuple(int(v) for v in extras["input_shape"])
    spec = model_file or ck.get("model_file")
    if not spec:
        raise EdgesynthError("give the network's --model-file", file=str(checkpoint))
    args = model_args if model_args is not None else ck.get("model_args")
    bits = int(extras.get("weight_bits", 8))
    net = build(spec, args, shape, int(extras["num_classes"]), bits)
    try:
        net.load_state_dict(ck["state_dict"])
    except RuntimeError as err:
        raise EdgesynthError(
            f"the checkpoint does not fit {spec}: {str(err).splitlines()[0]}",
            file=str(checkpoint),
        ) from None
    net.restore_mode()
    quantized = integer_mode(net, shape, ck.get("arch") or "network")
    path = write_file_atomic(output, quantized.onnx, overwrite=overwrite, inputs=inputs)
    return path, net, shape


def read_gap8_checkpoint(path: Path) -> dict[str, Any]:
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise EdgesynthError("no such file", file=str(path)) from None
    except Exception as err:
        raise EdgesynthError(f"not a checkpoint: {err}", file=str(path)) from None
    if not isinstance(ck, dict) or ck.get("target") != "gap8":
        raise EdgesynthError(
            "not a gap8 QAT checkpoint (`edgesynth train --target gap8` writes them)",
            file=str(path),
        )
    return ck


@torch.no_grad()
def check_export(
    path: Path, net: Network, shape: tuple[int, ...], count: int = 16
) -> tuple[bool, int]:
    """Whether edgesynth's integer front end reading `path` (the simulator) gives the 8-bit
    mode's output codes on `count` random inputs spanning the calibrated input range."""
    import numpy as np

    from edgesynth.frontends.onnx_int import load_integer_onnx
    from edgesynth.sim.graph import run

    graph = load_integer_onnx(path).graph
    gen = torch.Generator().manual_seed(0)
    lo, hi = float(net.input.lo), float(net.input.hi)
    x = lo + (hi - lo) * torch.rand((count, *shape), generator=gen)
    device = next(net.parameters()).device
    codes = net.input(x.to(device))
    ours = net.body(codes).cpu().numpy().astype(np.int64)
    theirs = run(graph, codes.cpu().numpy().astype(np.int64))[graph.outputs[0]]
    return bool(np.array_equal(ours.reshape(count, -1), theirs.reshape(count, -1))), count
