"""Operators and layer shapes beyond the MNIST CNNs, on small seeded networks.

Every case checks the functional model against the integer reference value for value (every
layer dispatched) and against ONNX Runtime within the quantization error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from gati_netcheck import export_module, run_and_compare

from edgesynth.targets.gati import isa


def _data(shape: tuple[int, ...], n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)


def _module(kind: str):  # type: ignore[no-untyped-def]
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 12, 3, padding=1)
            self.c2 = nn.Conv2d(12, 20, 3, stride=2, padding=1)
            self.c3 = nn.Conv2d(20, 16, 1)
            self.bn = nn.BatchNorm2d(12)
            self.f1 = nn.Linear(16 * 4 * 4, 40)
            self.f2 = nn.Linear(40, 6)
            self.head = nn.Linear(20, 6)
            with torch.no_grad():
                self.bn.running_mean.uniform_(-0.3, 0.3)
                self.bn.running_var.uniform_(0.5, 2.0)
                self.bn.weight.uniform_(0.5, 1.5)
                self.bn.bias.uniform_(-0.2, 0.2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if kind == "sigmoid_tanh":
                x = torch.sigmoid(self.bn(self.c1(x)))
                x = torch.tanh(self.c2(F.max_pool2d(x, 2)))
                x = F.relu(self.c3(x))
                return torch.sigmoid(self.f2(F.relu(self.f1(torch.flatten(x, 1)))))
            if kind == "avgpool":
                x = F.avg_pool2d(F.relu(self.c1(x)), 2)  # 16 -> 8
                x = F.avg_pool2d(F.relu(self.c2(x)), 3, stride=1, padding=1, count_include_pad=True)
                x = F.relu(self.c3(x))
                return self.f2(F.relu(self.f1(torch.flatten(x, 1))))
            if kind == "gap":
                x = F.relu(self.bn(self.c1(x)))
                x = F.relu(self.c2(x))
                x = F.adaptive_avg_pool2d(x, 1)
                return torch.flatten(x, 1)
            if kind == "mean":  # x.mean((2, 3)) exports as ReduceMean
                x = F.relu(self.c2(F.relu(self.c1(x))))
                return self.head(x.mean((2, 3)))
            if kind == "standalone":
                x = F.max_pool2d(F.relu(self.c1(x)), 2)
                x = F.max_pool2d(x, 2)  # a second pool: its own (identity) layer
                x = F.relu(F.avg_pool2d(self.c2(x), 2))  # relu after avg pool: identity layer
                return x
            raise AssertionError(kind)

    return Net()


@pytest.mark.parametrize(
    ("kind", "tolerance"),
    [
        ("sigmoid_tanh", 0.03),
        ("avgpool", 0.05),
        ("gap", 0.03),
        ("mean", 0.08),  # a 64-value pairwise tree on int8 loses up to 3 LSB
        ("standalone", 0.06),
    ],
)
def test_network_kinds(kind: str, tolerance: float, tmp_path: Path) -> None:
    path = export_module(_module(kind), tmp_path / f"{kind}.onnx", (3, 16, 16))
    out = run_and_compare(path, _data((3, 16, 16), 200), _data((3, 16, 16), 100, seed=1))
    assert out.y.shape == out.y_ort.shape
    print(f"\n{kind}: max |gati - ort| / max |ort| = {out.rel_error:.4f}")
    assert out.rel_error < tolerance, out.rel_error
    tails = isa.decode_blob(out.prog.blob)[2::4]
    if kind == "sigmoid_tanh":
        acts = [(t["ActType"], t["ActParam"]) for t in tails if t["ActEn"]]
        assert [a for a, _ in acts] == [
            isa.ACT_SIGMOID,
            isa.ACT_TANH,
            isa.ACT_RELU,
            isa.ACT_RELU,
            isa.ACT_SIGMOID,
        ]
        assert all(t["QuantEn"] for t in tails)  # the sigmoid lookup takes int8
    if kind == "gap":
        assert tails[-1]["PoolType"] == isa.POOL_GLOBAL_AVG
        assert (tails[-1]["PoolWidth"], tails[-1]["PoolHeight"]) == (8, 8)
        assert not tails[-1]["QuantEn"]  # the last layer keeps 32-bit values
    if kind == "standalone":
        names = [c.engine for c in out.prog.layers]
        ops = [layer.operation for layer in out.prog.model.chain.layers]
        assert ops == ["conv2d", "none", "conv2d", "none"]
        assert names == ["conv", "conv", "conv", "conv"]
    if kind == "mean":
        graph_ops = [n.op_type for n in onnx.load(str(path)).graph.node]
        assert "ReduceMean" in graph_ops
        assert tails[1]["PoolType"] == isa.POOL_GLOBAL_AVG
        assert isa.decode_blob(out.prog.blob)[9]["Flatten"] == 1
    if kind == "mean":
        graph_ops = [n.op_type for n in onnx.load(str(path)).graph.node]
        assert "ReduceMean" in graph_ops
        assert tails[1]["PoolType"] == isa.POOL_GLOBAL_AVG
        assert isa.decode_blob(out.prog.blob)[9]["Flatten"] == 1
    if kind == "avgpool":
        assert any("3x3" in w for w in out.prog.warnings)
