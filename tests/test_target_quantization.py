"""Every registered target declares its number format (`ir.numformat`) and its fusion
patterns (`ir.fusion`), and the declarations say what its code does."""

from __future__ import annotations

import numpy as np
import pytest

from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Pattern, TreePattern
from edgesynth.ir.numformat import NumberFormat, check_format
from edgesynth.targets.base import get_target, target_names

NAMES = target_names()


@pytest.mark.parametrize("name", NAMES)
def test_every_target_declares_a_number_format_and_fusion_patterns(name: str) -> None:
    target = get_target(name)
    fmt = target.number_format()
    assert isinstance(fmt, NumberFormat)
    check_format(fmt, name)
    patterns = target.fusion_patterns()
    assert patterns and all(isinstance(p, Pattern) for p in patterns)
    assert len({p.name for p in patterns}) == len(patterns)
    reads = target.read_patterns()
    assert all(isinstance(p, TreePattern) for p in reads)
    assert len({p.name for p in reads}) == len(reads)


def test_gatis_format_is_its_tail_blocks_fields() -> None:
    from edgesynth.targets.gati import isa
    from edgesynth.targets.gati.device import NUMBER_FORMAT

    tail = isa.TAIL.by_name
    assert tail["QuantScale"].max == (1 << NUMBER_FORMAT.mul_bits) - 1
    assert tail["QuantShift"].max == NUMBER_FORMAT.shift_max


def test_xdnns_format_is_its_device_fields() -> None:
    from edgesynth.targets.xdnn import device as dev

    fmt = dev.NUMBER_FORMAT
    assert (1 << fmt.mul_bits) - 1 == dev.SCALE_MAX and fmt.shift_max == dev.POSTSHIFT_MAX
    assert dev.avgpool_multiplier(4) == (128, 9)  # 1/4 = 128 / 2**9, the largest shift that fits
    assert dev.avgpool_multiplier(1, 1e6) == (0, 0)  # no scale fits


def _float_line(*ops: str) -> g.Graph:
    """x (4, 4, 4) -> conv 3x3 -> ops ... (float)."""
    rng = np.random.default_rng(0)
    gr = g.Graph("line")
    gr.add_input("x", (4, 4, 4))
    w = rng.normal(size=(4, 4, 3, 3))
    conv = g.Conv(name="conv", inputs=["x"], outputs=["c"], weight=w, bias=np.zeros(4))
    conv.pads = (1, 1, 1, 1)
    gr.add(conv, (4, 4, 4))
    prev, shape = "c", (4, 4, 4)
    for i, op in enumerate(ops):
        out = f"t{i}"
        if op == "relu":
            node: g.Node = g.Activation(name=op, inputs=[prev], outputs=[out], kind="relu")
        else:
            node = g.Pool(
                name=op, inputs=[prev], outputs=[out], kind="max", kernel=(2, 2), stride=(2, 2)
            )
            shape = (4, 2, 2)
        gr.add(node, shape)
        prev = out
    gr.outputs = [prev]
    return gr


def test_gatis_pattern_is_one_layer() -> None:
    """Its megablock pattern (conv, activation, pooling) fuses into one Gati layer."""
    from edgesynth.ir.fusion import Matcher
    from edgesynth.targets.gati.lower import FUSION_PATTERNS, fuse

    gr = _float_line("relu", "pool")
    assert len(Matcher(gr).follow(gr.nodes[0], FUSION_PATTERNS[0])) == 3
    layers = fuse(gr).chain.layers
    assert len(layers) == 1 and set(layers[0].nodes) == {"conv", "relu", "pool"}


def test_gatis_eltwise_pattern_is_one_layer() -> None:
    """Its element-wise pattern (add of two maps, ReLU, pooling) fuses into one Gati layer."""
    from edgesynth.ir.fusion import Matcher
    from edgesynth.targets.gati.lower import FUSION_PATTERNS, fuse

    gr = _float_line()
    gr.add(g.Eltwise(name="add", inputs=["x", "c"], outputs=["s"], kind="add"), (4, 4, 4))
    gr.add(g.Activation(name="relu", inputs=["s"], outputs=["r"], kind="relu"), (4, 4, 4))
    pool = g.Pool(
        name="pool", inputs=["r"], outputs=["y"], kind="max", kernel=(2, 2), stride=(2, 2)
    )
    gr.add(pool, (4, 2, 2))
    gr.outputs = ["y"]
    eltwise = next(p for p in FUSION_PATTERNS if p.name == "eltwise")
    assert len(Matcher(gr).follow(gr.nodes[1], eltwise)) == 3
    layers = fuse(gr).chain.layers
    assert [(x.kind, x.nodes) for x in layers] == [
        ("conv", ["conv"]),
        ("eltwise", ["add", "relu", "pool"]),
    ]


