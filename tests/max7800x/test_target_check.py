"""`compile -t max78000|max78002` refuses a graph with every problem it has at once.

The lowering (integer graphs) and the quantizer (float graphs) report every operator the chip
cannot run in one `MultipleErrors`, each naming its operator; one problem alone is reported as it
always was. A convolution the chip has no hardware for (a 5x5 or 7x7 kernel, stride 3) is a
device rule naming the layer, the key and the allowed values, also where edgesynth chooses the
placement (never "a defect in edgesynth's planner").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.targets.base import CompileOptions, get_target
from edgesynth.targets.max7800x.device import get_device

DEVICES = ["max78000", "max78002"]
I8 = g.QType(8, scale=1 / 64)
ACC = g.QType(32)
SHAPE = (3, 8, 8)


class Net:
    """A small graph built node by node (integer, or float where `integer` is False)."""

    def __init__(self, integer: bool = True) -> None:
        self.integer = integer
        self.rng = np.random.default_rng(3)
        self.graph = g.Graph("net", source="hand-built")
        self.graph.add_input("x", SHAPE, I8 if integer else None)
        self.cur = "x"

    def add(self, cls: type[g.Node], shape: tuple[int, ...], qtype: g.QType, **kw: Any) -> str:
        name = kw.pop("name", None) or self.graph.unique_name(cls.op)
        inputs = kw.pop("inputs", [self.cur])
        self.graph.add(cls(name=name, inputs=inputs, outputs=[name], **kw), shape, qtype)
        if not self.integer:
            self.graph.tensors[name].qtype = None
        self.cur = name
        return name

    def conv(
        self, out: int, k: int = 3, stride: int = 1, name: str = "conv", act: str = "relu"
    ) -> None:
        c, h, _ = self.graph.tensors[self.cur].shape
        size = (h + 2 * (k // 2) - k) // stride + 1
        weight = self.rng.integers(-128, 128, size=(out, c, k, k))
        bias = 128 * self.rng.integers(-30, 30, size=out)
        if not self.integer:
            weight, bias = weight / 512, bias / 1e4
        pads = (k // 2,) * 4
        shape = (out, size, size)
        self.add(
            g.Conv, shape, ACC, name=name, weight=weight, bias=bias, pads=pads, stride=(stride,) * 2
        )
        if self.integer:
            self.add(g.Requantize, shape, I8, mul=1, div=1 << 10)
        self.add(g.Activation, shape, I8, name=f"{name}_{act}", kind=act)

    def linear(self) -> g.Graph:
        n = int(np.prod(self.graph.tensors[self.cur].shape))
        self.add(g.Flatten, (n,), I8)
        weight = self.rng.integers(-128, 128, size=(5, n))
        self.add(g.Linear, (5,), ACC, weight=weight if self.integer else weight / 512, bias=None)
        self.graph.outputs = [self.cur]
        self.graph.validate()
        return self.graph


def compile_error(name: str, graph: g.Graph) -> EdgesynthError:
    calibration = None if graph.is_integer else np.random.default_rng(1).normal(size=(8, *SHAPE))
    with pytest.raises(EdgesynthError) as info:
        get_target(name).compile(graph, CompileOptions(calibration=calibration))
    return info.value


def broken(integer: bool) -> g.Graph:
    """A softmax in the middle and a product of two activations (nodes `mid_softmax`,
    `product`), then a layer with an activation the chip lacks (`conv2_tanh`)."""
    net = Net(integer)
    net.conv(8)
    net.add(g.Softmax, (8, 8, 8), I8, name="mid_softmax")
    net.add(g.Eltwise, (8, 8, 8), I8, name="product", kind="mul", inputs=[net.cur, net.cur])
    net.conv(8, name="conv2", act="tanh")
    return net.linear()


@pytest.mark.parametrize("name", DEVICES)
def test_integer_graph_reports_every_refused_operator(name: str) -> None:
    err = compile_error(name, broken(integer=True))
    assert isinstance(err, MultipleErrors)
    assert [e.message for e in err.errors] == [
        "operator `conv2_tanh`: activation `tanh` has no MAX7800x equivalent (ReLU, Abs)",
        "operator `mid_softmax`: `softmax` has no place in a MAX7800x layer here",
        "operator `product`: `eltwise` has no place in a MAX7800x layer here",
    ]


@pytest.mark.parametrize("name", DEVICES)
def test_float_graph_reports_every_refused_operator(name: str) -> None:
    err = compile_error(name, broken(integer=False))
    assert isinstance(err, MultipleErrors)
    assert len(err.errors) == 3, str(err)
    first, second, third = (e.render() for e in err.errors)
    assert first.startswith("hand-built: operator `mid_softmax` is a softmax in the middle")
    assert second == "operator `product`: MAX7800x has no float `mul`"
    assert third == "operator `conv2_tanh`: MAX7800x has no tanh activation"


def test_one_refused_operator_is_reported_alone() -> None:
    net = Net()
    net.conv(8)
    net.add(g.Softmax, (8, 8, 8), I8, name="mid_softmax")
    err = compile_error("max78000", net.linear())
    assert type(err) is not MultipleErrors
    assert str(err) == "operator `mid_softmax`: `softmax` has no place in a MAX7800x layer here"


def test_a_refused_operator_leaves_its_neighbours_unreported() -> None:
    """A requantization the chip cannot do is the one problem: the activation after it, which
    then has no layer, is not reported as well."""
    net = Net()
    net.conv(8)
    net.graph.node(net.graph.producer(net.graph.node(net.cur).inputs[0]).name).mul = 3  # type: ignore[union-attr]
    err = compile_error("max78000", net.linear())
    assert type(err) is not MultipleErrors
    assert "requantizes to int8 by a power of two" in str(err)


@pytest.mark.parametrize("name", DEVICES)
@pytest.mark.parametrize("kernel", [5, 7])
def test_a_kernel_the_chip_lacks_is_a_device_rule(name: str, kernel: int) -> None:
    net = Net()
    net.conv(8, k=kernel)
    text = str(compile_error(name, net.linear()))
    allowed = " or ".join(f"{k}x{k}" for k in get_device(name.upper()).conv2d_kernel_sizes)
    assert (
        f"hand-built: layer 0 (conv): `kernel_size`: {kernel}x{kernel} is not a Conv2d kernel "
        f"size the hardware has; use {allowed}" in text
    )
    assert "defect" not in text


@pytest.mark.parametrize("name", DEVICES)
def test_a_stride_the_chip_lacks_is_a_device_rule(name: str) -> None:
    net = Net()
    net.conv(8, stride=3)
    err = compile_error(name, net.linear())
    stride = get_device(name.upper()).conv1d_stride
    assert str(err) == (
        f"hand-built: layer 0 (conv): `stride`: 3: the hardware convolves with stride {stride} "
        f"only; use `pool_stride` (with pooling) to subsample, or a stride-{stride} layer "
        "followed by pooling."
    )


def test_every_layer_the_description_refuses_is_reported() -> None:
    """Biases that are no multiple of the chip's bias unit, in two layers: both named."""
    net = Net()
    net.conv(8, name="conv")
    net.conv(8, name="conv2")
    for name in ("conv", "conv2"):
        node = net.graph.node(name)
        node.bias = node.bias + 1  # type: ignore[attr-defined]
    err = compile_error("max78000", net.linear())
    assert isinstance(err, MultipleErrors)
    unit = get_device("MAX78000").bias_div
    assert [e.message for e in err.errors] == [
        f"operator `{name}`: the bias must be a multiple of {unit} accumulator units"
        for name in ("conv", "conv2")
    ]
