"""The max7800x lowering on small hand-built graphs (no corpus): each test states one rule of
`targets/max7800x/lower.py` and checks the lowered program computes what the graph does."""

from __future__ import annotations

import numpy as np
import pytest

from edgesynth.errors import MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.base import CompileOptions, get_target
from edgesynth.targets.max7800x.lower import fuse

ACT8 = g.QType(8, True, 1 / 128)
ACC = g.QType(32, True, 1 / 128)
RNG = np.random.default_rng(7)


def _graph(shape: tuple[int, ...]) -> g.Graph:
    graph = g.Graph(name="unit")
    graph.add_input("input", shape, ACT8)
    return graph


def _add(graph: g.Graph, node: g.Node, shape: tuple[int, ...], qtype: g.QType) -> str:
    node.outputs = [node.name]
    graph.add(node, shape, qtype)
    return node.name


def _compile_and_compare(graph: g.Graph, x: np.ndarray, device: str = "max78000"):
    target = get_target(device)
    program = target.compile(graph, CompileOptions(options={"sample": x}))
    got = target.simulate(program, [x[None]])[0][0]
    want = run(graph, x[None], keep=False)[graph.outputs[0]][0]
    np.testing.assert_array_equal(got, want)
    return program


def test_a_graph_whose_output_is_its_input_is_one_passthrough_layer() -> None:
    graph = _graph((5, 6, 7))
    graph.outputs = ["input"]
    x = RNG.integers(-128, 128, (5, 6, 7))
    program = _compile_and_compare(graph, x)
    assert [layer.operation for layer in program.layers] == ["none"]
    np.testing.assert_array_equal(program.network.layers[0].in_channels, 5)


