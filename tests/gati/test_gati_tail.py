"""Tail-block arithmetic: the pairwise-average tree, requantization rounding, multipliers.

The functional model's tail (`executor/machine.py` `_tail`, driven by a TailBlock instruction) is
checked against hand-computed values and against plain-Python references written here."""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.sim.ops import tree_average
from edgesynth.targets.gati import isa
from edgesynth.targets.gati.executor import machine as funcsim
from edgesynth.targets.gati.quantize import fit_multiplier, quantize_input


def _python_tree(values: list[int]) -> int:
    """The documented tree, one scalar at a time with Python integers."""
    fifo = deque((values[k] + values[k + 1]) // 2 for k in range(0, len(values) - 1, 2))
    if len(values) % 2:
        fifo.append(values[-1])
    while len(fifo) > 1:
        a, b = fifo.popleft(), fifo.popleft()
        fifo.append((a + b) // 2)
    return fifo[0]


def _tree(values: list[int]) -> int:
    return int(tree_average([np.array(v) for v in values]))


def test_tree_average_examples() -> None:
    assert _tree([3, 4]) == 3  # (3 + 4) >> 1
    assert _tree([1, 2, 3, 4]) == 2  # mean 2.5: ((1+2)>>1 + (3+4)>>1) >> 1 = (1 + 3) >> 1
    assert _tree([4, 8, 12]) == 9  # odd: (4+8)>>1 = 6 queued with 12 -> 9 (weights 1/4 1/4 1/2)
    assert _tree([0, 0, 0, 0, 8, 8]) == 4  # FIFO [0, 0, 8] -> [8, 0] -> 4
    assert _tree([16, 0, 0, 0, 0]) == 2  # [8, 0, 0] -> [0, 4] -> 2
    assert _tree([-3, 0]) == -2  # arithmetic shift rounds toward -inf
    assert _tree([7]) == 7


@pytest.mark.parametrize("n", range(1, 21))
def test_tree_matches_python_reference(n: int) -> None:
    rng = np.random.default_rng(n)
    items = [rng.integers(-128, 128, size=30) for _ in range(n)]
    want = [_python_tree([int(v[i]) for v in items]) for i in range(30)]
    assert tree_average(items).tolist() == want


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64])
def test_tree_rounding_loss_for_powers_of_two(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.integers(0, 128, size=(n, 2000))
    tree = tree_average(list(values))
    loss = values.mean(axis=0) - tree
    # each level's shift drops at most half an LSB: never above the mean, at most
    # log2(n) / 2 below it
    assert loss.min() >= 0 and loss.max() <= 0.5 * np.log2(n)
    assert loss.mean() > 0.2  # the loss is real, as the seed says


def _tail(acc: np.ndarray, **fields: int) -> np.ndarray:
    return funcsim._tail(acc, isa.make(isa.TAIL, **fields), None, 0, 0)  # type: ignore[arg-type]


def test_requantize_rounds_half_up_and_saturates() -> None:
    acc = np.array([[1, -1, 3, -3, 2, -2, 10**6, -(10**6)]])
    out = _tail(acc, QuantEn=1, QuantScale=1, QuantShift=1)
    assert out.tolist() == [[1, 0, 2, -1, 1, -1, 127, -128]]
    assert _tail(np.array([[5]]), QuantEn=1, QuantScale=3, QuantShift=0).tolist() == [[15]]
    # without QuantEn the 32-bit accumulator saturates
    assert _tail(np.array([[1 << 33, -5]]), QuantEn=0).tolist() == [[(1 << 31) - 1, -5]]


def test_fit_multiplier() -> None:
    assert fit_multiplier(1.0, "x") == (32768, 15)
    assert fit_multiplier(0.3, "x") == (39322, 17)
    rng = np.random.default_rng(0)
    for m in 10.0 ** rng.uniform(-9, 4, size=200):
        scale, shift = fit_multiplier(float(m), "x")
        assert 0 < scale < 1 << 16 and 0 <= shift < 1 << 5
        if m >= 2**-15:  # 16 significant bits while the 5-bit shift can reach them
            assert abs(scale / 2**shift - m) / m <= 2**-15
        else:
            assert shift == 31 and abs(scale / 2**shift - m) <= 2**-32
    with pytest.raises(EdgesynthError, match="exceeds QuantScale's 16 bits"):
        fit_multiplier(70000.0, "node `a`")
    with pytest.raises(EdgesynthError, match=r"node `b`: .* below 2\*\*-31"):
        fit_multiplier(1e-12, "node `b`")


def test_input_quantization() -> None:
    q = quantize_input(np.array([0.5, -0.5, 1.49, 200.0, -200.0]), 1.0)
    assert q.dtype == np.int8
    assert q.tolist() == [1, 0, 1, 127, -128]


def test_activation_tables() -> None:
    """The sigmoid/tanh module's table against Python's math, value by value."""
    for kind, code, fn in (
        ("sigmoid", isa.ACT_SIGMOID, lambda v: 1 / (1 + math.exp(-v))),
        ("tanh", isa.ACT_TANH, math.tanh),
    ):
        for p in (0, 4, 7):
            want = [
                max(-128, min(127, math.floor(fn(q / 2**p) * 128 + 0.5))) for q in range(-128, 128)
            ]
            assert funcsim._activation_table(code, p).tolist() == want, (kind, p)
    table = funcsim._activation_table(isa.ACT_SIGMOID, 4)
    assert table[[128, 255]].tolist() == [64, 127]  # sigmoid(0) = 0.5 -> 64 at scale 2**-7


def test_tail_block_order() -> None:
    """Bias, then quantization, then activation, then pooling (documented order), on the
    functional model's tail with hand-computed values."""

    class _NoDram:
        def read(self, addr: int, n: int) -> np.ndarray:
            # bias of channel 0 = -3 (8-bit)
            return np.array([[253]], dtype=np.uint8)[:, :n]

    tail = isa.make(
        isa.TAIL,
        BiasEn=1,
        BiasWidth=8,
        BiasStartAddress=0,
        BiasEndAddress=4,
        QuantEn=1,
        QuantScale=1,
        QuantShift=1,
        ActEn=1,
        ActType=isa.ACT_RELU,
        PoolEn=1,
        PoolType=isa.POOL_AVERAGE,
        PoolWidth=2,
        PoolHeight=2,
        PoolStride=2,
    )
    acc = np.array([[[[10, 1], [4, -20]]]])  # (B=1, C=1, 2, 2)
    out = funcsim._tail(acc, tail, _NoDram(), 0, 0)  # type: ignore[arg-type]
    # bias: [7, -2, 1, -23]; quant (x + 1) >> 1: [4, -1, 1, -11]; relu: [4, 0, 1, 0];
    # tree: ((4 + 0) >> 1 + (1 + 0) >> 1) >> 1 = (2 + 0) >> 1 = 1
    assert out.tolist() == [[[[1]]]]
