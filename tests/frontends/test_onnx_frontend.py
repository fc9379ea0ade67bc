"""The ONNX front end: `sim.graph.run` of the float graph equals ONNX Runtime, for every supported
operator (onnx.helper graphs) and for torch.onnx exports at several opsets; `passes.simplify`
keeps the values; refusals name the file, the node, the operator and what is supported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx import SUPPORTED_OPS, load_onnx
from edgesynth.ir import graph as g
from edgesynth.ir.passes import simplify
from edgesynth.sim.graph import run

RNG = np.random.default_rng(5)
n = helper.make_node


def _init(name: str, *shape: int, scale: float = 0.5, lo: float | None = None) -> onnx.TensorProto:
    if lo is not None:
        value = RNG.uniform(lo, lo + scale, shape)
    else:
        value = RNG.standard_normal(shape) * scale
    return numpy_helper.from_array(value.astype(np.float32), name)


def _ints(name: str, values: list[int] | int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _save(
    tmp: Path,
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    inputs: dict[str, list[int | str]],
    outputs: tuple[str, ...] = ("y",),
    opset: int = 13,
) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp / "m.onnx"
    onnx.save(model, str(path))
    return path


def _compare(path: Path, data: dict[str, np.ndarray], rtol: float = 1e-5) -> g.Graph:
    """ORT == sim.graph.run of the graph, before and after `simplify`, for every output."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = dict(zip(names, sess.run(None, data), strict=True))
    graph = load_onnx(path)
    assert graph.outputs == names
    for version in (graph, simplify(graph)):
        got = run(version, dict(data), keep=False)
        for name in names:
            scale = max(float(np.abs(want[name]).max()), 1.0)
            np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-5 * scale)
    return graph


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- one case per operator family, written with onnx.helper --------------------------------

