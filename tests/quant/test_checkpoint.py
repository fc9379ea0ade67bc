"""Checkpoint interop: vendor training checkpoints load into edgesynth models, ours load back."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.frontends.torchfile import read_torch_file
from edgesynth.nn.qat import QatPolicy, enable_qat
from edgesynth.quant.checkpoint import (
    clean_state_dict,
    load_state,
    model_state,
    read_checkpoint,
    write_checkpoint,
)
from edgesynth.train.models import create_model

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"


def _mnist() -> torch.nn.Module:
    return create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))


def _vendor_state(model: torch.nn.Module, *, qat: bool) -> OrderedDict[str, torch.Tensor]:
    """What ai8x-training saves: DataParallel `module.` prefix, its buffer dtypes and the newer
    activation-threshold buffers."""
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for key, value in model.state_dict().items():
        layer, _, leaf = key.rpartition(".")
        if leaf == "weight_bits":
            value = torch.tensor([8 if qat else 0])  # ints, as newer vendor code stores them
        if leaf == "adjust_output_shift":
            value = torch.tensor([qat])
        out["module." + key] = value.clone()
        if leaf == "shift_quantile":
            out[f"module.{layer}.activation_threshold"] = torch.tensor(0.0)
            out[f"module.{layer}.final_scale"] = torch.tensor(0.0)
    return out


@pytest.mark.parametrize("qat", [False, True])
def test_vendor_training_checkpoint_loads(qat: bool, tmp_path: Path) -> None:
    torch.manual_seed(0)
    source = _mnist()
    if qat:
        enable_qat(source, QatPolicy(0, 8))
    state = _vendor_state(source, qat=qat)
    path = write_checkpoint(tmp_path / "vendor.pth.tar", arch="ai85net5", state_dict=state)
    target = _mnist()
    load_state(target, read_checkpoint(path)["state_dict"])
    assert target.conv2.state == ("qat" if qat else "float")
    x = torch.floor(torch.rand(2, 1, 28, 28) * 256 - 128) / 128
    source.eval()
    target.eval()
    torch.testing.assert_close(target(x), source(x), rtol=0, atol=0)


def test_our_checkpoint_round_trip_and_vendor_reader(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    enable_qat(model, QatPolicy(0, 8, 0.995))
    path = write_checkpoint(
        tmp_path / "ours.pth.tar",
        arch="ai85nascifarnet",
        state_dict=model_state(model),
        epoch=3,
        extras={"best_top1": 1.0},
    )
    again = create_model("ai85nascifarnet", num_classes=10, num_channels=3, dimensions=(32, 32))
    load_state(again, read_checkpoint(path)["state_dict"])
    assert again.conv1_1.bn is None and again.conv1_1.state == "qat"
    assert again.conv1_1.shift_quantile.item() == pytest.approx(0.995)
    x = torch.rand(1, 3, 32, 32) - 0.5
    model.eval()
    again.eval()
    torch.testing.assert_close(again(x), model(x), rtol=0, atol=0)
    # the torch-free reader the synthesizer uses sees the vendor's layout
    raw = read_torch_file(path)
    assert raw["arch"] == "ai85nascifarnet" and raw["epoch"] == 3
    keys = list(raw["state_dict"])
    assert keys[:7] == [
        "conv1_1.output_shift",
        "conv1_1.weight_bits",
        "conv1_1.bias_bits",
        "conv1_1.quantize_activation",
        "conv1_1.adjust_output_shift",
        "conv1_1.shift_quantile",
        "conv1_1.op.weight",
    ]


def test_duplicated_prefixed_layers_follow_the_synthesizer() -> None:
    """kws20_v3's checkpoint holds each layer twice; the prefixed copy (no bias) is used."""
    ck = read_checkpoint(CORPUS / "MAX78000/kws20_v3/trained/ai85-kws20_v3-qat8-q.pth.tar")
    state = clean_state_dict(ck["state_dict"])
    assert "voice_conv1.op.weight" in state and "voice_conv1.op.bias" not in state
    assert not any(k.startswith("module.") for k in state)


def test_legacy_test_checkpoint_is_8bit_integer() -> None:
    ck = read_checkpoint(CORPUS / "MAX78000/test-mnist-chw/tests/test-mnist.pth.tar")
    assert "conv1.conv2d.weight" in ck["state_dict"]
    model = _mnist()  # ai84net5 has ai85net5's shapes
    load_state(model, ck["state_dict"])
    assert model.conv1.state == "quantized" and model.conv1.weight_bits.item() == 8
    assert model.fc.op.bias is not None


def test_another_models_checkpoint_is_one_clear_error() -> None:
    ck = read_checkpoint(CORPUS / "MAX78000/cifar-10/trained/ai85-cifar10-qat8-q.pth.tar")
    with pytest.raises(EdgesynthError) as err:
        load_state(_mnist(), ck["state_dict"], source="cifar.pth.tar")
    message = str(err.value)
    assert message.startswith("cifar.pth.tar does not fit the model: no weights for layer")
    assert "more." in message  # long lists are cut short


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pth.tar"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(EdgesynthError, match=r"a text file .* not a PyTorch checkpoint"):
        read_checkpoint(bad)
    bad.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(EdgesynthError, match="not a readable PyTorch checkpoint"):
        read_checkpoint(bad)
    good = tmp_path / "good.pth.tar"
    torch.save({"state_dict": {"w": torch.ones(3)}}, good)
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(EdgesynthError, match="truncated or damaged: a zip archive"):
        read_checkpoint(bad)
    torch.save({"epoch": 1}, tmp_path / "nostate.pth.tar")
    with pytest.raises(EdgesynthError, match="no `state_dict`"):
        read_checkpoint(tmp_path / "nostate.pth.tar")


def test_quantized_float_mode_matches_8bit_scaled() -> None:
    ck = read_checkpoint(CORPUS / "MAX78000/mnist/trained/ai85-mnist-qat8-q.pth.tar")
    model = _mnist()
    load_state(model, ck["state_dict"])
    model.eval()
    x = torch.floor(torch.rand(3, 1, 28, 28) * 256 - 128)
    with torch.no_grad():
        f = model(x / 128)
        with enn.use(simulate=True):
            q = model(x.double())
    torch.testing.assert_close(f.double() * 2**14, q, rtol=0, atol=0)