def test_a_grouped_transposed_convolution_keeps_its_weights() -> None:
    """Transposed convolutions, depthwise (groups = channels, the MAX78002's only grouping) and
    not: the description's synthetic weights are read back as the graph's own kernels."""
    for channels, groups, out in ((2, 2, 2), (4, 4, 4), (3, 1, 4)):
        graph = _graph((channels, 4, 5))
        weight = RNG.integers(-128, 128, (out, channels // groups, 3, 3))
        conv = g.Conv(
            name="up/conv",
            inputs=["input"],
            outputs=[],
            weight=weight,
            stride=(2, 2),
            pads=(1, 1, 1, 1),
            groups=groups,
            transposed=True,
            output_padding=(1, 1),
        )
        acc = _add(graph, conv, (out, 8, 10), g.QType(32, True, None))
        rq = g.Requantize(name="up/rq", inputs=[acc], outputs=[], mul=1, div=128)
        graph.outputs = [_add(graph, rq, (out, 8, 10), ACT8)]
        x = RNG.integers(-128, 128, (channels, 4, 5))
        program = _compile_and_compare(graph, x, "max78002")
        assert "operation: convtranspose2d" in program.description.yaml_text


def test_operands_of_a_concatenation_read_its_inputs_as_in_sequences() -> None:
    """`Concat -> Slice, Slice -> Add -> Clip` (the element-wise sum of two layers' outputs)
    is one element-wise layer reading both layers."""
    graph = _graph((3, 4, 4))
    outs = []
    for k in range(2):
        weight = RNG.integers(-128, 128, (8, 3, 1, 1))
        conv = g.Conv(name=f"c{k}/conv", inputs=["input"], outputs=[], weight=weight, pads=(0,) * 4)
        acc = _add(graph, conv, (8, 4, 4), g.QType(32, True, None))
        rq = g.Requantize(name=f"c{k}/rq", inputs=[acc], outputs=[], mul=1, div=128)
        outs.append(_add(graph, rq, (8, 4, 4), ACT8))
    cat = _add(graph, g.Concat(name="sum/cat", inputs=outs, outputs=[]), (16, 4, 4), ACT8)
    parts = [
        _add(
            graph,
            g.Slice(
                name=f"sum/op{k}", inputs=[cat], outputs=[], axis=0, start=8 * k, stop=8 * k + 8
            ),
            (8, 4, 4),
            ACT8,
        )
        for k in range(2)
    ]
    add = _add(
        graph, g.Eltwise(name="sum/add", inputs=parts, outputs=[], kind="add"), (8, 4, 4), ACT8
    )
    clip = g.Clip(name="sum/clip", inputs=[add], outputs=[], lo=-128, hi=127)
    graph.outputs = [_add(graph, clip, (8, 4, 4), ACT8)]
    program = _compile_and_compare(graph, RNG.integers(-128, 128, (3, 4, 4)))
    last = program.layers[-1]
    assert (last.eltwise, last.operands, last.inputs) == ("add", 2, outs)


def test_a_processors_hint_too_small_for_the_whole_chip_is_left_to_the_planner() -> None:
    """A vendor description written for `--max-proc 4` maps 7 channels on 4 processors: the
    lowering drops that map (with a warning) and the planner places the layer."""
    graph = _graph((7, 6, 6))
    weight = RNG.integers(-128, 128, (2, 7, 3, 3))
    conv = g.Conv(name="c/conv", inputs=["input"], outputs=[], weight=weight, pads=(1,) * 4)
    acc = _add(graph, conv, (2, 6, 6), g.QType(32, True, None))
    rq = g.Requantize(name="c/rq", inputs=[acc], outputs=[], mul=1, div=256)
    graph.outputs = [_add(graph, rq, (2, 6, 6), ACT8)]
    graph.hints["c"] = {"processors": 0xF, "out_offset": 0x2000}
    program = _compile_and_compare(graph, RNG.integers(-128, 128, (7, 6, 6)))
    text = program.description.yaml_text
    assert "processors" not in text and "out_offset: 8192" in text
    assert any("0x000000000000000f enables 4 processors" in w for w in program.warnings)


def _reading(read) -> g.Graph:
    """input (4, 4, 4) -> `read(graph)` -> 1x1 convolution -> requantize."""
    graph = _graph((4, 4, 4))
    t = read(graph)
    shape = (4, *graph.tensors[t].shape[1:])
    weight = np.ones((4, 4, 1, 1), np.int64)
    _add(graph, g.Conv(name="conv", inputs=[t], outputs=[], weight=weight), shape, ACC)
    _add(graph, g.Requantize(name="rq", inputs=["conv"], outputs=[], div=8), shape, ACT8)
    graph.outputs = ["rq"]
    return graph


def _pool(graph: g.Graph, name: str, source: str, kind: str = "max", pads=(0, 0, 0, 0)) -> str:
    pool = g.Pool(
        name=name, inputs=[source], outputs=[], kind=kind, kernel=(2, 2), stride=(2, 2), pads=pads
    )
    return _add(graph, pool, (4, 2, 2), ACT8)


def _saturated(graph: g.Graph, a: str, b: str, kind: str = "add") -> str:
    shape = graph.tensors[a].shape
    _add(graph, g.Eltwise(name="sum", inputs=[a, b], outputs=[], kind=kind), shape, ACT8)
    return _add(graph, g.Clip(name="sat", inputs=["sum"], outputs=[], lo=-128, hi=127), shape, ACT8)


@pytest.mark.parametrize(
    ("read", "node", "message"),
    [
        (
            lambda gr: _saturated(gr, _pool(gr, "pa", "input"), _pool(gr, "pb", "input"), "mul"),
            "sum",
            "element-wise `mul` has no MAX7800x operation",
        ),
        (
            lambda gr: _pool(gr, "pool", _saturated(gr, "input", "input", "mul")),
            "sum",
            "element-wise `mul` has no MAX7800x operation",
        ),
        (
            lambda gr: _saturated(gr, _pool(gr, "pa", "input"), _pool(gr, "pb", "input", "avg")),
            "pb",
            "operands pooled differently",
        ),
        (
            lambda gr: _pool(gr, "pool", "input", pads=(1, 1, 1, 1)),
            "pool",
            "in-flight pooling has no padding or ceil mode",
        ),
    ],
    ids=["eltwise", "eltwise-then-pool", "pooled-differently", "padded-pool"],
)
def test_what_a_layer_reads_is_refused_naming_the_operator(read, node, message) -> None:
    """The refusals `READ_PATTERNS` name (`device`, `alike`, `padless`), first of the errors."""
    with pytest.raises(MultipleErrors) as caught:
        fuse(_reading(read))
    first = caught.value.errors[0]
    assert (first.node, first.message) == (node, f"operator `{node}`: {message}")
    texts = [str(e) for e in caught.value.errors]
    assert len(texts) == len(set(texts)), texts  # each problem once