CASES = {
    "conv2d_pads_strides_dilation_groups": (
        [
            n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 0, 2, 1], strides=[2, 1]),
            n("Conv", ["c1", "w2"], ["c2"], dilations=[2, 2], pads=[2, 1, 1, 0]),
            n("Conv", ["c2", "w3", "b3"], ["c3"], group=3, auto_pad="SAME_UPPER", strides=[2, 2]),
            n("Conv", ["c3", "w4"], ["y"], auto_pad="SAME_LOWER"),
        ],
        [_init("w1", 6, 2, 3, 3), _init("b1", 6), _init("w2", 6, 6, 3, 2), _init("w3", 9, 2, 2, 2),
         _init("b3", 9), _init("w4", 2, 9, 2, 3)],
        {"x": ["N", 2, 9, 8]},
    ),
    "conv1d_and_pool1d": (
        [
            n("Conv", ["x", "w", "b"], ["c"], pads=[1, 2]),
            n("MaxPool", ["c"], ["p"], kernel_shape=[3], strides=[2], ceil_mode=1),
            n("AveragePool", ["p"], ["y"], kernel_shape=[2], pads=[1, 1]),
        ],
        [_init("w", 5, 3, 4), _init("b", 5)],
        {"x": ["N", 3, 17]},
    ),
    "conv_transpose": (
        [
            n("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1],
              output_padding=[1, 1]),
            n("ConvTranspose", ["c", "w2"], ["y"], group=2, strides=[1, 2], pads=[0, 1, 1, 0]),
        ],
        [_init("w", 3, 4, 3, 3), _init("b", 4), _init("w2", 4, 3, 2, 3)],
        {"x": ["N", 3, 5, 6]},
    ),
    "gemm_alpha_beta_trans_and_matmul": (
        [
            n("Flatten", ["x"], ["f"]),
            n("Gemm", ["f", "wa", "ba"], ["g1"], alpha=0.5, beta=2.0),
            n("Gemm", ["g1", "wb", "bb"], ["g2"], transB=1),
            n("MatMul", ["g2", "wc"], ["m"]),
            n("Add", ["bc", "m"], ["y"]),  # constant first
        ],
        [_init("wa", 24, 7), _init("ba", 1, 7), _init("wb", 5, 7), _init("bb", 1),
         _init("wc", 5, 3), _init("bc", 3)],
        {"x": ["N", 2, 3, 4]},
    ),
    "batchnorm_activations_clip": (
        [
            n("Conv", ["x", "w"], ["c"]),
            n("BatchNormalization", ["c", "g", "bb", "m", "v"], ["bn"], epsilon=1e-3),
            n("Sigmoid", ["bn"], ["s"]),
            n("BatchNormalization", ["s", "g", "bb", "m", "v"], ["bn2"]),  # not after a conv
            n("Tanh", ["bn2"], ["t"]),
            n("Abs", ["t"], ["a"]),
            n("Clip", ["a", "lo", "hi"], ["cl"]),
            n("Relu", ["cl"], ["y"]),
        ],
        [_init("w", 4, 2, 3, 3), _init("g", 4, lo=0.5), _init("bb", 4), _init("m", 4),
         _init("v", 4, lo=0.5), numpy_helper.from_array(np.array(0.1, np.float32), "lo"),
         numpy_helper.from_array(np.array(0.6, np.float32), "hi")],
        {"x": ["N", 2, 6, 6]},
    ),
    "pools_2d": (
        [
            n("MaxPool", ["x"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
              ceil_mode=1),
            n("AveragePool", ["p1"], ["p2"], kernel_shape=[3, 2], pads=[1, 0, 1, 1],
              count_include_pad=0),
            n("AveragePool", ["p2"], ["p3"], kernel_shape=[2, 2], pads=[1, 1, 0, 0],
              count_include_pad=1, ceil_mode=1, strides=[2, 2]),
            n("MaxPool", ["p3"], ["p4"], kernel_shape=[2, 2], dilations=[2, 1], pads=[1, 0, 0, 1]),
            n("MaxPool", ["p4"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
        ],
        [],
        {"x": ["N", 3, 13, 11]},
    ),
    "global_pools_and_reductions": (
        [
            n("GlobalAveragePool", ["x"], ["ga"]),
            n("GlobalMaxPool", ["x"], ["gm"]),
            n("ReduceMean", ["x"], ["rm"], axes=[2, 3], keepdims=0),
            n("ReduceMax", ["x"], ["rx"], axes=[-1, -2], keepdims=1),
            n("Flatten", ["ga"], ["fa"]),
            n("Sub", ["fa", "rm"], ["d"]),
            n("Flatten", ["rx"], ["fx"]),
            n("Concat", ["d", "fx"], ["y"], axis=1),
        ],
        [],
        {"x": ["N", 4, 5, 7]},
    ),
    "elementwise_broadcast_and_residual": (
        [
            n("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            n("Mul", ["c", "scale"], ["m"]),
            n("Div", ["m", "two"], ["dv"]),
            n("Sub", ["dv", "shift"], ["s"]),
            n("Add", ["s", "x"], ["r"]),  # residual: x is read twice
            n("Relu", ["r"], ["y"]),
        ],
        [_init("w", 3, 3, 3, 3), _init("scale", 3, 1, 1), _init("shift", 1, 3, 1, 1),
         numpy_helper.from_array(np.array(2.0, np.float32), "two")],
        {"x": ["N", 3, 6, 6]},
    ),
    "concat_slice_squeeze_several_outputs": (
        [
            n("Conv", ["x", "w"], ["a"]),
            n("Relu", ["x"], ["b"]),
            n("Concat", ["a", "b"], ["c"], axis=1),
            n("Slice", ["c", "st", "en", "ax", "sp"], ["s"]),
            n("GlobalAveragePool", ["s"], ["gp"]),
            n("Squeeze", ["gp", "sq"], ["v"]),
            n("Unsqueeze", ["v", "us"], ["y2"]),
            n("Identity", ["v"], ["y"]),
        ],
        [_init("w", 4, 2, 1, 1), _ints("st", [1, 0]), _ints("en", [6, 3]), _ints("ax", [1, 3]),
         _ints("sp", [2, 1]), _ints("sq", [2, 3]), _ints("us", [2])],
        {"x": ["N", 2, 4, 4]},
        ("y", "y2"),
    ),
    "shape_arithmetic_and_softmax": (
        [
            n("Conv", ["x", "w", "b"], ["c"]),
            n("Shape", ["c"], ["sh"]),
            n("Gather", ["sh", "zero"], ["batch"], axis=0),
            n("Unsqueeze", ["batch", "axes0"], ["batch1"]),
            n("Slice", ["sh", "one", "two"], ["channels"]),
            n("Constant", [], ["minus1"], value=numpy_helper.from_array(np.array([-1]))),
            n("Mul", ["channels", "minus1"], ["neg"]),
            n("Div", ["neg", "neg"], ["unit"]),
            n("Mul", ["minus1", "unit"], ["rest"]),
            n("Concat", ["batch1", "rest"], ["target"], axis=0),
            n("Reshape", ["c", "target"], ["f"]),
            n("Dropout", ["f"], ["d"]),
            n("Softmax", ["d"], ["p"], axis=-1),
            n("LogSoftmax", ["d"], ["y"], axis=1),
        ],
        [_init("w", 3, 1, 2, 2), _init("b", 3), _ints("zero", 0), _ints("axes0", [0]),
         _ints("one", [1]), _ints("two", [2])],
        {"x": ["N", 1, 4, 4]},
        ("y", "p"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_matches_onnxruntime(case: str, tmp_path: Path) -> None:
    nodes, inits, inputs, *outs = CASES[case]
    path = _save(tmp_path, nodes, inits, inputs, *outs)
    data = {k: _x(3, *[d for d in v if isinstance(d, int)]) for k, v in inputs.items()}
    graph = _compare(path, data)
    assert graph.source == str(path)
    assert graph.meta["opset"] == 13
    for node in graph.nodes:
        if not isinstance(node, g.Constant):
            assert node.source.startswith("ONNX node `")


def test_names_and_folding(tmp_path: Path) -> None:
    """Tensors keep their ONNX names; folded nodes are listed; the surviving name of a fold is
    the later tensor (what the user sees in the ONNX file)."""
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv"),
        n("Add", ["c", "cb"], ["cb_out"], name="conv_bias"),
        n("BatchNormalization", ["cb_out", "g", "b", "m", "v"], ["bn"], name="bn"),
        n("Relu", ["bn"], ["r"], name="relu"),
        n("Dropout", ["r"], ["d"], name="drop"),
        n("Flatten", ["d"], ["f"], name="flat"),
        n("MatMul", ["f", "fw"], ["mm"], name="fc"),
        n("Add", ["mm", "fb"], ["y"], name="fc_bias"),
    ]
    inits = [_init("w", 3, 1, 3, 3), _init("cb", 1, 3, 1, 1), _init("g", 3, lo=0.5),
             _init("b", 3), _init("m", 3), _init("v", 3, lo=0.5), _init("fw", 48, 4),
             _init("fb", 4)]  # fmt: skip
    path = _save(tmp_path, nodes, inits, {"x": [1, 1, 6, 6]})
    graph = _compare(path, {"x": _x(1, 1, 6, 6)})
    assert [node.op for node in graph.nodes] == [
        "conv", "constant", "eltwise", "batchnorm", "activation", "reshape", "flatten", "linear",
        "constant", "eltwise",
    ]  # fmt: skip
    simple = simplify(graph)
    assert [(node.name, node.op, node.folded, node.output) for node in simple.nodes] == [
        ("conv", "conv", ["conv_bias", "bn"], "bn"),
        ("relu", "activation", [], "d"),
        ("flat", "flatten", [], "f"),
        ("fc", "linear", ["fc_bias"], "y"),
    ]
    assert graph.nodes[0].bias is None  # the input graph is not modified


def test_fold_batchnorm_is_not_done_when_unsafe(tmp_path: Path) -> None:
    """A convolution output read twice keeps its BatchNorm (the other reader needs the
    unnormalized values); so does a graph output."""
    nodes = [
        n("Conv", ["x", "w"], ["c"], name="conv"),
        n("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"], name="bn"),
        n("Add", ["bn", "c"], ["y"], name="sum"),
    ]
    inits = [_init("w", 2, 2, 1, 1), _init("g", 2, lo=0.5), _init("b", 2), _init("m", 2),
             _init("v", 2, lo=0.5)]  # fmt: skip
    path = _save(tmp_path, nodes, inits, {"x": ["N", 2, 3, 3]}, ("y", "c"))
    graph = _compare(path, {"x": _x(2, 2, 3, 3)})
    assert [node.op for node in simplify(graph).nodes] == ["conv", "batchnorm", "eltwise"]


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_torch_exports(opset: int, tmp_path: Path) -> None:
    """A branching CNN exported by torch.onnx (with and without the exporter's constant
    folding): residual Add, channel Concat, depthwise and 1x1
    convolutions, BatchNorm, ReLU6 (Clip), ceil-mode pooling, a transposed convolution,
    flatten by view, two outputs."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(opset)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.pw = nn.Conv2d(8, 8, 1)
            self.side = nn.Conv2d(8, 4, 1)
            self.up = nn.ConvTranspose2d(12, 6, 2, stride=2)
            self.fc = nn.Linear(6 * 4 * 4, 5)
            with torch.no_grad():
                self.bn.running_mean.uniform_(-0.3, 0.3)
                self.bn.running_var.uniform_(0.5, 2.0)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x = F.relu(self.bn(self.stem(x)))
            r = F.relu6(self.pw(self.dw(x))) + x
            c = torch.cat([r, self.side(x)], dim=1)
            c = F.max_pool2d(c, 3, stride=2, ceil_mode=True)  # 9 -> 4
            u = F.avg_pool2d(self.up(c), 2)  # 8 -> 4
            return self.fc(u.view(u.size(0), -1)), torch.sigmoid(c.mean((2, 3)))

    path = tmp_path / "net.onnx"
    torch.onnx.export(
        Net().eval(), (torch.zeros(1, 3, 9, 9),), str(path), dynamo=False, opset_version=opset,
        do_constant_folding=opset == 17, input_names=["x"], output_names=["logits", "gate"],
        dynamic_axes={"x": {0: "b"}, "logits": {0: "b"}, "gate": {0: "b"}},
    )  # fmt: skip
    graph = _compare(path, {"x": _x(4, 3, 9, 9)})
    ops = {node.op for node in graph.nodes}
    assert {"conv", "clip", "eltwise", "concat", "pool", "flatten", "linear"} <= ops
    assert ("batchnorm" in ops) == (opset != 17)  # the exporter's constant folding folds it
    convs = [node for node in graph.nodes if isinstance(node, g.Conv)]
    assert any(c.groups == 8 for c in convs) and any(c.transposed for c in convs)
    simple = simplify(graph)
    assert not any(isinstance(node, g.BatchNorm) for node in simple.nodes)


# -- refusals ------------------------------------------------------------------------------


def _refused(path: Path, match: str) -> str:
    with pytest.raises(EdgesynthError, match=match) as info:
        load_onnx(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_unsupported_operator_names_node_and_supported_list(tmp_path: Path) -> None:
    nodes = [n("Elu", ["x"], ["y"], name="elu_1", alpha=0.1)]
    path = _save(tmp_path, nodes, [], {"x": ["N", 4]})
    message = _refused(path, r"ONNX node `elu_1` \(Elu\): operator not supported")
    assert all(op in message for op in SUPPORTED_OPS)


def test_unnamed_node_is_named_by_index_and_output(tmp_path: Path) -> None:
    nodes = [n("Relu", ["x"], ["r"]), n("Erf", ["r"], ["y"])]
    path = _save(tmp_path, nodes, [], {"x": ["N", 4]})
    _refused(path, r"ONNX node `Erf_1 -> y` \(Erf\)")


@pytest.mark.parametrize(
    ("nodes", "inits", "in_shape", "match"),
    [
        ([n("Conv", ["x", "w"], ["y"], name="c")], [], ["N", 1, 4, 4],
         r"`c` \(Conv\): weight `w` must be a constant"),
        ([n("Relu", ["x2"], ["y"], name="r")], [], ["N", 4], r"`r` \(Relu\): reads `x2`"),
        ([n("Flatten", ["x"], ["y"], name="f", axis=0)], [], ["N", 1, 4, 4],
         r"`f` \(Flatten\): Flatten axis 0 would fold the batch"),
        ([n("Reshape", ["x", "s"], ["y"], name="rs")], [_ints("s", [-1, 2, 2])], ["N", 1, 4, 4],
         r"`rs` \(Reshape\): Reshape to \[-1, 2, 2\] moves data across the batch"),
        ([n("Concat", ["x", "x"], ["y"], name="cat", axis=2)], [], ["N", 1, 4, 4],
         r"`cat` \(Concat\): Concat along axis 2"),
        ([n("Softmax", ["x"], ["y"], name="sm", axis=2)], [], ["N", 3, 4, 4],
         r"`sm` \(Softmax\): Softmax over axis 2 is not over the channel axis"),
        ([n("ReduceMean", ["x"], ["y"], name="rm", axes=[1])], [], ["N", 3, 4, 4],
         r"`rm` \(ReduceMean\): ReduceMean over axes \[1\]"),
        ([n("Gemm", ["x", "w"], ["y"], name="g", transA=1)], [_init("w", 4, 2)], ["N", 4],
         r"`g` \(Gemm\): transA=1 is not supported"),
    ],
)  # fmt: skip
def test_refusals(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    in_shape: list[int | str],
    match: str,
    tmp_path: Path,
) -> None:
    path = _save(tmp_path, nodes, inits, {"x": in_shape})
    _refused(path, match)


def test_dynamic_spatial_dimension_and_bad_file(tmp_path: Path) -> None:
    path = _save(tmp_path, [n("Relu", ["x"], ["y"])], [], {"x": ["N", 1, "H", 4]})
    _refused(path, r"input `x` has a dynamic dimension other than the batch")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all")
    _refused(bad, "not an ONNX model: it is a text file")
    with pytest.raises(EdgesynthError, match="no such file"):
        load_onnx(tmp_path / "missing.onnx")


def test_leaky_relu_is_read_with_its_slope(tmp_path: Path) -> None:
    nodes = [n("LeakyRelu", ["x"], ["y"], name="leaky_1", alpha=0.2)]
    graph = load_onnx(_save(tmp_path, nodes, [], {"x": ["N", 4]}))
    (node,) = graph.nodes
    assert isinstance(node, g.LeakyRelu) and node.alpha == pytest.approx(0.2)
    x = np.array([[-2.0, -0.5, 0.0, 3.0]])
    np.testing.assert_allclose(run(graph, x, keep=False)["y"], [[-0.4, -0.1, 0.0, 3.0]])
