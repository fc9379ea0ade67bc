"""Run samples through a training-side model: float, or 8-bit (the chip's integers).

`model_for_checkpoint` builds the architecture a checkpoint names and loads it;
`run_sample` returns the network output in the layout of the corpus' `expected_output.npy`
(C x H x W; 1D data as C x L x 1; a classifier's output as C x 1 x 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.quant.checkpoint import clean_state_dict, load_state
from edgesynth.train.models import create_model, get_model_info
from edgesynth.train.usermodel import UserModel


def _weights(state: dict[str, Any]) -> list[torch.Tensor]:
    sd = clean_state_dict(state)
    return [v for k, v in sd.items() if k.endswith("weight") and ".bn." not in k and v.dim() > 1]


def model_for_checkpoint(
    checkpoint: dict[str, Any],
    *,
    sample_shape: tuple[int, ...],
    device: str = "MAX78000",
    model: str | None = None,
    source: str = "checkpoint",
    sample_source: str = "the sample",
) -> tuple[nn.Module, str]:
    """The model named by the checkpoint's `arch` (or `model`), loaded; and that name.

    A sample whose channel count differs from the first layer's is named as the problem
    (not the checkpoint) when the checkpoint does not load into a model built for it.
    """
    name = model or checkpoint.get("arch")
    if not name:
        raise EdgesynthError(f"{source} names no `arch`; choose the model with --model.")
    info = get_model_info(str(name))
    weights = _weights(checkpoint["state_dict"])
    if not weights:
        raise EdgesynthError(f"{source} holds no layer weights.")
    dims = sample_dimensions(sample_shape, info.dims)
    with enn.use(device):
        net = create_model(
            info.name,
            num_classes=int(weights[-1].shape[0]),
            num_channels=int(sample_shape[0]),
            dimensions=dims,
        )
    arch = str(checkpoint.get("arch") or "")
    if model and arch and arch.lower() != info.name:
        source = f"{source} (trained as `{arch}`)"
    try:
        load_state(net, checkpoint["state_dict"], source=source)
    except EdgesynthError:
        takes = int(weights[0].shape[1])
        if weights[0].dim() > 2 and takes != int(sample_shape[0]):
            raise EdgesynthError(
                f"the sample has {sample_shape[0]} channels (shape {list(sample_shape)}), but "
                f"the checkpoint's first layer takes {takes}; pass a sample with {takes} "
                "channel(s).",
                file=sample_source,
            ) from None
        raise
    net.eval()
    return net, info.name


def model_for_user(
    user: UserModel,
    checkpoint: dict[str, Any],
    sample_shape: tuple[int, ...],
    device: str = "MAX78000",
    *,
    source: str = "checkpoint",
) -> nn.Module:
    """The user's class built for samples of `sample_shape` (C x H x W, or C x L for 1D data),
    with as many outputs as the checkpoint's last layer, `checkpoint` loaded."""
    weights = _weights(checkpoint["state_dict"])
    if not weights:
        raise EdgesynthError(f"{source} holds no layer weights.")
    flat = len(sample_shape) == 2 or (len(sample_shape) == 3 and sample_shape[2] == 1)
    dims = sample_dimensions(sample_shape, 1 if flat else 2)
    net = user.build(
        num_classes=int(weights[-1].shape[0]),
        num_channels=int(sample_shape[0]),
        dimensions=dims,
        device=device,
    )
    load_state(net, checkpoint["state_dict"], source=source)
    return net.eval()


def sample_dimensions(shape: tuple[int, ...], dims: int) -> tuple[int, int]:
    """(H, W) of a C x H x W sample, (L, 1) of a C x L (or C x L x 1) sample."""
    if dims == 1:
        if len(shape) == 2 or (len(shape) == 3 and shape[2] == 1):
            return (int(shape[1]), 1)
        raise EdgesynthError(f"this model takes C x L samples; the sample is {shape}.")
    if len(shape) != 3:
        raise EdgesynthError(f"this model takes C x H x W samples; the sample is {shape}.")
    return (int(shape[1]), int(shape[2]))


def to_expected_layout(y: torch.Tensor) -> torch.Tensor:
    """One output (no batch axis) as C x H x W: (C,) -> C x 1 x 1, (C, L) -> C x L x 1."""
    if y.dim() == 1:
        return y.reshape(-1, 1, 1)
    if y.dim() == 2:
        return y.unsqueeze(-1)
    return y


def prepare_input(sample: np.ndarray, dims: int, eight_bit: bool) -> torch.Tensor:
    """A batch of one: integers as they are in 8-bit mode, divided by 128 in float."""
    x = torch.from_numpy(np.asarray(sample)).double()
    if dims == 1 and x.dim() == 3:
        x = x.squeeze(-1)
    if not eight_bit:
        x = (x / 128.0).float()
    return x.unsqueeze(0)


@torch.no_grad()
def run_sample(
    model: nn.Module,
    sample: np.ndarray,
    *,
    dims: int,
    eight_bit: bool,
    device: str,
    avg_pool_rounding: bool = False,
) -> np.ndarray:
    """The network output for one sample: int64 in 8-bit mode, float64 otherwise."""
    model.eval()
    x = prepare_input(sample, dims, eight_bit)
    with enn.use(device, simulate=eight_bit, avg_pool_rounding=avg_pool_rounding):
        y = model(x)[0]
    out = to_expected_layout(y).double().numpy()
    return out.astype(np.int64) if eight_bit else out
