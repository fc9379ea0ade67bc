"""`edgesynth quantize`: clip methods, QAT conversion, the vendor layout, and the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import edgesynth.nn as enn
from edgesynth.cli import main
from edgesynth.errors import EdgesynthError
from edgesynth.nn.qat import QatPolicy, enable_qat
from edgesynth.quant.checkpoint import load_state, model_state, read_checkpoint, write_checkpoint
from edgesynth.quant.ptq import QuantizeOptions, clip_threshold, quantize_state
from edgesynth.targets.max7800x.description.checkpoint import load_checkpoint
from edgesynth.train.models import create_model

W = torch.tensor([[0.5, -0.25, 0.125, 0.0625], [-0.75, 0.1, 0.2, 0.3]]).reshape(2, 4, 1, 1)


def _state(bits: float = 0.0, adjust: float = 0.0) -> dict[str, torch.Tensor]:
    return {
        "conv.weight_bits": torch.tensor([bits]),
        "conv.adjust_output_shift": torch.tensor([adjust]),
        "conv.op.weight": W.clone(),
        "conv.op.bias": torch.tensor([0.05, -0.3]),
    }


def test_clip_thresholds() -> None:
    assert clip_threshold(W, "MAX") == pytest.approx(0.75)
    # per output channel: minima -0.25, -0.75 (mean -0.5); maxima 0.5, 0.3 (mean 0.4)
    assert clip_threshold(W, "AVGMAX") == pytest.approx(0.5)
    assert clip_threshold(W, "AVG") == pytest.approx((0.5 + 0.75) / 2)
    flat = W.flatten().double()
    expect = max(
        abs(max(flat.min(), flat.mean() - 1 * flat.std())),
        abs(min(flat.max(), flat.mean() + 1 * flat.std())),
    )
    assert clip_threshold(W, "STDDEV", 1.0) == pytest.approx(float(expect))


def test_scale_method_multiplies_weights_and_bias() -> None:
    state, reports = quantize_state(_state(), QuantizeOptions(clip_method="SCALE", scale=0.5))
    w = state["conv.op.weight"].flatten().tolist()
    assert w == [32.0, -16.0, 8.0, 4.0, -48.0, 6.0, 13.0, 19.0]  # round-half-up(w * 0.5 * 128)
    # bias byte round(b * 0.5 * 128) stored times 2^(bits-1)
    assert state["conv.op.bias"].tolist() == [3.0 * 128, -19.0 * 128]
    assert reports[0].output_shift == 0 and state["conv.adjust_output_shift"].item() == 0
    assert list(state)[:6] == [
        "conv.output_shift",
        "conv.weight_bits",
        "conv.bias_bits",
        "conv.quantize_activation",
        "conv.adjust_output_shift",
        "conv.shift_quantile",
    ]


def test_threshold_methods_choose_the_shift() -> None:
    state, reports = quantize_state(_state(), QuantizeOptions(clip_method="AVGMAX"))
    # threshold 0.5 -> shift ceil(log2 0.5) = -1: weights * 2 * 128, clipped to 127
    assert reports[0].output_shift == -1
    assert state["conv.op.weight"].flatten().tolist()[:2] == [127.0, -64.0]
    assert reports[0].clipped == 2  # 0.5 and -0.75 do not fit


def test_qat_layers_keep_their_training_rule() -> None:
    state, reports = quantize_state(_state(bits=4, adjust=1), QuantizeOptions())
    assert reports[0].method == "QAT" and reports[0].weight_bits == 4
    assert reports[0].output_shift == 0  # max |params| = 0.75 -> shift 0
    assert state["conv.op.weight"].abs().max() <= 8


def test_already_quantized_is_refused() -> None:
    with pytest.raises(EdgesynthError, match="already quantized"):
        quantize_state(_state(bits=8, adjust=0), QuantizeOptions())


def test_qat_model_8bit_equals_its_quantized_checkpoint(tmp_path: Path) -> None:
    """The QAT model in 8-bit mode and `quantize`d checkpoint compute the same integers."""
    torch.manual_seed(0)
    model = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    enable_qat(model, QatPolicy(start_epoch=0, weight_bits=8))
    model.eval()
    x = torch.floor(torch.rand(4, 1, 28, 28) * 256 - 128).double()
    with enn.use(simulate=True), torch.no_grad():
        expected = model(x)
    src = write_checkpoint(tmp_path / "qat.pth.tar", arch="ai85net5", state_dict=model_state(model))
    assert main(["quantize", str(src), str(tmp_path / "q.pth.tar")]) == 0
    q = create_model("ai85net5", num_classes=10, num_channels=1, dimensions=(28, 28))
    load_state(q, read_checkpoint(tmp_path / "q.pth.tar")["state_dict"])
    with enn.use(simulate=True), torch.no_grad():
        torch.testing.assert_close(q(x), expected, rtol=0, atol=0)
    # the synthesizer's torch-free reader takes it: integer weights, shifts, arch
    ck = load_checkpoint(tmp_path / "q.pth.tar")
    assert ck.arch == "ai85net5" and len(ck.layers) == 5
    assert all(layer.output_shift is not None for layer in ck.layers)


def test_cli_errors(tmp_path: Path, capsys) -> None:
    src = write_checkpoint(tmp_path / "f.pth.tar", arch="x", state_dict=_state())
    assert main(["quantize", str(src), str(src)]) == 1
    assert "is an input of this run; name another output file" in capsys.readouterr().err
    assert (
        main(["quantize", str(src), str(tmp_path / "o.pth.tar"), "--clip-method", "AVGMAXX"]) == 2
    )
    err = capsys.readouterr().err
    assert "argument --clip-method: invalid choice: 'AVGMAXX'" in err
    assert "Did you mean `AVGMAX`" in err
    assert not (tmp_path / "o.pth.tar").exists()
    assert main(["quantize", str(src), str(tmp_path / "o.pth.tar"), "--weight-bits", "3"]) == 1
    assert "3-bit weights are not supported" in capsys.readouterr().err


def test_cli_methods_report_layers(tmp_path: Path, capsys) -> None:
    src = write_checkpoint(tmp_path / "f.pth.tar", arch="x", state_dict=_state())
    for method in ("SCALE", "AVG", "AVGMAX", "STDDEV", "MAX"):
        out = tmp_path / f"{method}.pth.tar"
        assert main(["quantize", str(src), str(out), "--clip-method", method]) == 0
        assert f"conv: {method}, 8-bit" in capsys.readouterr().out
        weights = read_checkpoint(out)["state_dict"]["conv.op.weight"].numpy()
        assert np.array_equal(weights, np.round(weights)) and np.abs(weights).max() <= 128
