"""The MAX78002's binary (+/-1) weights in edgesynth.nn: the corpus' binary cases run by
edgesynth.nn layers return the vendor's expected output, and a layer trained with binary QAT
computes in float mode what its 8-bit mode (the chip) computes, quantizes to +/-1 weights and
is refused where the chip cannot run it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError
from edgesynth.nn import functional as hw
from edgesynth.nn.qat import enable_qat, policy_from_dict
from edgesynth.quant.ptq import QuantizeOptions, quantize_state

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
BINARY_CASES = sorted(
    c.parent
    for c in CORPUS.glob("MAX78002/*/case.json")
    if "wbits=bin" in json.loads(c.read_text()).get("features", [])
)


@pytest.mark.corpus
def test_binary_corpus_cases_exist() -> None:
    assert len(BINARY_CASES) >= 7


@pytest.mark.corpus
@pytest.mark.parametrize("case", BINARY_CASES, ids=lambda c: c.name)
def test_binary_corpus_case_run_by_edgesynth_nn_equals_expected_output(case: Path) -> None:
    from edgesynth.targets.max7800x.commands.izer import job_from_options
    from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
    from edgesynth.targets.max7800x.pipeline import load_network
    from edgesynth.train.vendor_model import from_network

    info = json.loads((case / "case.json").read_text())
    opts = parse_izer_args([*info["args"], "--test-dir", "unused", "--prefix", "unused"])
    net, sample = load_network(job_from_options(opts, base_dir=case))
    assert any(layer.binary for layer in net.layers)
    model = from_network(net)
    setting = {"simulate": True, "avg_pool_rounding": opts.avg_pool_rounding}
    with enn.use("MAX78002", **setting), torch.no_grad():
        out = model(torch.from_numpy(sample).double()[None])[0]
    np.testing.assert_array_equal(
        out.numpy().astype(np.int64), np.load(case / "expected_output.npy")
    )


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = enn.FusedConv2dReLU(2, 8, 3, padding=1, bias=True)
        self.fc = enn.Linear(8 * 6 * 6, 5, bias=True, wide=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).flatten(1))


def _binary_qat_net() -> _Net:
    torch.manual_seed(0)
    with enn.use("MAX78002"):
        net = _Net()
        policy = policy_from_dict(
            {"start_epoch": 0, "weight_bits": 8, "overrides": {"conv": {"weight_bits": "binary"}}}
        )
        enable_qat(net, policy)
    return net


def _grid_input(n: int = 4) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randint(-128, 128, (n, 2, 6, 6)).double()


def test_binary_qat_layer_float_mode_is_the_chip_at_training_scale() -> None:
    net = _binary_qat_net()
    assert net.conv.mode().bits == hw.BINARY
    x = _grid_input()
    with enn.use("MAX78002"), torch.no_grad():
        floats = net.conv(x.float() / 128)
        with enn.use(simulate=True):
            ints = net.conv(x)
    np.testing.assert_array_equal((floats.double() * 128).round().numpy(), ints.numpy())
    w, _, shift = net.conv.integer_parameters()
    assert set(w.unique().tolist()) == {-1.0, 1.0}
    mean = net.conv.op.weight.detach().abs().mean().item()
    assert shift == round(np.log2(mean)) + 7  # binary weights count as 1 bit


def test_binary_weights_get_a_straight_through_gradient() -> None:
    net = _binary_qat_net()
    with enn.use("MAX78002"):
        net(_grid_input().float() / 128).sum().backward()
    assert net.conv.op.weight.grad is not None and net.conv.op.weight.grad.abs().sum() > 0


def test_quantized_binary_layer_is_one_bit_with_plus_minus_one_weights() -> None:
    net = _binary_qat_net()
    state, reports = quantize_state(net.state_dict(), QuantizeOptions())
    assert state["conv.weight_bits"].item() == 1.0
    assert set(state["conv.op.weight"].unique().tolist()) == {-1.0, 1.0}
    assert reports[0].weight_bits == hw.BINARY and reports[0].clipped == 0
    with enn.use("MAX78002"):
        quantized = _Net()
    quantized.load_state_dict(state)
    x = _grid_input()
    with enn.use("MAX78002", simulate=True), torch.no_grad():
        np.testing.assert_array_equal(quantized(x).numpy(), net(x).numpy())


def test_binary_quantize_needs_the_max78002() -> None:
    net = _binary_qat_net()
    with pytest.raises(EdgesynthError, match="only the MAX78002 runs"):
        quantize_state(net.state_dict(), QuantizeOptions(binary_weights=False))


def test_binary_weights_are_refused_on_the_max78000() -> None:
    with enn.use("MAX78000"), pytest.raises(EdgesynthError, match="need the MAX78002"):
        enn.Conv2d(2, 4, 3, weight_bits="binary")
    policy = policy_from_dict({"start_epoch": 0, "weight_bits": "binary"})
    with enn.use("MAX78000"):
        net = _Net()
        with pytest.raises(EdgesynthError, match="which the MAX78000 does not have"):
            enable_qat(net, policy)
    with pytest.raises(EdgesynthError, match=r"must be one of 1, 2, 4, 8, binary, got 3"):
        policy_from_dict({"start_epoch": 0, "weight_bits": 3})


def test_one_bit_and_binary_layers_cannot_mix() -> None:
    with enn.use("MAX78002"):
        net = _Net()
        policy = policy_from_dict(
            {"start_epoch": 0, "weight_bits": 1, "overrides": {"conv": {"weight_bits": "binary"}}}
        )
        with pytest.raises(EdgesynthError, match="one network cannot have both"):
            enable_qat(net, policy)


def test_float_export_keeps_the_binary_weights() -> None:
    from edgesynth.train.export import float_model

    net = _binary_qat_net()
    _, _, total_shift = net.conv.integer_parameters()
    signs = hw.binarize(net.conv.op.weight.detach())
    float_model(net, "test")
    assert net.conv.state == "float"
    np.testing.assert_array_equal(
        net.conv.op.weight.detach().numpy(), (signs * 2.0 ** (total_shift - 7)).numpy()
    )