def test_gatis_moves_go_on_with_the_pattern() -> None:
    """A ReLU after a ReLU joins the layer (a move), and the pattern's pooling still follows."""
    from edgesynth.targets.gati.lower import fuse

    gr = _float_line()
    gr.add(g.Activation(name="relu1", inputs=["c"], outputs=["r1"], kind="relu"), (4, 4, 4))
    gr.add(g.Activation(name="relu2", inputs=["r1"], outputs=["r2"], kind="relu"), (4, 4, 4))
    pool = g.Pool(
        name="pool", inputs=["r2"], outputs=["y"], kind="max", kernel=(2, 2), stride=(2, 2)
    )
    gr.add(pool, (4, 2, 2))
    gr.outputs = ["y"]
    layers = fuse(gr).chain.layers
    assert len(layers) == 1 and layers[0].nodes == ["conv", "relu1", "relu2", "pool"]


def test_max7800xs_pattern_is_one_layer() -> None:
    """Its operation pattern (conv, requantize, ReLU, clip) fuses into one hardware layer."""
    from edgesynth.ir.fusion import Matcher
    from edgesynth.targets.max7800x.lower import FUSION_PATTERNS, fuse

    i8 = g.QType(8, True, 1 / 64)
    gr = g.Graph("line")
    gr.add_input("x", (4, 4, 4), i8)
    w = np.ones((4, 4, 3, 3), np.int64)
    conv = g.Conv(name="conv", inputs=["x"], outputs=["acc"], weight=w, bias=None)
    conv.pads = (1, 1, 1, 1)
    gr.add(conv, (4, 4, 4), g.QType(32, True, 1 / 64))
    rq = g.Requantize(name="rq", inputs=["acc"], outputs=["q"], mul=1, div=8)
    gr.add(rq, (4, 4, 4), i8)
    gr.add(g.Activation(name="relu", inputs=["q"], outputs=["r"], kind="relu"), (4, 4, 4), i8)
    gr.add(g.Clip(name="clip", inputs=["r"], outputs=["y"], lo=0, hi=127), (4, 4, 4), i8)
    gr.outputs = ["y"]
    assert len(Matcher(gr).follow(gr.nodes[0], FUSION_PATTERNS[0])) == 4
    layers = fuse(gr)
    assert len(layers) == 1 and set(layers[0].nodes) == {"conv", "rq", "relu", "clip"}


def test_max7800xs_read_patterns_are_what_its_layer_reads() -> None:
    """An int8 sum of two operands pooled alike ("pooled operands") is read by the convolution
    after it: one hardware layer, pooling first, taken in the pattern's order."""
    from edgesynth.ir.fusion import Edge, Matcher
    from edgesynth.targets.max7800x.lower import READS, fuse

    i8 = g.QType(8, True, 1 / 64)
    gr = g.Graph("sum")
    gr.add_input("x", (4, 4, 4), i8)
    for name, src in (("pa", "x"), ("pb", "x")):
        pool = g.Pool(
            name=name, inputs=[src], outputs=[name + "_y"], kind="max", kernel=(2, 2), stride=(2, 2)
        )
        gr.add(pool, (4, 2, 2), i8)
    gr.add(g.Eltwise(name="add", inputs=["pa_y", "pb_y"], outputs=["s"], kind="add"), (4, 2, 2), i8)
    gr.add(g.Clip(name="sat", inputs=["s"], outputs=["c"], lo=-128, hi=127), (4, 2, 2), i8)
    w = np.ones((4, 4, 1, 1), np.int64)
    conv = g.Conv(name="conv", inputs=["c"], outputs=["acc"], weight=w, bias=None)
    gr.add(conv, (4, 2, 2), g.QType(32, True, 1 / 64))
    gr.add(g.Requantize(name="rq", inputs=["acc"], outputs=["y"], mul=1, div=8), (4, 2, 2), i8)
    gr.outputs = ["y"]
    guards = {"int8": lambda node, _: True}
    match = Matcher(gr).first(READS, [Edge("c", conv)], guards=guards)
    assert match is not None and match.pattern.name == "pooled operands"
    [layer] = fuse(gr)
    assert layer.nodes == ["conv", "sat", "add", "pa", "pb", "rq"]
    assert (layer.eltwise, layer.operands, layer.pool_first, layer.inputs) == (
        "add",
        2,
        True,
        ["x", "x"],
    )
