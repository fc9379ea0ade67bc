"""gap8 quantization-aware training (`quant.qat_gap8`, `quant.qat_network`): the integer
translation (RequantShift ONNX, read by edgesynth's integer front end) equals the training
side's 8-bit mode value for value; the fake-quantized network evaluated in float64 gives the
8-bit mode's codes except where a requantization is an exact tie; bad networks and options
get one message."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

import needs
from cli_helpers import run_cli

torch = needs.module("torch")
nn = torch.nn

from edgesynth.errors import EdgesynthError  # noqa: E402
from edgesynth.quant import qat_gap8 as q  # noqa: E402
from edgesynth.quant.qat_network import Network, integer_mode  # noqa: E402

SHAPE = (1, 12, 12)


def body(batchnorm: bool = False) -> nn.Module:
    return nn.Sequential(
        q.Conv2d(1, 6, 3, padding=1, activation="relu", batchnorm=batchnorm),
        nn.MaxPool2d(2),
        q.Conv2d(6, 8, 3),  # signed 8-bit codes
        nn.Flatten(),
        q.Linear(8 * 4 * 4, 16, activation="relu", batchnorm=batchnorm),
        nn.Dropout(0.1),
        q.Linear(16, 5),
    )


class Residual(nn.Module):
    """Two skip additions (one followed by a ReLU, one signed), an average pooling of signed
    values and a global one of unsigned values."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = q.Conv2d(1, 6, 3, padding=1, activation="relu")
        self.pool = nn.MaxPool2d(2)
        self.a = q.Conv2d(6, 6, 3, padding=1, activation="relu")
        self.b = q.Conv2d(6, 6, 3, padding=1)
        self.add = q.Add(activation="relu")
        self.c = q.Conv2d(6, 6, 3, padding=1)
        self.add2 = q.Add()
        self.avg = q.AvgPool2d(2)
        self.d = q.Conv2d(6, 8, 1, activation="relu")
        self.gap = q.AvgPool2d()
        self.fc = q.Linear(8, 5)

    def forward(self, x):  # type: ignore[no-untyped-def]
        x = self.pool(self.stem(x))
        y = self.add(x, self.b(self.a(x)))
        z = self.d(self.avg(self.add2(y, self.c(y))))
        return self.fc(torch.flatten(self.gap(z), 1))


def trained(
    weight_bits: int = 8, weights: str = "channel", steps: int = 5, batchnorm: bool = False,
    residual: bool = False,
) -> Network:  # fmt: skip
    """A network calibrated on random data and trained a few QAT steps (the clips learned)."""
    torch.manual_seed(0)
    model = Residual() if residual else body(batchnorm)
    net = Network(model, weight_bits=weight_bits, weights=weights)
    x = torch.randn(256, *SHAPE)
    y = torch.randint(0, 5, (256,))
    net.start_qat([x[:128], x[128:]])
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


def integer_graph(onnx: bytes):  # type: ignore[no-untyped-def]
    from edgesynth.frontends.onnx_int import load_integer_onnx

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.onnx"
        path.write_bytes(onnx)
        return load_integer_onnx(path).graph


@pytest.mark.parametrize(
    "weight_bits,weights,residual",
    [(8, "channel", False), (4, "channel", False), (2, "channel", False), (8, "layer", False),
     (8, "channel", True), (2, "channel", True)],
)  # fmt: skip
def test_the_integer_onnx_is_the_8bit_mode(weight_bits: int, weights: str, residual: bool) -> None:
    from edgesynth.sim.graph import run

    net = trained(weight_bits, weights, residual=residual)
    quantized = integer_mode(net, SHAPE, "net")
    x = 3 * torch.randn(64, *SHAPE)  # past the calibrated range too: clipped alike
    with torch.no_grad():
        codes = net.input(x)
        ours = net.body(codes).numpy()
    graph = integer_graph(quantized.onnx)
    theirs = run(graph, codes.numpy().astype(np.int64))[graph.outputs[0]]
    assert ours.dtype == np.float64 and np.array_equal(ours, np.round(ours))
    assert np.array_equal(ours.astype(np.int64), theirs.reshape(64, -1))
    assert np.abs(ours).max() > 100  # 16-bit output codes, not a degenerate network
    wq = quantized.layers["stem" if residual else "0"].weight
    assert np.abs(wq).max() == (1 << (weight_bits - 1)) - 1
    assert residual == bool(quantized.operands)  # the sums were written as sums


