"""The identity convolution a MAX7800x layer of element-wise operations takes for its activation
(`lower._Fuser.identity`): relu(a op b) as one layer, the operands combined and clipped to int8,
convolved with 1x1 identity kernels (weight 1, 2-bit weights, `output_shift` 1: a total shift
of 7), then the ReLU. On the network simulator, whose output is
clip(floor(acc * 2**shift / 128 + 1/2)) with shift = output_shift + 8 - weight bits, that is
relu(clip(a op b)) exactly: for every pair of int8 operands, and for drawn channel counts
(full 1x1 kernels on the MAX78000, depthwise on the MAX78002), 1-D and 2-D sizes and data
(1-D: the operation, then the identity convolution in a layer of its own, weight 64 at 8
bits, `output_shift` 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.flow import compile_to
from edgesynth.ir import graph as g
from edgesynth.targets.base import get_target

ACT8 = g.QType(8, True, 1 / 128)
ACC = g.QType(32, True, None)
DEVICES = ("max78000", "max78002")


def _block(channels: int, size: tuple[int, ...], kind: str) -> g.Graph:
    """relu(clip(a op b)), a and b the two halves of the input's channels; `size`: (height,
    width) or, 1-D data, (length,)."""
    graph = g.Graph(name="identity")
    graph.add_input("input", (2 * channels, *size), ACT8)
    shape = (channels, *size)

    def add(node: g.Node, qtype: g.QType) -> str:
        node.outputs = [node.name]
        graph.add(node, shape, qtype)
        return node.name

    a, b = (
        add(g.Slice(name=n, inputs=["input"], outputs=[], axis=0, start=k * channels,
                    stop=(k + 1) * channels), ACT8)
        for k, n in enumerate("ab")
    )  # fmt: skip
    total = add(g.Eltwise(name="s/op", inputs=[a, b], outputs=[], kind=kind), ACC)
    clipped = add(g.Clip(name="s/clip", inputs=[total], outputs=[], lo=-128, hi=127), ACT8)
    graph.outputs = [add(g.Activation(name="s/relu", inputs=[clipped], outputs=[], kind="relu"),
                         ACT8)]  # fmt: skip
    return graph


def _check(device: str, kind: str, x: np.ndarray) -> None:
    """The program's simulated output equals relu(clip(a op b)) for the batch `x`: one layer
    for 2-D data; for 1-D data (a Conv1d takes no element-wise operands) the operation, then
    the identity convolution."""
    channels = x.shape[1] // 2
    graph = _block(channels, x.shape[2:], kind)
    program, _ = compile_to(graph, device)
    *first, layer = program.layers
    assert [(f.eltwise, f.op) for f in first] == ([] if x.ndim == 4 else [(kind, None)])
    assert layer.eltwise == (kind if x.ndim == 4 else None)
    assert layer.op is not None and layer.activation == "relu"
    assert layer.op.groups == (channels if device == "max78002" else 1)
    got = get_target(device).simulate(program, [x])[0]
    a, b = x[:, :channels].astype(np.int64), x[:, channels:].astype(np.int64)
    want = np.maximum(np.clip(a + b if kind == "add" else a - b, -128, 127), 0)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def _every_pair() -> np.ndarray:
    """All 65,536 (a, b) pairs of int8 operands: 16 channels of 64 x 64 each."""
    values = np.arange(-128, 128)
    a, b = np.meshgrid(values, values, indexing="ij")
    return np.concatenate([a.reshape(1, 16, 64, 64), b.reshape(1, 16, 64, 64)], axis=1)


@pytest.mark.parametrize("kind", ["add", "sub"])
@pytest.mark.parametrize("device", DEVICES)
def test_every_pair_of_int8_operands(device: str, kind: str) -> None:
    _check(device, kind, _every_pair())


@pytest.mark.parametrize("device", DEVICES)
def test_every_pair_on_the_virtual_device(device: str, tmp_path: Path) -> None:
    """The project compiled with all pairs as its known answer (16 x 64 x 64 outputs) runs on
    the virtual device and reproduces every output word."""
    x = _every_pair()
    program, _ = compile_to(
        _block(16, (64, 64), "add"), device, options={"sample": x[0]}, out=tmp_path, verify=True
    )
    proof = program.proof  # a failing proof raises ProofFailed
    assert proof is not None and proof.matched == proof.total == 16 * 64 * 64 // 4, proof


@st.composite
def _batches(draw: st.DrawFn) -> tuple[str, str, np.ndarray]:
    device = draw(st.sampled_from(DEVICES))
    kind = draw(st.sampled_from(["add", "sub"]))
    channels = draw(st.integers(1, 64))
    size = draw(st.lists(st.integers(1, 6), min_size=1, max_size=2))  # 1-D or 2-D
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(-128, 128, (2, 2 * channels, *size))
    extremes = rng.random(x.shape) < 0.3  # saturate often: -128, 127 and their neighbours
    x[extremes] = rng.choice([-128, -127, -1, 0, 1, 126, 127], int(extremes.sum()))
    return device, kind, x


@settings(max_examples=100, deadline=None)
@given(_batches())
def test_drawn_channels_sizes_and_data(case: tuple[str, str, np.ndarray]) -> None:
    _check(*case)


@pytest.mark.parametrize(
    ("device", "channels", "size", "names"),
    [
        ("max78000", 96, (4, 4), ["s"]),  # 2 operands x 2 passes: the chip convolves the sum
        ("max78000", 192, (4, 4), ["s", "s_relu"]),  # 3 passes: a data move, the identity apart
        ("max78002", 192, (4, 4), ["s"]),
        ("max78000", 8, (20,), ["s", "s_relu"]),  # 1-D: a Conv1d takes no operands
        ("max78000", 100, (20,), ["s", "s_relu"]),
        ("max78002", 100, (20,), ["s", "s_relu"]),
    ],
)
def test_operands_the_convolution_cannot_read(
    device: str, channels: int, size: tuple[int, ...], names: list[str], tmp_path: Path
) -> None:
    """Operands wider than the 64 processors: on the MAX78000 an element-wise operation of more
    than 2 operands x 2 passes runs as a data move that cannot convolve, and a Conv1d takes no
    element-wise operands on either chip: there the sum is a passthrough layer and the identity
    convolution with the ReLU a layer of its own. Proved on the virtual device; the simulator
    equals relu(clip(a + b))."""
    rng = np.random.default_rng(channels)
    x = rng.integers(-128, 128, (2, 2 * channels, *size))
    program, _ = compile_to(
        _block(channels, size, "add"), device, options={"sample": x[0]}, out=tmp_path,
        verify=True,
    )  # fmt: skip
    assert [layer.name for layer in program.layers] == names
    assert program.proof is not None and program.proof.matched == program.proof.total > 0
    got = get_target(device).simulate(program, [x])[0]
    a, b = x[:, :channels], x[:, channels:]
    np.testing.assert_array_equal(got.reshape(a.shape), np.maximum(np.clip(a + b, -128, 127), 0))
