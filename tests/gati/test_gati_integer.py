"""Integer graphs (as the vendor-YAML and edgesynth.nn front ends write them) on Gati: exact where
Gati can express the graph, lowered with a warning where it cannot, refused otherwise.

In every case the functional model running the emitted stream equals `sim.graph.run` of the
program's graph; where the mapping is exact it also equals `sim.graph.run` of the input graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.base import CompileOptions, get_target, read_manifest
from edgesynth.targets.gati.lower_integer import quant_fields

RNG = np.random.default_rng(21)
I8 = g.QType(8, scale=1 / 64)
ACC = g.QType(32)


def _ints(*shape: int, lo: int = -128, hi: int = 128) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape, dtype=np.int64)


class Builder:
    """Append operators to an integer graph, computing shapes with the graph's rules."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.graph = g.Graph("int", source="hand-built")
        self.graph.add_input("x", shape, I8)
        self.cur = "x"

    def add(self, cls: type[g.Node], shape: tuple[int, ...], qtype: g.QType, **kw: object) -> str:
        name = self.graph.unique_name(cls.op)
        self.graph.add(cls(name=name, inputs=[self.cur], outputs=[name], **kw), shape, qtype)
        self.cur = name
        return name

    def shape(self) -> tuple[int, ...]:
        return self.graph.tensors[self.cur].shape

    def conv(self, out: int, pad: int = 1) -> str:
        c, h, w = self.shape()
        weight, bias = _ints(out, c, 3, 3), _ints(out, lo=-4000, hi=4000)
        shape = (out, h + 2 * pad - 2, w + 2 * pad - 2)
        return self.add(g.Conv, shape, ACC, weight=weight, bias=bias, pads=(pad,) * 4)

    def requant(self, mul: int = 1, div: int = 1 << 10, **kw: object) -> str:
        return self.add(g.Requantize, self.shape(), I8, mul=mul, div=div, **kw)

    def pool(self, kind: str, method: str = "trunc") -> str:
        c, h, w = self.shape()
        return self.add(
            g.Pool, (c, h // 2, w // 2), I8, kind=kind, kernel=(2, 2), stride=(2, 2), method=method
        )

    def done(self) -> g.Graph:
        self.graph.outputs = [self.cur]
        self.graph.validate()
        return self.graph


def max78000_style(relu_as_clip: bool = False) -> g.Graph:
    """conv-requant-relu, pool before the next conv (MAX7800x order), conv-requant-relu,
    flatten, a 32-bit linear output."""
    b = Builder((3, 8, 8))
    b.conv(8)
    b.requant()
    if relu_as_clip:
        b.add(g.Clip, b.shape(), I8, lo=0, hi=127)
    else:
        b.add(g.Activation, b.shape(), I8, kind="relu")
    b.pool("max")
    b.conv(6)
    b.requant(mul=3, div=1 << 12, lo=0, hi=127)  # saturating to [0, 127] is a ReLU
    b.add(g.Flatten, (96,), I8)
    b.add(g.Linear, (5,), ACC, weight=_ints(5, 96), bias=_ints(5, lo=-9000, hi=9000))
    return b.done()


def _compile(graph: g.Graph, tmp: Path | None = None):  # type: ignore[no-untyped-def]
    target = get_target("gati")
    program = target.compile(graph, CompileOptions())
    x = _ints(40, *graph.tensors["x"].shape)
    (hw,) = target.simulate(program, [x])
    sim = run(program.graph, x, keep=False)[program.graph.outputs[0]]
    assert np.array_equal(hw, sim)  # the functional model computes the program's graph
    if tmp is not None:  # and the emitted files reload to the same program
        files = target.emit(program, tmp)
        assert "compiled.json" in files and "sample.dwp" not in files
        loaded = target.load(tmp, read_manifest(tmp))
        assert np.array_equal(target.run(loaded, [x])[0], hw)
    return program, x, hw


@pytest.mark.parametrize("relu_as_clip", [False, True])
def test_exact_mapping(relu_as_clip: bool, tmp_path: Path) -> None:
    graph = max78000_style(relu_as_clip)
    program, x, hw = _compile(graph, tmp_path)
    assert program.warnings == []
    want = run(graph, x, keep=False)[graph.outputs[0]]
    assert np.array_equal(hw, want)  # bit for bit what the input graph says
    layers = program.model.chain.layers
    assert [(fl.kind, fl.activation, fl.pool and fl.pool.type) for fl in layers] == [
        ("conv", "relu", "max"),  # the pool before conv 2 is layer 1's tail pooling
        ("conv", "relu", None),
        ("linear", None, None),
    ]
    gl = program.layers
    assert (gl[0].quant_scale, gl[0].quant_shift) == (1, 10)
    assert (gl[1].quant_scale, gl[1].quant_shift) == (3, 12)
    assert [layer.quant_en for layer in gl] == [True, True, False]
    assert gl[0].bias_width == 32 and np.array_equal(gl[0].bias, graph.nodes[0].bias)
    assert program.inputs[0].scale == I8.scale and program.outputs[0].bits == 32
    manifest = read_manifest(tmp_path)
    assert manifest["target"] == "gati" and manifest["inputs"][0]["scale"] == I8.scale


def test_sigmoid_lookup_and_vector_input() -> None:
    b = Builder((12,))
    b.graph = g.Graph("vec", source="hand-built")
    b.graph.add_input("x", (12,), I8)
    b.add(g.Linear, (10,), ACC, weight=_ints(10, 12), bias=_ints(10, lo=-50, hi=50))
    b.requant(mul=1, div=1 << 6)
    b.add(g.Activation, (10,), g.QType(8, scale=2**-7), kind="sigmoid", exponent=4)
    b.add(g.Linear, (3,), ACC, weight=_ints(3, 10), bias=_ints(3))
    graph = b.done()
    program, x, hw = _compile(graph)
    assert program.warnings == []
    assert program.layers[0].act_param == 4 and program.layers[0].bias_width == 8
    assert np.array_equal(hw, run(graph, x, keep=False)[graph.outputs[0]])


def test_inexact_mapping_warns() -> None:
    """A max pool on the (signed) input, a truncating average, a divisor that is not a power
    of two and floor rounding: lowered, each with a warning saying what differs."""
    b = Builder((3, 8, 8))
    b.pool("max")  # the input can be negative: Gati's max starts at 0
    b.conv(8)
    b.requant(mul=1, div=3000, rounding="floor")
    b.add(g.Activation, b.shape(), I8, kind="relu")
    b.pool("avg", method="trunc")
    b.conv(4)
    b.requant(mul=5, div=1 << 11)
    graph = b.done()
    program, x, hw = _compile(graph)
    text = "\n".join(program.warnings)
    assert "max pooling over values that can be negative" in text
    assert "x * 1 / 3000 has no exact QuantScale/QuantShift" in text
    assert "rounds the requantization `floor`; Gati rounds half up" in text
    assert "averages 2x2 windows rounding `trunc`" in text
    assert len(program.warnings) == 4
    want = run(graph, x, keep=False)[graph.outputs[0]]
    diff = np.abs(hw - want)
    assert 0 < diff.max() <= 16 and diff.mean() < 2  # close, not equal: what the warnings say


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ("per_channel", "per-channel requantization multiplier has no Gati field"),
        ("bounds", r"saturates to \[-64, 63\]; Gati's tail saturates to int8"),
        ("no_requant", "32-bit output feeds another layer"),
        ("wide_weights", r"weights -300\.\.300 do not fit Gati's int8 engines"),
        ("residual", "integer graphs map onto Gati only as a chain"),
    ],
)
def test_refusals(edit: str, match: str) -> None:
    b = Builder((3, 8, 8))
    conv = b.conv(4)
    node = b.graph.node(conv)
    if edit == "wide_weights":
        node.weight[0, 0, 0, :2] = [-300, 300]
    if edit == "per_channel":
        b.requant(mul=np.array([1, 2, 1, 1]))
    elif edit == "bounds":
        b.requant(lo=-64, hi=63)
    elif edit != "no_requant":
        b.requant()
    if edit == "residual":
        first = b.cur
        b.conv(4)
        b.requant()
        b.graph.add(
            g.Eltwise(name="sum", inputs=[first, b.cur], outputs=["sum"], kind="add"),
            b.shape(),
            I8,
        )
        b.cur = "sum"
    b.conv(2)
    graph = b.done()
    with pytest.raises(EdgesynthError, match=match):
        get_target("gati").compile(graph, CompileOptions())


def test_quant_fields() -> None:
    cases = {(1, 1 << 7): (1, 7), (6, 1 << 11): (3, 10), (16, 1): (16, 0), (3, 4): (3, 2)}
    for (mul, div), want in cases.items():
        warnings: list[str] = []
        req = g.Requantize(name="r", inputs=["a"], outputs=["b"], mul=mul, div=div)
        assert quant_fields(req, "r", warnings) == want and not warnings
    warnings = []
    req = g.Requantize(name="r", inputs=["a"], outputs=["b"], mul=1 << 17, div=3)
    scale, shift = quant_fields(req, "r", warnings)
    assert abs(scale / 2**shift - (1 << 17) / 3) / ((1 << 17) / 3) < 2**-15 and warnings
