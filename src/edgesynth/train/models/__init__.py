"""Model registry: architectures by the names checkpoints carry in `arch`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.train import catalog
from edgesynth.train.models.classic import (
    AI85KWS20Netv3,
    AI85NASCifarNet,
    AI85Net5,
    AI85NetExtraSmall,
    AI87KWS20Netv3,
)
from edgesynth.train.models.zoo import (
    AI85CatsDogsNet,
    AI85FaceIDNet,
    AI85KWS20Netv2,
    AI85ResidualSimpleNet,
    AI85SimpleNet,
)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    factory: Callable[..., nn.Module]
    dims: int  # 1: (C, L) input, 2: (C, H, W) input
    description: str


_CLASSES: dict[str, tuple[Callable[..., nn.Module], int]] = {
    "ai85net5": (AI85Net5, 2),
    "ai85netextrasmall": (AI85NetExtraSmall, 2),
    "ai85nascifarnet": (AI85NASCifarNet, 2),
    "ai85kws20netv3": (AI85KWS20Netv3, 1),
    "ai87kws20netv3": (AI87KWS20Netv3, 1),
    "ai85kws20netv2": (AI85KWS20Netv2, 1),
    "ai85simplenet": (AI85SimpleNet, 2),
    "ai85ressimplenet": (AI85ResidualSimpleNet, 2),
    "ai85cdnet": (AI85CatsDogsNet, 2),
    "ai85faceidnet": (AI85FaceIDNet, 2),
}
# the descriptions are in `catalog` (read by `edgesynth train --help`)
MODELS: dict[str, ModelInfo] = {
    name: ModelInfo(name, *_CLASSES[name], description)
    for name, description in catalog.MODELS.items()
}


def get_model_info(name: str) -> ModelInfo:
    info = MODELS.get(name.lower())
    if info is None:
        raise EdgesynthError(
            f"unknown model `{name}`; available: {', '.join(sorted(MODELS))}."
            + did_you_mean(name.lower(), MODELS)
        )
    return info


def create_model(
    name: str,
    *,
    num_classes: int,
    num_channels: int,
    dimensions: tuple[int, ...],
    bias: bool | None = None,
) -> nn.Module:
    """Build architecture `name` for data of `num_channels` x `dimensions`."""
    info = get_model_info(name)
    kwargs: dict[str, object] = {
        "num_classes": num_classes,
        "num_channels": num_channels,
        "dimensions": tuple(dimensions),
    }
    if bias is not None:
        kwargs["bias"] = bias
    return info.factory(**kwargs)
