"""The graph's reference semantics (`sim.graph`) against PyTorch and plain-Python references."""

from __future__ import annotations

import math
from collections import deque
from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgesynth.ir import graph as g
from edgesynth.sim import graph as ref

RNG = np.random.default_rng(11)


def ints(*shape: int, lo: int = -128, hi: int = 128) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape, dtype=np.int64)


def one_node(node: g.Node, in_shapes: list[tuple[int, ...]], out_shape, qtype=g.INT8) -> g.Graph:
    graph = g.Graph("t")
    for name, shape in zip(node.inputs, in_shapes, strict=True):
        graph.add_input(name, shape, qtype)
    graph.add(node, out_shape, qtype)
    graph.outputs = [node.output]
    graph.validate()
    return graph


def torch_int(t: torch.Tensor) -> np.ndarray:
    out = t.numpy()
    assert np.all(out == np.round(out))
    return out.astype(np.int64)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 3),
    groups=st.sampled_from([1, 2]),
    k=st.sampled_from([1, 2, 3]),
    stride=st.integers(1, 2),
    dilation=st.integers(1, 2),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
)
def test_conv2d_matches_torch(batch, groups, k, stride, dilation, pads) -> None:
    x, w, b = ints(batch, 4, 7, 6), ints(6, 4 // groups, k, k), ints(6, lo=-5000, hi=5000)
    top, left, bottom, right = pads
    span = dilation * (k - 1) + 1
    assume(7 + top + bottom >= span and 6 + left + right >= span)
    xt = F.pad(torch.from_numpy(x).double(), (left, right, top, bottom))
    want = torch_int(
        F.conv2d(
            xt,
            torch.from_numpy(w).double(),
            torch.from_numpy(b).double(),
            stride=stride,
            dilation=dilation,
            groups=groups,
        )
    )
    node = g.Conv(
        name="c",
        inputs=["x"],
        outputs=["y"],
        weight=w,
        bias=b,
        stride=(stride, stride),
        pads=pads,
        dilation=(dilation, dilation),
        groups=groups,
    )
    graph = one_node(node, [(4, 7, 6)], want.shape[1:], g.INT32)
    np.testing.assert_array_equal(ref.run(graph, x)["y"], want)


def test_conv1d_and_depthwise_match_torch() -> None:
    x, w, b = ints(2, 3, 40), ints(3, 1, 5), ints(3)
    want = torch_int(
        F.conv1d(
            torch.from_numpy(x).double(),
            torch.from_numpy(w).double(),
            torch.from_numpy(b).double(),
            padding=2,
            dilation=3,
            groups=3,
        )
    )
    node = g.Conv(
        name="c",
        inputs=["x"],
        outputs=["y"],
        weight=w,
        bias=b,
        stride=(1,),
        pads=(2, 2),
        dilation=(3,),
        groups=3,
    )
    graph = one_node(node, [(3, 40)], want.shape[1:], g.INT32)
    np.testing.assert_array_equal(ref.run(graph, x)["y"], want)


def test_transposed_conv_matches_torch() -> None:
    """The graph's transposed form (flipped, swapped weights; stuffing; conv pads) equals
    PyTorch's ConvTranspose2d with stride 2, padding 1, output padding 1."""
    x, wt, b = ints(2, 4, 5, 6), ints(4, 3, 3, 3), ints(3)
    want = torch_int(
        F.conv_transpose2d(
            torch.from_numpy(x).double(),
            torch.from_numpy(wt).double(),
            torch.from_numpy(b).double(),
            stride=2,
            padding=1,
            output_padding=1,
        )
    )
    w = np.flip(wt, axis=(2, 3)).transpose(1, 0, 2, 3).copy()
    node = g.Conv(
        name="c",
        inputs=["x"],
        outputs=["y"],
        weight=w,
        bias=b,
        stride=(2, 2),
        pads=(1, 1, 1, 1),
        transposed=True,
        output_padding=(1, 1),
    )
    graph = one_node(node, [(4, 5, 6)], want.shape[1:], g.INT32)
    np.testing.assert_array_equal(ref.run(graph, x)["y"], want)


def test_linear_flattens_chw() -> None:
    x, w, b = ints(3, 2, 3, 4), ints(5, 24), ints(5)
    node = g.Linear(name="l", inputs=["x"], outputs=["y"], weight=w, bias=b)
    graph = one_node(node, [(2, 3, 4)], (5,), g.INT32)
    np.testing.assert_array_equal(ref.run(graph, x)["y"], x.reshape(3, -1) @ w.T + b)


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["max", "avg"]),
    k=st.integers(1, 3),
    stride=st.integers(1, 3),
    pad=st.integers(0, 1),
    ceil=st.booleans(),
    include=st.booleans(),
)
def test_float_pool_matches_torch(kind, k, stride, pad, ceil, include) -> None:
    assume(pad * 2 <= k)
    x = RNG.standard_normal((2, 3, 7, 8))
    xt = torch.from_numpy(x)
    if kind == "max":
        want = F.max_pool2d(xt, k, stride, pad, ceil_mode=ceil).numpy()
    else:
        want = F.avg_pool2d(xt, k, stride, pad, ceil_mode=ceil, count_include_pad=include).numpy()
    node = g.Pool(
        name="p",
        inputs=["x"],
        outputs=["y"],
        kind=kind,
        kernel=(k, k),
        stride=(stride, stride),
        pads=(pad,) * 4,
        ceil=ceil,
        method="float",
        count_include_pad=include,
    )
    graph = one_node(node, [(3, 7, 8)], want.shape[1:], None)
    np.testing.assert_allclose(ref.run(graph, x)["y"], want, rtol=1e-12)


