"""QAT policy files, switching a model to QAT, and QAT float mode tracking the chip."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.nn.qat import (
    LayerOverride,
    QatPolicy,
    check_policy_fits,
    enable_qat,
    is_qat,
    load_policy,
)
from edgesynth.train.models import create_model


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    return p


def test_vendor_policy_with_overrides(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "---\nstart_epoch: 240\nshift_quantile: 0.985\nweight_bits: 2\n"
        "overrides:\n  conv1:\n    weight_bits: 8\n  fc:\n    weight_bits: 4\n"
        "outlier_removal_z_score: 8.0\n",
    )
    policy = load_policy(p)
    assert policy == QatPolicy(240, 2, 0.985, policy.overrides)
    assert policy.for_layer("conv1") == (8, 0.985)
    assert policy.for_layer("conv2") == (2, 0.985)
    assert load_policy("None") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "start_epoch: 3\nweight_bits: 8\nweigth_bits: 4\n",
            "policy.yaml:3: unknown key `weigth_bits`",
        ),
        ("start_epoch: 3\nweight_bits: 3\n", "policy.yaml:2: `weight_bits`: must be one of"),
        ("weight_bits: 8\n", "needs `start_epoch`"),
        ("start_epoch: -1\nweight_bits: 8\n", "must be a whole number >= 0"),
        ("start_epoch: 1\nweight_bits: 8\nshift_quantile: 1.5\n", "must be a number in (0, 1]"),
        (
            "start_epoch: 1\nweight_bits: 8\noverrides:\n  conv1:\n    bits: 4\n",
            "policy.yaml:5: unknown key `bits` in `overrides.conv1`",
        ),
        ("start_epoch: [1\n", "not valid YAML"),
        ("- 1\n", "must be a mapping"),
    ],
)
def test_bad_policies_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(EdgesynthError) as err:
        load_policy(_write(tmp_path, text))
    assert message in str(err.value)


def test_overrides_must_name_layers() -> None:
    model = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    policy = QatPolicy(0, 8, overrides={"conv9": LayerOverride(4)})
    with pytest.raises(EdgesynthError, match="`conv9`, not a layer of this model"):
        check_policy_fits(model, policy)


def test_enable_qat_folds_batchnorm_and_sets_bits() -> None:
    model = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    assert not is_qat(model)
    folded = enable_qat(model, QatPolicy(0, 8, 0.995, {"fc": LayerOverride(4)}))
    assert folded == 10 and is_qat(model)
    assert model.fc.weight_bits.item() == 4 and model.conv1_1.weight_bits.item() == 8
    assert model.conv1_1.shift_quantile.item() == pytest.approx(0.995)
    assert model.conv1_1.bn is None


def test_qat_float_mode_tracks_the_chip() -> None:
    """QAT training outputs are the 8-bit mode's integers / 128 (up to float32 rounding)."""
    torch.manual_seed(3)
    model = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    enable_qat(model, QatPolicy(0, 8))
    model.eval()
    x = torch.floor(torch.rand(8, 1, 28, 28) * 256 - 128) / 128
    with torch.no_grad():
        feats = model.conv4(model.conv3(model.conv2(model.conv1(x))))
        with enn.use(simulate=True):
            m = model
            ints = m.conv4(m.conv3(m.conv2(m.conv1(torch.round(x.double() * 128)))))
    diff = (feats.double() * 128 - ints).abs()
    assert torch.equal(feats * 128, torch.round(feats * 128))  # on the chip's grid
    assert diff.max() <= 1 and (diff == 0).double().mean() > 0.999
    assert model.conv1.output_shift.item() != 0 or model.conv2.output_shift.item() != 0


def test_layer_mode_follows_every_change_of_its_buffers() -> None:
    """The cached mode is read again whenever a state buffer changes, however it changes."""
    import edgesynth.nn as enn
    from edgesynth.nn.base import FLOAT, QAT, QUANTIZED

    layer = enn.FusedConv2dReLU(2, 3, 3, padding=1)
    assert layer.state == FLOAT and layer.bits == 8
    layer.start_qat(4, 0.9)
    assert layer.mode() == (QAT, 4, True, pytest.approx(0.9))
    layer.adjust_output_shift.fill_(0.0)  # as quantized checkpoints are loaded
    assert layer.state == QUANTIZED
    other = enn.FusedConv2dReLU(2, 3, 3, padding=1)
    other.load_state_dict(layer.state_dict())
    assert other.mode() == layer.mode()
    layer.weight_bits.fill_(0.0)
    assert layer.state == FLOAT
