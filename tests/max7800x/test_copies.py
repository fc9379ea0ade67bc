"""Passthrough copies (`targets/max7800x/copies.py`) on small hand-built integer graphs: a tensor
read in two layouts gets a copy that automatic placement places; the simulator equals the graph
reference and the project reproduces its known answer on the virtual device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from edgesynth.flow import compile_to
from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.targets.base import get_target
from edgesynth.targets.max7800x.copies import with_copies
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.lower import fuse

ACT8 = g.QType(8, True, 1 / 128)
ACC = g.QType(32, True, None)
RNG = np.random.default_rng(11)
SHAPE = (4, 6, 6)


def _add(graph: g.Graph, node: g.Node, shape: tuple[int, ...], qtype: g.QType) -> str:
    node.outputs = [node.name]
    graph.add(node, shape, qtype)
    return node.name


def _conv(graph: g.Graph, name: str, source: str, cin: int = 4, cout: int = 4) -> str:
    """A 3x3 convolution, requantized to int8, ReLU."""
    weight = RNG.integers(-20, 21, (cout, cin, 3, 3))
    conv = g.Conv(name=f"{name}/conv", inputs=[source], outputs=[], weight=weight, pads=(1,) * 4)
    acc = _add(graph, conv, (cout, *SHAPE[1:]), ACC)
    rq = g.Requantize(name=f"{name}/rq", inputs=[acc], outputs=[], mul=1, div=256)
    q = _add(graph, rq, (cout, *SHAPE[1:]), ACT8)
    relu = g.Activation(name=f"{name}/relu", inputs=[q], outputs=[], kind="relu")
    return _add(graph, relu, (cout, *SHAPE[1:]), ACT8)


def _sum(graph: g.Graph, name: str, a: str, b: str) -> str:
    node = g.Eltwise(name=f"{name}/add", inputs=[a, b], outputs=[], kind="add")
    add = _add(graph, node, SHAPE, ACC)
    clip = g.Clip(name=f"{name}/clip", inputs=[add], outputs=[], lo=-128, hi=127)
    return _add(graph, clip, SHAPE, ACT8)


def _graph() -> g.Graph:
    graph = g.Graph(name="copies")
    graph.add_input("input", SHAPE, ACT8)
    return graph


def _proved(graph: g.Graph, folder: Path, device: str = "max78000") -> list[str]:
    """Compile with the proof on the virtual device; check the simulator against the graph
    reference on random inputs; the hardware layers' names."""
    x = RNG.integers(-128, 128, (3, *SHAPE))
    program, _ = compile_to(
        graph, device, options={"sample": x[0]}, out=folder / device, verify=True
    )
    proof = program.proof  # a failing proof raises ProofFailed
    assert proof is not None and proof.matched == proof.total > 0, proof
    got = get_target(device).simulate(program, [x])[0]
    want = run(graph, x, keep=False)[graph.outputs[0]]
    np.testing.assert_array_equal(got, want)
    return [layer.name for layer in program.layers]


def _residual() -> g.Graph:
    """x feeds a convolution and the addition x + conv(x), fused into the last convolution."""
    graph = _graph()
    x = _conv(graph, "first", "input")
    graph.outputs = [_conv(graph, "last", _sum(graph, "res", x, _conv(graph, "block", x)))]
    return graph


def test_a_residual_operand_read_alone_too_is_copied_for_the_addition(tmp_path: Path) -> None:
    """MAX78000: the addition reads a copy of x; the copy reads x alone, as the convolution
    does."""
    names = _proved(_residual(), tmp_path)
    assert names == ["first", "block", "first_copy", "last"]


def test_on_the_max78002_a_residual_operand_is_read_with_a_gap(tmp_path: Path) -> None:
    """MAX78002: x stays the addition's first operand, interleaved; the convolution reading it
    alone reads every other word (`read_gap: 1`), no copy."""
    graph = _residual()
    assert _proved(graph, tmp_path, "max78002") == ["first", "block", "last"]
    text = (tmp_path / "max78002" / "network.yaml").read_text()
    assert text.count("read_gap: 1") == 1
    layers = with_copies(graph, fuse(graph), get_device("MAX78002"))
    assert [layer.read_gap for layer in layers] == [0, 1, 0]


