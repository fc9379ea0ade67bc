"""After training: quantize, evaluate in 8-bit mode, and check the synthesizer's simulator
agrees with the training-side model image for image."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch import nn

import edgesynth.nn as enn
from edgesynth.outputs import save_npy_atomic
from edgesynth.quant.checkpoint import load_state, read_checkpoint
from edgesynth.train.datasets import Dataset, Split, to_chip
from edgesynth.train.loop import evaluate
from edgesynth.train.metrics import Metrics
from edgesynth.train.models import create_model
from edgesynth.train.usermodel import UserModel

SIM_BATCH = 256  # images per batch through the graph reference (bounds the memory)


@dataclass
class SimCheck:
    count: int
    sim_top1: float  # percent, the simulator's predictions against the labels
    agree: float  # percent of images where simulator and 8-bit model predict the same class
    exact: float  # percent of images whose whole output vector is identical


def load_model(
    checkpoint: Path, model: str, dataset: Dataset, device: str, user: UserModel | None = None
) -> nn.Module:
    """Architecture `model` (or the user's class) for `dataset`, `checkpoint` loaded."""
    shape = dataset.input_shape
    spatial = tuple(shape[1:]) if len(shape) == 3 else (shape[1], 1)
    sizes = {"num_classes": dataset.num_classes, "num_channels": shape[0], "dimensions": spatial}
    if user is not None:
        net = user.build(**sizes, device=device)
    else:
        with enn.use(device):
            net = create_model(model, **sizes)
    load_state(net, read_checkpoint(checkpoint)["state_dict"], source=str(checkpoint))
    net.eval()
    return net


def save_sample(
    split: Split,
    index: int,
    folder: Path,
    dataset: str,
    overwrite: bool = False,
    channels: int | None = None,
) -> Path:
    """Write test item `index` as the synthesizer's sample file `sample_<dataset>.npy` (an
    existing file only with `overwrite`); `channels`: only the first that many (the vendor's
    --slice-sample keeps 3, for RGB models of data with more channels)."""
    from edgesynth.errors import EdgesynthError

    if not 0 <= index < len(split):
        raise EdgesynthError(f"--save-sample {index}: the test set has {len(split)} items.")
    item = split.x[index]
    if channels is not None:
        if item.shape[0] < channels:
            raise EdgesynthError(
                f"--slice-sample keeps {channels} channels; the items have {item.shape[0]}.",
                key="--slice-sample",
            )
        item = item[:channels]
    return save_npy_atomic(
        folder / f"sample_{dataset.lower()}.npy",
        to_chip(item),
        overwrite=overwrite,
        option="--save-sample",
    )


def eight_bit_metrics(
    net: nn.Module,
    dataset: Dataset,
    device: str,
    avg_pool_rounding: bool = False,
    loss: str = "ce",
) -> Metrics:
    return evaluate(
        net,
        dataset.test,
        num_classes=dataset.num_classes,
        device=device,
        eight_bit=True,
        avg_pool_rounding=avg_pool_rounding,
        loss=loss,
    )


def simulator_check(
    yaml_path: Path,
    checkpoint: Path,
    dataset: Dataset,
    device: str,
    model_predictions: np.ndarray,
    count: int,
    net: nn.Module | None = None,
    avg_pool_rounding: bool = False,
) -> SimCheck:
    """Run the first `count` test images through the synthesizer: the YAML and checkpoint
    read and checked by the device rules, then the network graph's reference arithmetic (the
    arithmetic every target's simulator equals), in one batch."""
    from edgesynth.flow import load_model
    from edgesynth.sim.graph import run

    test = dataset.test
    count = min(count, len(test))
    with tempfile.TemporaryDirectory(prefix="edgesynth-check-") as folder:
        first = save_sample(test, 0, Path(folder), "check")  # never beside the user's YAML
        graph = load_model(
            yaml_path,
            checkpoint=checkpoint,
            sample_input=first,
            options={
                "device": device,
                "avg_pool_rounding": avg_pool_rounding,
                "check_rules": True,
            },
        )
    chunks = [
        run(graph, np.stack([to_chip(x) for x in test.x[i : i + SIM_BATCH]]), keep=False)
        for i in range(0, count, SIM_BATCH)
    ]
    outputs = [c[graph.outputs[0]].reshape(len(c[graph.outputs[0]]), -1) for c in chunks]
    outputs = np.concatenate(outputs) if outputs else np.zeros((0, 0), dtype=np.int64)
    preds = np.zeros(count, dtype=np.int64)
    exact = 0
    outputs_model = None
    if net is not None:
        import torch

        with enn.use(device, simulate=True, avg_pool_rounding=avg_pool_rounding), torch.no_grad():
            outputs_model = net(torch.round(test.x[:count].double() * 128)).numpy()
    for i in range(count):
        out = outputs[i]
        preds[i] = int(out.argmax())
        if outputs_model is not None:
            exact += int(np.array_equal(out, outputs_model[i].reshape(-1).astype(np.int64)))
    labels = test.y[:count].numpy()
    regression = labels.ndim != 1  # target vectors: no class to compare
    return SimCheck(
        count,
        float("nan") if regression else 100.0 * float((preds == labels).mean()),
        float("nan") if regression else 100.0 * float((preds == model_predictions[:count]).mean()),
        100.0 * exact / count if outputs_model is not None else float("nan"),
    )
