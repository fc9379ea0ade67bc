"""Batchnorm folding keeps the layer's function: in the model and in a bare state dict."""

from __future__ import annotations

import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.quant.bnfuse import fuse_bn_layers, fuse_bn_state
from edgesynth.quant.checkpoint import load_state, model_state
from edgesynth.train.models import create_model


def _randomize_bn(model: torch.nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d | torch.nn.BatchNorm1d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


@pytest.mark.parametrize("batchnorm", ["Affine", "NoAffine"])
def test_folded_layer_computes_the_same(batchnorm: str) -> None:
    torch.manual_seed(0)
    layer = enn.FusedMaxPoolConv2dBNReLU(4, 6, 3, padding=1, batchnorm=batchnorm)
    _randomize_bn(layer)
    layer.eval()
    x = torch.rand(2, 4, 8, 8) - 0.5
    before = layer(x)
    assert fuse_bn_layers(layer) == 1 and layer.bn is None
    torch.testing.assert_close(layer(x), before, atol=1e-6, rtol=1e-5)


def test_state_dict_folding_matches_model_folding() -> None:
    torch.manual_seed(1)
    model = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    _randomize_bn(model, 3)
    model.eval()
    x = torch.rand(2, 3, 32, 32) - 0.5
    before = model(x)
    state, count = fuse_bn_state(model_state(model))
    assert count == 10 and not any(".bn." in k for k in state)
    fresh = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    load_state(fresh, state)  # the loader drops the model's batchnorm: the checkpoint has none
    assert all(m.bn is None for m in fresh.modules() if isinstance(m, enn.HardwareLayer))
    fresh.eval()
    torch.testing.assert_close(fresh(x), before, atol=1e-5, rtol=1e-4)


def test_quantized_layers_are_not_folded() -> None:
    state = {
        "c.weight_bits": torch.tensor([8.0]),
        "c.adjust_output_shift": torch.tensor([0.0]),
        "c.op.weight": torch.ones(2, 1, 1, 1),
        "c.bn.running_mean": torch.zeros(2),
        "c.bn.running_var": torch.ones(2),
    }
    with pytest.raises(EdgesynthError, match="already quantized"):
        fuse_bn_state(state)


def test_fuse_bn_command(tmp_path, capsys) -> None:
    from edgesynth.cli import main
    from edgesynth.quant.checkpoint import read_checkpoint, write_checkpoint

    model = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    _randomize_bn(model, 5)
    src = write_checkpoint(
        tmp_path / "bn.pth.tar", arch="ai85nascifarnet", state_dict=model_state(model)
    )
    out = tmp_path / "fused.pth.tar"
    assert main(["fuse-bn", str(src), str(out), "--out-arch", "ai85nascifarnet_nobn"]) == 0
    assert "Folded 10 batchnorm layers" in capsys.readouterr().out
    ck = read_checkpoint(out)
    assert ck["arch"] == "ai85nascifarnet_nobn"
    assert not any(".bn." in k for k in ck["state_dict"])
    assert main(["fuse-bn", str(out), str(tmp_path / "again.pth.tar")]) == 1
    assert "no batchnorm layers to fold" in capsys.readouterr().err
    assert not (tmp_path / "again.pth.tar").exists()