def test_the_network_input_read_alone_and_added_is_copied(tmp_path: Path) -> None:
    graph = _graph()
    graph.outputs = [_sum(graph, "res", "input", _conv(graph, "block", "input"))]
    assert _proved(graph, tmp_path) == ["block", "input_copy", "res"]


def test_a_tensor_added_and_concatenated_is_copied_once(tmp_path: Path) -> None:
    """a is read alone, as an addition's operand and inside a concatenation: the concatenation
    reads a where it is (its parts are found alone), the addition reads a copy."""
    graph = _graph()
    a = _conv(graph, "first", "input")
    b = _sum(graph, "res", a, _conv(graph, "block", a))
    cat = _add(graph, g.Concat(name="cat", inputs=[a, b], outputs=[]), (8, *SHAPE[1:]), ACT8)
    graph.outputs = [_conv(graph, "mix", cat, cin=8)]
    layers = with_copies(graph, fuse(graph), get_device("MAX78000"))
    by_name = {layer.name: layer for layer in layers}
    assert by_name["res"].inputs == [f"{a}#first_copy", _conv_out("block")]
    assert by_name["mix"].inputs == [a, b]
    for device in ("max78000", "max78002"):  # two groups: a copy on the MAX78002 too
        assert _proved(graph, tmp_path, device) == ["first", "block", "first_copy", "res", "mix"]


def _conv_out(name: str) -> str:
    return f"{name}/relu"


def test_a_tensor_added_to_itself_reads_two_copies(tmp_path: Path) -> None:
    graph = _graph()
    x = _conv(graph, "first", "input")
    graph.outputs = [_sum(graph, "twice", x, x)]
    assert _proved(graph, tmp_path) == ["first", "first_copy", "first_copy2", "twice"]


def test_a_tensor_read_alone_and_concatenated_needs_no_copy() -> None:
    graph = _graph()
    a = _conv(graph, "first", "input")
    cat_node = g.Concat(name="cat", inputs=[a, _conv(graph, "b", a)], outputs=[])
    cat = _add(graph, cat_node, (8, *SHAPE[1:]), ACT8)
    graph.outputs = [_conv(graph, "mix", cat, cin=8)]
    layers = fuse(graph)
    assert with_copies(graph, list(layers), get_device("MAX78000")) == layers


def test_layers_the_hints_place_get_no_copy() -> None:
    """A vendor description that places the layers by hand keeps its own layout."""
    graph = _graph()
    x = _conv(graph, "first", "input")
    graph.outputs = [_sum(graph, "res", x, _conv(graph, "block", x))]
    graph.hints["res"] = {"processors": 0xF, "out_offset": 0x1000}
    layers = fuse(graph)
    assert with_copies(graph, list(layers), get_device("MAX78000")) == layers


def test_a_tensor_in_two_concatenations_is_copied_for_the_second(tmp_path: Path) -> None:
    graph = _graph()
    a = _conv(graph, "first", "input")
    b, c = _conv(graph, "b", a), _conv(graph, "c", "input")
    one = _add(graph, g.Concat(name="one", inputs=[a, b], outputs=[]), (8, *SHAPE[1:]), ACT8)
    two = _add(graph, g.Concat(name="two", inputs=[c, a], outputs=[]), (8, *SHAPE[1:]), ACT8)
    mixed = _sum(graph, "out", _conv(graph, "m1", one, cin=8), _conv(graph, "m2", two, cin=8))
    graph.outputs = [mixed]
    names = _proved(graph, tmp_path)
    assert names == ["first", "b", "c", "m1", "first_copy", "m2", "out"]


