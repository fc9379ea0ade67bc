"""Read a float ONNX CNN and lower it to Gati layers, fusing what the tail blocks can do.

The result is a chain of `FloatLayer`s, each one megablock (CONV or FC) with its tail: the
bias (Conv/Gemm bias, a following constant Add), BatchNormalization folded into the weights,
one activation (Relu, Sigmoid, Tanh) and one pooling (MaxPool, AveragePool,
GlobalAveragePool). What cannot be fused into the previous megablock becomes a layer of kind
`none` (an identity megablock that only runs its tail). Shape computations that exporters
emit for `x.view(x.size(0), -1)` (Shape, Gather, Unsqueeze, Concat, ...) are evaluated here on
the host. Nothing here knows Gati's field widths: `check.py` applies the hardware's limits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError

BATCH = -(1 << 40)  # the symbolic batch dimension inside host-evaluated shape tensors

SUPPORTED_OPS = (
    "Conv",
    "Relu",
    "Sigmoid",
    "Tanh",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceMean",
    "BatchNormalization",
    "Gemm",
    "MatMul",
    "Add",
    "Flatten",
    "Reshape",
    "Dropout",
    "Identity",
    "Softmax",
    "LogSoftmax",
)
SHAPE_OPS = ("Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice")
ACTIVATION_OPS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


@dataclass
class PoolSpec:
    type: str  # max | avg | global_avg
    kernel: tuple[int, int]  # (kh, kw)
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    ceil: bool
    count_include_pad: bool
    node: str
    in_hw: tuple[int, int] = (0, 0)
    out_hw: tuple[int, int] = (0, 0)


@dataclass
class FloatLayer:
    name: str  # the ONNX node that opened the layer (Conv/Gemm/MatMul, or the lone tail op)
    kind: str  # conv | linear | none
    in_shape: tuple[int, ...]  # (C, H, W) or (F,)
    nodes: list[str] = field(default_factory=list)  # every ONNX node fused into this layer
    weight: np.ndarray | None = None  # float64, (O, I, kh, kw) or (O, I)
    bias: np.ndarray | None = None  # float64, (O,)
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dilations: tuple[int, int] = (1, 1)
    group: int = 1
    activation: str | None = None  # relu | sigmoid | tanh
    activation_node: str | None = None
    pool: PoolSpec | None = None
    flatten: bool = False  # a linear layer reading a (C, H, W) tensor
    in_map: tuple[int, ...] = ()  # for flatten: the (C, H, W) shape that was flattened
    conv_shape: tuple[int, ...] = ()  # after the megablock, before pooling
    out_shape: tuple[int, ...] = ()
    output: str = ""  # ONNX tensor name of the layer's output
    stage: int = 0  # 0: megablock (+bias); 1: activation set; 2: pooling set

    @property
    def out_channels(self) -> int:
        return self.conv_shape[0]


@dataclass
class FloatGraph:
    path: str
    input_name: str
    input_shape: tuple[int, ...]  # without the batch dimension: (C, H, W) or (F,)
    output_name: str
    layers: list[FloatLayer]
    host_post: str | None = None  # softmax | logsoftmax, applied by the host on the outputs
    host_post_node: str | None = None
    opset: int = 0
    output_shape: tuple[int, ...] = ()  # the graph output without the batch dimension


class _Refuse(Exception):
    pass


def node_label(node: Any, index: int) -> str:
    return node.name or f"{node.op_type}_{index} -> {node.output[0] if node.output else '?'}"


def _attrs(node: Any) -> dict[str, Any]:
    import onnx

    out: dict[str, Any] = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        out[a.name] = v
    return out


def _dims(value_info: Any) -> list[int | None]:
    t = value_info.type.tensor_type
    return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]


class _Importer:
    def __init__(self, model: Any, path: str) -> None:
        from onnx import numpy_helper

        self.path = path
        self.graph = model.graph
        self.opset = max(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0
        )
        self.consts: dict[str, np.ndarray] = {
            t.name: numpy_helper.to_array(t) for t in self.graph.initializer
        }
        self.layers: list[FloatLayer] = []
        self._map_shape: tuple[int, ...] = ()
        self.shapes: dict[str, tuple[int, ...]] = {}  # every activation tensor seen so far
        self._flat_from_map = False
        self.cur_name = ""  # the live activation tensor
        self.cur_shape: tuple[int, ...] = ()
        self.host_post: str | None = None
        self.host_post_node: str | None = None
        self.node = ""
        self.op = ""

    # -- errors ---------------------------------------------------------------------------
    def fail(self, reason: str) -> EdgesynthError:
        return EdgesynthError(f"ONNX node `{self.node}` ({self.op}): {reason}", file=self.path)

    # -- inputs ---------------------------------------------------------------------------
    def graph_input(self) -> tuple[str, tuple[int, ...]]:
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            names = ", ".join(i.name for i in inputs)
            raise EdgesynthError(
                f"the Gati target takes models with one input, this one has {len(inputs)} "
                f"({names})",
                file=self.path,
            )
        vi = inputs[0]
        dims = _dims(vi)
        if len(dims) not in (2, 4):
            raise EdgesynthError(
                f"input `{vi.name}` has rank {len(dims)}; the Gati target takes (N, C, H, W) "
                "images or (N, F) vectors",
                file=self.path,
            )
        rest = dims[1:]
        if any(d is None or d <= 0 for d in rest):
            raise EdgesynthError(
                f"input `{vi.name}` has a dynamic dimension other than the batch: {dims}",
                file=self.path,
            )
        return vi.name, tuple(int(d) for d in rest if d is not None)

    # -- main loop ------------------------------------------------------------------------
    def run(self) -> FloatGraph:
        in_name, in_shape = self.graph_input()
        self.cur_name, self.cur_shape = in_name, in_shape
        self.shapes[in_name] = in_shape
        consumers: dict[str, int] = {}
        for n in self.graph.node:
            if n.op_type in ("Shape",):
                continue
            for i in n.input:
                consumers[i] = consumers.get(i, 0) + 1
        self.consumers = consumers
        handlers: dict[str, Callable[[Any, dict[str, Any]], None]] = {
            "Conv": self.conv,
            "Gemm": self.gemm,
            "MatMul": self.matmul,
            "Add": self.add,
            "BatchNormalization": self.batchnorm,
            "Relu": self.activation,
            "Sigmoid": self.activation,
            "Tanh": self.activation,
            "MaxPool": self.pool,
            "AveragePool": self.pool,
            "GlobalAveragePool": self.pool,
            "ReduceMean": self.pool,
            "Flatten": self.flatten,
            "Reshape": self.reshape,
            "Dropout": self.passthrough,
            "Identity": self.passthrough,
            "Softmax": self.softmax,
            "LogSoftmax": self.softmax,
        }
        for idx, n in enumerate(self.graph.node):
            self.node, self.op = node_label(n, idx), n.op_type
            if n.domain not in ("", "ai.onnx"):
                raise self.fail(f"operator domain `{n.domain}` is not supported")
            attrs = _attrs(n)
            if self.fold_constant(n, attrs):
                continue
            handler = handlers.get(n.op_type)
            if handler is None:
                raise self.fail(
                    "operator not supported by the Gati target (it runs "
                    + ", ".join(SUPPORTED_OPS)
                    + ")"
                )
            if self.host_post is not None:
                raise self.fail(f"{self.host_post_node} must be the last node of the graph")
            handler(n, attrs)
        outputs = list(self.graph.output)
        if len(outputs) != 1:
            raise EdgesynthError(
                f"the Gati target takes models with one output, this one has {len(outputs)}",
                file=self.path,
            )
        if outputs[0].name != self.cur_name:
            raise EdgesynthError(
                f"graph output `{outputs[0].name}` is not the end of the layer chain "
                f"(`{self.cur_name}`)",
                file=self.path,
            )
        if not self.layers:
            raise EdgesynthError("the model has no Conv or Gemm/MatMul layer", file=self.path)
        for layer in self.layers:
            if layer.stage < 2:
                layer.out_shape = layer.conv_shape
        return FloatGraph(
            self.path,
            in_name,
            in_shape,
            outputs[0].name,
            self.layers,
            self.host_post,
            self.host_post_node,
            self.opset,
            tuple(self.cur_shape),
        )

    # -- helpers --------------------------------------------------------------------------
    def const(self, name: str, what: str) -> np.ndarray:
        if name not in self.consts:
            raise self.fail(f"{what} `{name}` must be a constant (an initializer)")
        return self.consts[name]

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def take_activation(self, n: Any, name: str) -> None:
        if name != self.cur_name:
            raise self.fail(
                f"reads `{name}`, which is not the output of the previous layer: branching "
                "graphs (residual Add, Concat, several paths) have no Gati instruction"
            )
        if self.consumers.get(name, 0) > 1:
            raise self.fail(
                f"`{name}` feeds {self.consumers[name]} nodes: branching graphs have no Gati "
                "instruction"
            )

    def advance(self, output: str, shape: tuple[int, ...]) -> None:
        """Move the live tensor; the last layer's output follows if it was the live one."""
        was_live = self.last_is_live()
        self.cur_name, self.cur_shape = output, shape
        self.shapes[output] = shape
        if was_live and self.last is not None:
            self.last.output = output

    def open_layer(self, layer: FloatLayer) -> None:
        layer.output = self.cur_name  # live until `advance` moves it to the real output
        self.layers.append(layer)

    @property
    def last(self) -> FloatLayer | None:
        return self.layers[-1] if self.layers else None

    def last_is_live(self) -> bool:
        """Is the live tensor the output of the last layer (so its tail can grow)?"""
        return self.last is not None and self.last.output == self.cur_name

    # -- constant folding for shape arithmetic ---------------------------------------------
    def fold_constant(self, n: Any, a: dict[str, Any]) -> bool:
        op = n.op_type
        if op == "Constant":
            self.consts[n.output[0]] = self._constant_value(a)
            return True
        if op == "Shape":
            src = n.input[0]
            if src in self.shapes:
                shape = np.array([BATCH, *self.shapes[src]], dtype=np.int64)
            elif self.is_const(src):
                shape = np.array(self.consts[src].shape, dtype=np.int64)
            else:
                raise self.fail(f"Shape of `{src}`, which is neither an activation nor constant")
            start, end = a.get("start", 0), a.get("end")
            self.consts[n.output[0]] = shape[start:end]
            return True
        ins = [i for i in n.input if i]
        if op not in SHAPE_OPS and op not in ("Identity", "Reshape", "Mul", "Div", "Sub", "Add"):
            return False
        if not ins or not all(self.is_const(i) for i in ins):
            if op in SHAPE_OPS:
                raise self.fail("only shape arithmetic on constants is supported")
            return False
        v = [self.consts[i] for i in ins]
        if op == "Gather":
            out = np.take(v[0], v[1], axis=a.get("axis", 0))
        elif op == "Unsqueeze":
            axes = a["axes"] if "axes" in a else v[1].tolist()
            out = v[0]
            for ax in sorted(int(x) % (out.ndim + len(axes)) for x in axes):
                out = np.expand_dims(out, ax)
        elif op == "Squeeze":
            axes = a.get("axes", v[1].tolist() if len(v) > 1 else None)
            out = np.squeeze(v[0], axis=tuple(axes) if axes is not None else None)
        elif op == "Concat":
            out = np.concatenate([np.atleast_1d(x) for x in v], axis=a.get("axis", 0))
        elif op == "Cast":
            out = v[0].astype(np.float32 if a.get("to") == 1 else np.int64)
        elif op == "Slice":
            if len(v) > 1:
                starts, ends = v[1].tolist(), v[2].tolist()
                axes = v[3].tolist() if len(v) > 3 else list(range(len(starts)))
                steps = v[4].tolist() if len(v) > 4 else [1] * len(starts)
            else:
                starts, ends = a["starts"], a["ends"]
                axes = a.get("axes", list(range(len(starts))))
                steps = [1] * len(starts)
            sl = [slice(None)] * v[0].ndim
            for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
                sl[ax] = slice(s, e, st)
            out = v[0][tuple(sl)]
        elif op == "Identity":
            out = v[0]
        elif op == "Reshape":
            out = v[0].reshape(v[1].tolist())
        else:
            if (v[0] == BATCH).any() or (v[1] == BATCH).any():
                raise self.fail("arithmetic on the batch dimension is not supported")
            fn = {"Mul": np.multiply, "Div": np.divide, "Sub": np.subtract, "Add": np.add}[op]
            out = fn(v[0], v[1])
        self.consts[n.output[0]] = np.asarray(out)
        return True

    def _constant_value(self, a: dict[str, Any]) -> np.ndarray:
        from onnx import numpy_helper

        if "value" in a:
            return numpy_helper.to_array(a["value"])
        for key in ("value_float", "value_int"):
            if key in a:
                return np.array(a[key])
        for key in ("value_floats", "value_ints"):
            if key in a:
                return np.array(list(a[key]))
        raise self.fail("unsupported Constant attribute")

    # -- megablocks -----------------------------------------------------------------------
    def conv(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        if len(self.cur_shape) != 3:
            raise self.fail(f"Conv on a tensor of shape {self.cur_shape}; expected (C, H, W)")
        w = self.const(n.input[1], "weight").astype(np.float64)
        if w.ndim != 4:
            raise self.fail(f"only 2-D convolutions are supported (weight shape {w.shape})")
        c, h, wd = self.cur_shape
        group = int(a.get("group", 1))
        if w.shape[1] * group != c:
            raise self.fail(f"weight {w.shape} does not match {c} input channels")
        b = (
            self.const(n.input[2], "bias").astype(np.float64)
            if len(n.input) > 2 and n.input[2]
            else np.zeros(w.shape[0])
        )
        kh, kw = w.shape[2], w.shape[3]
        strides = tuple(a.get("strides", [1, 1]))
        dil = tuple(a.get("dilations", [1, 1]))
        pads = self._pads(a, (h, wd), (kh, kw), strides, dil)
        oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
        ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
        if oh <= 0 or ow <= 0:
            raise self.fail(f"output would be empty ({oh}x{ow})")
        layer = FloatLayer(
            self.node,
            "conv",
            self.cur_shape,
            [self.node],
            w,
            b,
            strides=(int(strides[0]), int(strides[1])),
            pads=pads,
            dilations=(int(dil[0]), int(dil[1])),
            group=group,
            conv_shape=(w.shape[0], oh, ow),
        )
        self.open_layer(layer)
        self.advance(n.output[0], layer.conv_shape)

    def _pads(
        self,
        a: dict[str, Any],
        hw: tuple[int, int],
        k: tuple[int, int],
        strides: tuple[int, ...],
        dil: tuple[int, ...] = (1, 1),
    ) -> tuple[int, int, int, int]:
        auto = a.get("auto_pad", "NOTSET")
        if auto in ("NOTSET", "VALID"):
            p = list(a.get("pads", [0, 0, 0, 0])) if auto == "NOTSET" else [0, 0, 0, 0]
            if len(p) != 4:
                raise self.fail(f"pads {p} are not 2-D")
            return (int(p[0]), int(p[1]), int(p[2]), int(p[3]))
        begin, end = [], []
        for n_, k_, s_, d_ in zip(hw, k, strides, dil, strict=True):
            total = max((-(-n_ // s_) - 1) * s_ + d_ * (k_ - 1) + 1 - n_, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return (begin[0], begin[1], end[0], end[1])

    def _linear_input(self, n: Any, name: str) -> tuple[int, bool]:
        self.take_activation(n, name)
        if len(self.cur_shape) != 1:
            raise self.fail(
                f"input of shape {self.cur_shape} must be flattened first (Flatten or Reshape)"
            )
        return self.cur_shape[0], self.flat_from_map

    @property
    def flat_from_map(self) -> bool:
        """Is the live vector a flattened (C, H, W) map (laid out in NHW8C8 blocks)?"""
        return self._flat_from_map

    def _open_linear(self, n: Any, w: np.ndarray, b: np.ndarray, flatten: bool) -> None:
        layer = FloatLayer(
            self.node,
            "linear",
            self.cur_shape,
            [self.node],
            w,
            b,
            flatten=flatten,
            conv_shape=(w.shape[0],),
        )
        if flatten:
            layer.in_map = self._map_shape
        self.open_layer(layer)
        self._flat_from_map = False
        self.advance(n.output[0], layer.conv_shape)

    def gemm(self, n: Any, a: dict[str, Any]) -> None:
        if a.get("transA", 0):
            raise self.fail("transA=1 is not supported (the input is a row vector)")
        features, flatten = self._linear_input(n, n.input[0])
        bmat = self.const(n.input[1], "weight B").astype(np.float64)
        w = bmat if a.get("transB", 0) else bmat.T
        w = w * float(a.get("alpha", 1.0))
        if w.shape[1] != features:
            raise self.fail(f"weight {bmat.shape} does not match {features} input features")
        bias = np.zeros(w.shape[0])
        if len(n.input) > 2 and n.input[2]:
            c = self.const(n.input[2], "bias C").astype(np.float64) * float(a.get("beta", 1.0))
            bias = self._per_channel(c, w.shape[0])
        self._open_linear(n, w, bias, flatten)

    def matmul(self, n: Any, a: dict[str, Any]) -> None:
        features, flatten = self._linear_input(n, n.input[0])
        bmat = self.const(n.input[1], "weight").astype(np.float64)
        if bmat.ndim != 2 or bmat.shape[0] != features:
            raise self.fail(f"weight {bmat.shape} does not match {features} input features")
        self._open_linear(n, bmat.T.copy(), np.zeros(bmat.shape[1]), flatten)

    def _per_channel(self, c: np.ndarray, channels: int) -> np.ndarray:
        if c.size == 1:
            return np.full(channels, float(c.reshape(-1)[0]))
        squeezed = [d for d in c.shape if d != 1]
        if squeezed != [channels]:
            raise self.fail(f"constant of shape {c.shape} is not one value per channel")
        return c.reshape(-1).astype(np.float64)

    # -- tail ops ------------------------------------------------------------------------
    def add(self, n: Any, a: dict[str, Any]) -> None:
        ins = list(n.input)
        consts = [i for i in ins if self.is_const(i)]
        if len(consts) != 1:
            raise self.fail(
                "element-wise Add of two activations (a residual connection) has no "
                "instruction in Gati's documented ISA; only a constant bias can be added"
            )
        act = ins[1] if ins[0] in consts else ins[0]
        self.take_activation(n, act)
        layer = self.last
        if layer is None or not self.last_is_live() or layer.stage != 0 or layer.kind == "none":
            raise self.fail(
                "a constant Add is fused as the bias of the preceding Conv/Gemm/MatMul; here it "
                "does not follow one directly"
            )
        assert layer.bias is not None
        layer.bias = layer.bias + self._per_channel(
            self.consts[consts[0]].astype(np.float64), layer.out_channels
        )
        layer.nodes.append(self.node)
        self.advance(n.output[0], self.cur_shape)

    def batchnorm(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        layer = self.last
        if layer is None or not self.last_is_live() or layer.stage != 0 or layer.kind == "none":
            raise self.fail(
                "BatchNormalization is folded into the preceding Conv/Gemm; here it does not "
                "follow one directly (Gati's batchnorm block is not used by edgesynth)"
            )
        if len(n.output) > 1 and any(n.output[1:]):
            raise self.fail("training-mode BatchNormalization is not supported")
        gamma, beta, mean, var = (
            self.const(n.input[i], what).astype(np.float64).reshape(-1)
            for i, what in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var"))
        )
        eps = float(a.get("epsilon", 1e-5))
        if gamma.size != layer.out_channels:
            raise self.fail(f"{gamma.size} channels, the layer has {layer.out_channels}")
        s = gamma / np.sqrt(var + eps)
        assert layer.weight is not None and layer.bias is not None
        layer.weight = layer.weight * s.reshape((-1,) + (1,) * (layer.weight.ndim - 1))
        layer.bias = (layer.bias - mean) * s + beta
        layer.nodes.append(self.node)
        self.advance(n.output[0], self.cur_shape)

    def activation(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        kind = ACTIVATION_OPS[n.op_type]
        layer = self.last
        live = layer is not None and self.last_is_live()
        if (
            live
            and layer is not None
            and layer.activation == kind == "relu"
            and layer.stage >= 1
            and (layer.pool is None or layer.pool.type == "max")
        ):
            layer.nodes.append(self.node)  # relu(relu(x)) == relu(x)
            self.advance(n.output[0], self.cur_shape)
            return
        fusable = live and layer is not None and layer.activation is None
        if (
            fusable
            and layer is not None
            and (layer.stage == 0 or (layer.stage == 2 and layer.pool and layer.pool.type == "max"))
        ):
            # after a max pool, a monotonic activation commutes with it: act(max(x)) ==
            # max(act(x)), and the tail block applies the activation before pooling.
            layer.activation, layer.activation_node = kind, self.node
            layer.stage = max(layer.stage, 1)
            layer.nodes.append(self.node)
            self.advance(n.output[0], self.cur_shape)
            return
        self._open_identity()
        layer = self.layers[-1]
        layer.activation, layer.activation_node, layer.stage = kind, self.node, 1
        self.advance(n.output[0], self.cur_shape)

    def _open_identity(self) -> None:
        shape = self.cur_shape
        if len(shape) == 1 and self.flat_from_map:
            raise self.fail("a tail operation on a flattened feature map needs an FC layer first")
        layer = FloatLayer(self.node, "none", shape, [self.node], conv_shape=shape)
        self.open_layer(layer)

    def pool(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        if len(self.cur_shape) != 3:
            raise self.fail(f"pooling needs a (C, H, W) tensor, got {self.cur_shape}")
        c, h, w = self.cur_shape
        keep = True
        if n.op_type == "ReduceMean":
            axes = a.get("axes")
            if axes is None and len(n.input) > 1 and n.input[1]:
                axes = self.const(n.input[1], "axes").tolist()
            if axes is None or sorted(int(x) % 4 for x in axes) != [2, 3]:
                raise self.fail(
                    f"ReduceMean over axes {axes}: only the spatial mean (axes 2, 3) is "
                    "supported, as a global average pool"
                )
            keep = bool(a.get("keepdims", 1))
        if n.op_type in ("GlobalAveragePool", "ReduceMean"):
            spec = PoolSpec("global_avg", (h, w), (1, 1), (0, 0, 0, 0), False, False, self.node)
        else:
            k = tuple(int(x) for x in a["kernel_shape"])
            if len(k) != 2:
                raise self.fail(f"only 2-D pooling is supported (kernel {k})")
            if any(d != 1 for d in a.get("dilations", [1, 1])):
                raise self.fail("dilated pooling is not supported")
            strides = tuple(int(x) for x in a.get("strides", [1, 1]))
            pads = self._pads(a, (h, w), k, strides)
            spec = PoolSpec(
                "max" if n.op_type == "MaxPool" else "avg",
                (k[0], k[1]),
                (strides[0], strides[1]),
                pads,
                bool(a.get("ceil_mode", 0)),
                bool(a.get("count_include_pad", 0)),
                self.node,
            )
        oh = pool_out(h, spec.kernel[0], spec.strides[0], spec.pads[0], spec.pads[2], spec.ceil)
        ow = pool_out(w, spec.kernel[1], spec.strides[1], spec.pads[1], spec.pads[3], spec.ceil)
        if oh <= 0 or ow <= 0:
            raise self.fail(f"pooling output would be empty ({oh}x{ow})")
        spec.in_hw, spec.out_hw = (h, w), (oh, ow)
        layer = self.last
        if not (
            layer is not None
            and self.last_is_live()
            and layer.stage < 2
            and len(layer.conv_shape) == 3
        ):
            self._open_identity()
            layer = self.layers[-1]
        layer.pool = spec
        layer.stage = 2
        if self.node not in layer.nodes:
            layer.nodes.append(self.node)
        layer.out_shape = (c, oh, ow)
        self.advance(n.output[0], layer.out_shape)
        if not keep:
            self._to_vector(n)

    # -- shape ops -----------------------------------------------------------------------
    def _to_vector(self, n: Any) -> None:
        if len(self.cur_shape) == 3:
            self._map_shape = self.cur_shape
            self._flat_from_map = True
        self.advance(n.output[0], (int(np.prod(self.cur_shape)),))

    def flatten(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        if int(a.get("axis", 1)) != 1:
            raise self.fail(f"Flatten axis {a.get('axis')} would fold the batch dimension")
        self._to_vector(n)

    def reshape(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        if len(n.input) > 1:
            target = self.const(n.input[1], "shape").astype(np.int64).tolist()
        else:
            target = list(a.get("shape", []))
        full = [BATCH, *self.cur_shape]
        allowzero = bool(a.get("allowzero", 0))
        target = [
            full[i] if (v == 0 and not allowzero and i < len(full)) else v
            for i, v in enumerate(target)
        ]
        size = int(np.prod(self.cur_shape))
        if target and target[0] in (BATCH, 1, -1):
            rest = target[1:]
            if target[0] == -1:
                if rest and all(v not in (-1, BATCH) for v in rest) and np.prod(rest) == size:
                    pass
                else:
                    raise self.fail(f"Reshape to {target} moves data across the batch")
            known = [v for v in rest if v != -1]
            if rest.count(-1) > 1 or any(v <= 0 for v in known):
                raise self.fail(f"Reshape to {target} is not supported")
            if rest.count(-1) == 1:
                if size % int(np.prod(known or [1])):
                    raise self.fail(f"Reshape to {target} does not divide {size} elements")
                rest = [v if v != -1 else size // int(np.prod(known or [1])) for v in rest]
            if int(np.prod(rest)) != size:
                raise self.fail(f"Reshape to {target} does not keep {size} elements")
            new = tuple(int(v) for v in rest)
            if new == tuple(self.cur_shape):
                self.advance(n.output[0], self.cur_shape)
                return
            if len(new) == 1:
                self._to_vector(n)
                return
        raise self.fail(
            f"Reshape of {tuple(self.cur_shape)} to {target}: only flattening to "
            "(batch, features) is supported"
        )

    def passthrough(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        if len(n.output) > 1 and any(o and self.consumers.get(o) for o in n.output[1:]):
            raise self.fail("the Dropout mask output is used")
        self.advance(n.output[0], self.cur_shape)

    def softmax(self, n: Any, a: dict[str, Any]) -> None:
        self.take_activation(n, n.input[0])
        if len(self.cur_shape) != 1:
            raise self.fail("only a Softmax over the class vector of the last layer is supported")
        axis = int(a.get("axis", 1 if self.opset < 13 else -1))
        if axis not in (1, -1):
            raise self.fail(f"Softmax axis {axis} is not the class axis")
        self.host_post = "softmax" if n.op_type == "Softmax" else "logsoftmax"
        self.host_post_node = self.node
        self.cur_name = n.output[0]  # the last layer keeps its own output name
        self.shapes[n.output[0]] = self.cur_shape


def pool_out(n: int, k: int, s: int, p0: int, p1: int, ceil: bool) -> int:
    """Pooling output size, ONNX/PyTorch rule (a ceil-mode window must start in the input)."""
    span = n + p0 + p1 - k
    if span < 0:
        return 0
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p0:
        out -= 1
    return out


def import_onnx(path: str | Path) -> FloatGraph:
    """Load `path` and lower it to a chain of Gati layers (float weights)."""
    import onnx

    path = str(path)
    try:
        model = onnx.load(path)
    except Exception as exc:  # protobuf raises several types
        raise EdgesynthError(f"cannot read ONNX model: {exc}", file=path) from None
    return _Importer(model, path).run()
