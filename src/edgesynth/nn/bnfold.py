"""Batchnorm folding: a convolution followed by batchnorm becomes one convolution.

With y = gamma * (conv(x) + b - mean) / sqrt(var + eps) + beta, the folded layer has
w' = w * gamma / sqrt(var + eps) and b' = (b - mean) * gamma / sqrt(var + eps) + beta
(gamma = 1, beta = 0 for batchnorm without affine parameters). The chip has no batchnorm, so
quantization-aware training folds it when it starts (`fuse_bn_layers`, here) and `edgesynth
fuse-bn` folds checkpoints (`quant.bnfuse`, with `folded`).
"""

from __future__ import annotations

import torch
from torch import nn

from edgesynth.nn.layers import HardwareLayer


def folded(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    mean: torch.Tensor,
    var: torch.Tensor,
    eps: float,
    gamma: torch.Tensor | None,
    beta: torch.Tensor | None,
    *,
    transposed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and bias with the batchnorm folded in (per output channel).

    Computed in float64 on the CPU (not every GPU has float64), returned where `weight` is.
    """

    def exact(t: torch.Tensor) -> torch.Tensor:
        return t.detach().cpu().double()

    inv = torch.rsqrt(exact(var) + eps)
    scale = inv * (exact(gamma) if gamma is not None else 1.0)
    shift = exact(beta) if beta is not None else torch.zeros_like(inv)
    b = exact(bias) if bias is not None else torch.zeros_like(inv)
    axis = 1 if transposed else 0
    shape = [1] * weight.dim()
    shape[axis] = -1
    w_new = exact(weight) * scale.reshape(shape)
    b_new = (b - exact(mean)) * scale + shift
    return w_new.to(weight.device, weight.dtype), b_new.to(weight.device, weight.dtype)


def fuse_layer(layer: HardwareLayer) -> bool:
    """Fold `layer.bn` into its weights; True when there was one."""
    if layer.bn is None or layer.op is None:
        return False
    bn = layer.bn
    assert isinstance(bn, nn.modules.batchnorm._BatchNorm)
    assert bn.running_mean is not None and bn.running_var is not None
    w, b = folded(
        layer.op.weight.data,
        layer.op.bias.data if layer.op.bias is not None else None,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight.data if bn.weight is not None else None,
        bn.bias.data if bn.bias is not None else None,
        transposed=isinstance(layer.op, nn.ConvTranspose2d),
    )
    layer.op.weight.data = w
    layer.op.bias = nn.Parameter(b)
    layer.bn = None
    return True


def fuse_bn_layers(model: nn.Module) -> int:
    """Fold every batchnorm of `model`'s edgesynth.nn layers; returns how many."""
    return sum(fuse_layer(m) for m in model.modules() if isinstance(m, HardwareLayer))