def _relu(graph: g.Graph, name: str, source: str) -> str:
    relu = g.Activation(name=name, inputs=[source], outputs=[], kind="relu")
    return _add(graph, relu, graph.tensors[source].shape, ACT8)


def _resnet_block(kind: str = "add") -> g.Graph:
    """relu(y + conv(y)), the usual residual block (b's convolution without ReLU, so the sum
    is negative in places), then a convolution."""
    graph = _graph()
    y = _conv(graph, "a", "input")
    weight = RNG.integers(-20, 21, (4, 4, 3, 3))
    conv = g.Conv(name="b/conv", inputs=[y], outputs=[], weight=weight, pads=(1,) * 4)
    rq = g.Requantize(name="b/rq", inputs=[_add(graph, conv, SHAPE, ACC)], outputs=[], div=256)
    elt = g.Eltwise(name="s/add", inputs=[y, _add(graph, rq, SHAPE, ACT8)], outputs=[], kind=kind)
    clip = g.Clip(name="s/clip", inputs=[_add(graph, elt, SHAPE, ACC)], outputs=[], lo=-128, hi=127)
    total = _relu(graph, "s/relu", _add(graph, clip, SHAPE, ACT8))
    graph.outputs = [_conv(graph, "c", total)]
    return graph


@pytest.mark.parametrize("kind", ["add", "sub"])
@pytest.mark.parametrize("device", ["max78000", "max78002"])
def test_an_activation_after_an_addition_is_a_layer_with_an_identity_convolution(
    device: str, kind: str, tmp_path: Path
) -> None:
    """relu(y + conv(y)): the chip activates only a convolution's output, so the addition's layer
    convolves the sum with 1x1 identity kernels (weight 1, 2-bit, output_shift 1: a total shift
    of 7, the sum as it is), then applies the ReLU; on the MAX78002 depthwise (4 kernels, not
    4 x 4). Proved on the virtual device, the simulator equal to the graph's reference."""
    graph = _resnet_block(kind)
    x = RNG.integers(-128, 128, (3, *SHAPE))
    sums = run(graph, x, keep=True)["s/clip"]
    assert sums.min() < 0 < sums.max()  # the ReLU has something to do
    names = _proved(graph, tmp_path, device)
    copy = ["a_copy"] if device == "max78000" else []
    assert names == ["a", "b", *copy, "s", "c"]
    document = yaml.safe_load((tmp_path / device / "network.yaml").read_text())
    entry = next(e for e in document["layers"] if e["name"] == "s")
    depthwise = {"groups": 4} if device == "max78002" else {}
    want = {"eltwise": kind, "operands": 2, "operation": "conv2d", "kernel_size": "1x1", "pad": 0,
            **depthwise, "quantization": 2, "output_shift": 1, "activate": "ReLU"}  # fmt: skip
    assert {key: entry.get(key) for key in want} == want
    assert "groups" in entry or device == "max78000"


def test_a_relu_after_pooling_signed_data_is_an_identity_convolution(tmp_path: Path) -> None:
    """relu(maxpool(conv(x))) with the convolution's output signed: the pooling layer takes an
    identity convolution for its ReLU (a following convolution cannot: it would pool, convolve,
    then activate)."""
    graph = _graph()
    weight = RNG.integers(-20, 21, (4, 4, 3, 3))
    conv = g.Conv(name="b/conv", inputs=["input"], outputs=[], weight=weight, pads=(1,) * 4)
    rq = g.Requantize(name="b/rq", inputs=[_add(graph, conv, SHAPE, ACC)], outputs=[], div=256)
    pool = g.Pool(name="p/pool", inputs=[_add(graph, rq, SHAPE, ACT8)], outputs=[], kind="max",
                  kernel=(2, 2), stride=(2, 2))  # fmt: skip
    pooled = _add(graph, pool, (4, 3, 3), ACT8)
    graph.outputs = [_relu(graph, "p/relu", pooled)]
    for device in ("max78000", "max78002"):
        assert _proved(graph, tmp_path, device) == ["b", "p"]