def test_the_fake_quantized_layers_give_the_8bit_codes_but_for_exact_ties() -> None:
    """Layer by layer on the 8-bit mode's own input codes: the QAT forward in float64,
    divided by the output step and rounded, is the 8-bit mode's output wherever the integer
    requantization is not exactly halfway."""
    net = trained()
    integer_mode(net, SHAPE, "net")
    seen: dict[q.Layer, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = [
        layer.register_forward_hook(lambda m, i, o: seen.__setitem__(m, (i[0], o)))
        for layer in net.layers
    ]
    with torch.no_grad():
        net(torch.randn(128, *SHAPE))
    for h in hooks:
        h.remove()
    net.double()
    ties = 0
    for layer in [m for m in net.layers if isinstance(m, q.Layer)]:
        codes_in, codes_out = seen[layer]
        ql, out = layer.integer  # type: ignore[misc]
        layer.mode = q.QAT
        with torch.no_grad():
            fake = layer(codes_in * layer.source.qtensor().scale) / out.scale
        layer.mode = q.INTEGER
        differ = (torch.round(fake) != codes_out).numpy()
        acc = layer._op(codes_in, torch.from_numpy(ql.weight.astype(np.float64)), None)
        shape = (1, -1) + (1,) * (acc.dim() - 2)
        total = acc.round().long().numpy() * ql.mul.reshape(shape) + ql.add.reshape(shape)
        tie = total % (1 << ql.shift) == (1 << ql.shift) >> 1 if ql.shift else total != total
        assert not (differ & ~tie).any(), layer.qualname
        ties += int(differ.sum())
    assert ties <= 4


def test_batch_norm_is_folded_when_qat_starts_and_checkpoints_load_folded() -> None:
    from edgesynth.sim.graph import run

    torch.manual_seed(0)
    net = Network(body(batchnorm=True))
    x = torch.randn(256, *SHAPE)
    net.train()
    with torch.no_grad():
        net(x)  # running statistics away from 0 and 1
        before = net.eval()(x)
        net.start_qat([x])
        net.set_mode(q.FLOAT)
        after = net(x)
    assert all(layer.bn is None for layer in net.layers)
    assert torch.allclose(before, after, atol=1e-4)
    net.set_mode(q.QAT)
    again = Network(body(batchnorm=True))
    again.load_state_dict(net.state_dict())
    again.restore_mode()
    assert again.mode == q.QAT and again.layers[0].bn is None
    quantized = integer_mode(again, SHAPE, "bn")
    with torch.no_grad():
        codes = again.input(x[:16])
        ours = again.body(codes).numpy().astype(np.int64)
    graph = integer_graph(quantized.onnx)
    assert np.array_equal(ours, run(graph, codes.numpy().astype(np.int64))[graph.outputs[0]])


def test_the_fake_quantized_sums_and_averages_give_the_8bit_codes_exactly() -> None:
    """An addition's and an average pooling's QAT forward works on the codes of its inputs:
    the 8-bit mode's codes on the 8-bit mode's own inputs, in float32, ties included."""
    net = trained(residual=True)
    integer_mode(net, SHAPE, "net")
    seen: dict[q.Quantized, tuple] = {}
    found = [m for m in net.layers if isinstance(m, q.Add | q.AvgPool2d)]
    hooks = [m.register_forward_hook(lambda m, i, o: seen.__setitem__(m, (i, o))) for m in found]
    with torch.no_grad():
        net(3 * torch.randn(128, *SHAPE))
    for h in hooks:
        h.remove()
    assert len(found) == 4
    for module in found:
        codes_in, codes_out = seen[module]
        sources = module.sources if isinstance(module, q.Add) else (module.source,)
        module.mode = q.QAT
        with torch.no_grad():
            values = [c.float() * src.qtensor().scale for c, src in zip(codes_in, sources)]  # noqa: B905
            fake = module(*values) / module.integer[1].scale  # type: ignore[index]
        assert torch.equal(torch.round(fake).double(), codes_out), module.qualname
        assert codes_out.abs().max() > 0


@pytest.mark.parametrize("residual", [False, True])
def test_qat_trains_the_clips_and_the_weights(residual: bool) -> None:
    net = trained(steps=0, residual=residual).train()
    x = torch.randn(64, *SHAPE)
    loss = nn.functional.cross_entropy(net(x), torch.randint(0, 5, (64,)))
    loss.backward()
    for layer in net.layers:
        if isinstance(layer, q.Layer):
            assert layer.op.weight.grad is not None and layer.op.weight.grad.abs().sum() > 0
        assert layer.alpha.grad is not None and layer.alpha.grad != 0, layer.qualname


class _Branches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = q.Conv2d(1, 2, 3)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.conv(x) if x.sum() > 0 else x


class _Plus(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = q.Conv2d(1, 1, 3, padding=1)

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.conv(x) + x


@pytest.mark.parametrize(
    "model,message",
    [
        (lambda: nn.Sequential(q.Conv2d(1, 2, 3), nn.ReLU()), "activation='relu'"),
        (lambda: nn.Sequential(q.Conv2d(1, 2, 3), nn.AvgPool2d(2)), "AvgPool2d"),
        (_Branches, "cannot be traced by torch.fx"),
        (lambda: nn.Sequential(nn.Flatten()), "has no edgesynth.quant.qat_gap8 layer"),
        (_Plus, "`add` (add) is not quantized for gap8"),
    ],
)
def test_a_network_gap8_cannot_run_is_refused_by_name(model, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EdgesynthError, match=re.escape(message)):
        Network(model())


def test_the_integer_network_needs_qat_started_and_options_are_checked() -> None:
    with pytest.raises(EdgesynthError, match="has not started QAT"):
        integer_mode(Network(body()), SHAPE)
    with pytest.raises(EdgesynthError, match="weight_bits=3"):
        Network(body(), weight_bits=3)


def test_train_target_gap8_refuses_max_options_and_needs_a_model_file(tmp_path: Path) -> None:
    r = run_cli("train", "--target", "gap8", "--chip", "MAX78002", "--out-dir", tmp_path)
    assert r.exit_code == 1 and "`--chip`: not used with --target gap8" in r.stderr, r.output
    r = run_cli("train", "--target", "gap8", "--dataset", "synthetic", "--out-dir", tmp_path)
    assert r.exit_code == 1 and "give --model-file" in r.stderr, r.output
    model = tmp_path.parent / "gap8_model.py"
    model.write_text("from torch import nn\nclass Net(nn.Module):\n    pass\n")
    policy = tmp_path.parent / "gap8_policy.yaml"
    for text, message in [
        ("start_epoch: 1\nweight_bits: 4\nshift_quantile: 0.9\n", "no shift_quantile"),
        ("start_epoch: 1\nweight_bits: 1\n", "weight_bits 1: gap8 takes 8, 4, 2"),
        ("start_epoch: 2\nweight_bits: 8\n", "QAT starts at epoch 2, with 2 epochs"),
    ]:
        policy.write_text(text)
        r = run_cli(
            "train", "--target", "gap8", "--model-file", f"{model}:Net", "--dataset",
            "synthetic", "--qat-policy", policy, "--epochs", "2", "--out-dir", tmp_path,
        )  # fmt: skip
        assert r.exit_code == 1 and "`--qat-policy`" in r.stderr and message in r.stderr, r.output
    assert not any(tmp_path.iterdir())


def test_export_target_gap8_refuses_other_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "other.pth.tar"
    torch.save({"arch": "x", "state_dict": {}}, path)
    r = run_cli("export", "--target", "gap8", path, "-o", tmp_path / "int.onnx")
    assert r.exit_code == 1 and "not a gap8 QAT checkpoint" in r.stderr, r.output
    assert not (tmp_path / "int.onnx").exists()
