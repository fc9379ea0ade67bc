"""TensorBoard extras of `edgesynth train`: parameter histograms (`--param-hist`) and
precision-recall curves of the test set (`--pr-curves`), the vendor's two options, written
beside the per-epoch scalars in the run folder's `tensorboard/`."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import edgesynth.nn as enn
from edgesynth.train.datasets import Split


def log_param_histograms(writer: Any, model: nn.Module, epoch: int) -> None:
    """One histogram per parameter tensor (`params/<name>`) for `epoch`."""
    for name, param in model.named_parameters():
        writer.add_histogram(f"params/{name.removeprefix('module.')}", param.detach().cpu(), epoch)


@torch.no_grad()
def test_probabilities(model: nn.Module, data: Split, device: str) -> torch.Tensor:
    """Softmax of the model's outputs over the test set (float mode), N x classes."""
    where = next((p.device for p in model.parameters()), torch.device("cpu"))
    was_training = model.training
    model.eval()
    out = []
    with enn.use(device, simulate=False):
        for i in range(0, len(data), 256):
            logits = model(data.x[i : i + 256].to(where)).float().cpu()
            out.append(torch.softmax(logits.reshape(len(logits), -1), dim=1))
    model.train(was_training)
    return torch.cat(out)


def log_pr_curves(
    writer: Any, model: nn.Module, data: Split, classes: list[str], device: str, epoch: int
) -> None:
    """A precision-recall curve per class (`pr/<class>`): that class against the rest."""
    probs = test_probabilities(model, data, device)
    for c, name in enumerate(classes):
        writer.add_pr_curve(f"pr/{name}", data.y == c, probs[:, c], epoch)