def _avg_reference(values: list[int], mode: str) -> int:
    f = Fraction(sum(values), len(values))
    return {
        "trunc": math.trunc(f),
        "floor": math.floor(f),
        "half_up": math.floor(f + Fraction(1, 2)),
        "half_away": (1 if f >= 0 else -1) * math.floor(abs(f) + Fraction(1, 2)),
        "half_even": round(f),
    }[mode]


def test_integer_average_pool_every_rounding() -> None:
    x = ints(2, 3, 6, 6)
    for mode in ("trunc", "floor", "half_up", "half_away", "half_even"):
        node = g.Pool(
            name="p",
            inputs=["x"],
            outputs=["y"],
            kind="avg",
            kernel=(3, 3),
            stride=(3, 3),
            method=mode,
        )
        got = ref.run(one_node(node, [(3, 6, 6)], (3, 2, 2)), x)["y"]
        for n, c, i, j in np.ndindex(got.shape):
            window = x[n, c, 3 * i : 3 * i + 3, 3 * j : 3 * j + 3].ravel().tolist()
            assert got[n, c, i, j] == _avg_reference(window, mode), mode


def _gati_tree(values: list[int]) -> int:
    fifo: deque[int] = deque((values[k] + values[k + 1]) >> 1 for k in range(0, len(values) - 1, 2))
    if len(values) % 2:
        fifo.append(values[-1])
    while len(fifo) > 1:
        fifo.append((fifo.popleft() + fifo.popleft()) >> 1)
    return fifo[0]


def test_tree_average_is_rows_then_columns() -> None:
    x = ints(1, 2, 6, 9)
    node = g.Pool(
        name="p",
        inputs=["x"],
        outputs=["y"],
        kind="avg",
        kernel=(3, 3),
        stride=(3, 3),
        method="tree",
    )
    got = ref.run(one_node(node, [(2, 6, 9)], (2, 2, 3)), x)["y"]
    for _, c, i, j in np.ndindex(got.shape):
        win = x[0, c, 3 * i : 3 * i + 3, 3 * j : 3 * j + 3]
        rows = [_gati_tree(win[r].tolist()) for r in range(3)]
        assert got[0, c, i, j] == _gati_tree(rows)


def test_max_floor_and_global_pool() -> None:
    x = ints(2, 3, 4, 4, lo=-100, hi=-1)  # all negative
    node = g.Pool(
        name="p", inputs=["x"], outputs=["y"], kind="max", kernel=(2, 2), stride=(2, 2), max_floor=0
    )
    assert not ref.run(one_node(node, [(3, 4, 4)], (3, 2, 2)), x)["y"].any()
    gp = g.GlobalPool(name="gp", inputs=["x"], outputs=["y"], kind="avg", method="trunc")
    got = ref.run(one_node(gp, [(3, 4, 4)], (3, 1, 1)), x)["y"]
    want = np.trunc(x.sum(axis=(2, 3)) / 16).astype(np.int64)
    np.testing.assert_array_equal(got[:, :, 0, 0], want)


def test_chain_with_requantize_relu_concat_and_eltwise() -> None:
    graph = g.Graph("chain")
    graph.add_input("x", (2, 4, 4), g.INT8)
    w = ints(3, 2, 3, 3)
    graph.add(
        g.Conv(name="conv", inputs=["x"], outputs=["acc"], weight=w, pads=(1, 1, 1, 1)),
        (3, 4, 4),
        g.INT32,
    )
    graph.add(
        g.Requantize(
            name="rq",
            inputs=["acc"],
            outputs=["q"],
            mul=np.array([1, 2, 3]),
            add=5,
            div=64,
            rounding="floor",
        ),
        (3, 4, 4),
        g.INT8,
    )
    graph.add(
        g.Activation(name="relu", inputs=["q"], outputs=["r"], kind="relu"), (3, 4, 4), g.INT8
    )
    graph.add(
        g.Eltwise(name="sum", inputs=["r", "q"], outputs=["s"], kind="add"), (3, 4, 4), g.QType(9)
    )
    graph.add(g.Concat(name="cat", inputs=["s", "x"], outputs=["cat"]), (5, 4, 4), g.QType(9))
    graph.outputs = ["cat"]
    graph.validate()
    x = ints(4, 2, 4, 4)
    acc = np.stack(
        [
            torch_int(
                F.conv2d(
                    torch.from_numpy(x[i : i + 1]).double(), torch.from_numpy(w).double(), padding=1
                )
            )[0]
            for i in range(4)
        ]
    )
    q = np.clip(np.floor_divide(acc * np.array([1, 2, 3])[None, :, None, None] + 5, 64), -128, 127)
    want = np.concatenate([np.maximum(q, 0) + q, x], axis=1)
    out = ref.run(graph, x, keep=False)
    assert list(out) == ["cat"]
    np.testing.assert_array_equal(out["cat"], want)
