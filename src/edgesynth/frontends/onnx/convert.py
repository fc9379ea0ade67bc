"""Turn a float ONNX model into the network graph, one primitive operator per ONNX operator.

No hardware decision is made here: nothing is fused (that is a target's `lower`) and nothing is
folded (that is `edgesynth.ir.passes`). What the converter does on the host:

* evaluates constant and shape arithmetic (`constants.fold`), with the batch kept symbolic;
* resolves `auto_pad`, ceil-mode output sizes and Gemm's alpha/beta/transB into the operator's
  own parameters;
* makes each constant operand of Add/Sub/Mul/Div a `Constant` node (Div becomes Mul by the
  reciprocal), and Dropout/Identity a `Reshape` to the same shape (`passes.drop_identities`
  removes both kinds once they are folded or useless).

Graph names are the ONNX names: a node is named after its ONNX node (`Op_index -> output` when
the exporter gave none), a tensor keeps its ONNX tensor name. Each node's `source` says
"ONNX node `name` (Op)", for messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx.constants import (
    ARITHMETIC_OPS,
    BATCH,
    SHAPE_OPS,
    FoldError,
    constant_value,
    fold,
)
from edgesynth.ir import graph as g

ACTIVATIONS = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Abs": "abs",
    "HardSigmoid": "hardsigmoid",
    "HardSwish": "hardswish",
    "Mish": "mish",
    "Softplus": "softplus",
}
ELEMENTWISE = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "mul"}

Shape = tuple[int, ...]


def node_label(node: Any, index: int) -> str:
    """The name messages and graph nodes use for an ONNX node."""
    return node.name or f"{node.op_type}_{index} -> {node.output[0] if node.output else '?'}"


def _attrs(node: Any) -> dict[str, Any]:
    from edgesynth.frontends.onnxproto import attribute_value

    out: dict[str, Any] = {}
    for a in node.attribute:
        v = attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        out[a.name] = v
    return out


def _dims(value_info: Any) -> list[int | None]:
    t = value_info.type.tensor_type
    return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]


class Converter:
    """One pass over the ONNX nodes in order (ONNX requires a topological order)."""

    def __init__(self, model: Any, path: str) -> None:
        from edgesynth.frontends.onnxproto import to_array

        self.path = path
        self.onnx = model.graph
        self.opset = max(
            (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0
        )
        self.consts: dict[str, np.ndarray] = {t.name: to_array(t) for t in self.onnx.initializer}
        name = self.onnx.name or "onnx"
        self.graph = g.Graph(name=name, source=path)
        self.graph.meta = {"format": "onnx", "opset": self.opset}
        if model.producer_name:
            self.graph.meta["producer"] = model.producer_name
        self.label = ""
        self.op = ""
        self.consumers: dict[str, int] = {}
        self.handlers: dict[str, Callable[[Any, dict[str, Any]], None]] = {
            "Conv": self.conv,
            "ConvTranspose": self.conv_transpose,
            "Gemm": self.gemm,
            "MatMul": self.matmul,
            "BatchNormalization": self.batchnorm,
            "Clip": self.clip,
            "MaxPool": self.pool,
            "AveragePool": self.pool,
            "GlobalAveragePool": self.global_pool,
            "GlobalMaxPool": self.global_pool,
            "ReduceMean": self.reduce,
            "ReduceMax": self.reduce,
            "Flatten": self.flatten,
            "Reshape": self.reshape,
            "Squeeze": self.squeeze,
            "Unsqueeze": self.squeeze,
            "Concat": self.concat,
            "Slice": self.slice,
            "Dropout": self.identity,
            "Identity": self.identity,
            "Softmax": self.softmax,
            "LogSoftmax": self.softmax,
            "LeakyRelu": self.leaky_relu,
            **{op: self.activation for op in ACTIVATIONS},
            **{op: self.elementwise for op in ELEMENTWISE},
        }

    # -- errors ---------------------------------------------------------------------------
    def fail(self, reason: str) -> EdgesynthError:
        return EdgesynthError(f"ONNX node `{self.label}` ({self.op}): {reason}", file=self.path)

    def refuse(self, reason: str) -> EdgesynthError:
        return EdgesynthError(reason, file=self.path)

    # -- the main loop --------------------------------------------------------------------
    def run(self) -> g.Graph:
        self.inputs()
        for n in self.onnx.node:
            for i in n.input:
                self.consumers[i] = self.consumers.get(i, 0) + 1
        for index, n in enumerate(self.onnx.node):
            self.label, self.op = node_label(n, index), n.op_type
            if n.domain not in ("", "ai.onnx"):
                raise self.fail(f"operator domain `{n.domain}` is not supported")
            attrs = _attrs(n)
            if self.fold_constant(n, attrs):
                continue
            handler = self.handlers.get(n.op_type)
            if handler is None:
                raise self.fail(
                    "operator not supported by the ONNX front end (it reads "
                    + ", ".join(SUPPORTED_OPS)
                    + ")"
                )
            handler(n, attrs)
        self.outputs()
        self.graph.validate()
        return self.graph

    def inputs(self) -> None:
        inputs = [i for i in self.onnx.input if i.name not in self.consts]
        if not inputs:
            raise self.refuse("the model has no input")
        for vi in inputs:
            dims = _dims(vi)
            if len(dims) not in (2, 3, 4):
                raise self.refuse(
                    f"input `{vi.name}` has rank {len(dims)}; the ONNX front end reads (N, C, H, "
                    "W) images, (N, C, L) sequences and (N, F) vectors"
                )
            rest = dims[1:]
            if any(d is None or d <= 0 for d in rest):
                raise self.refuse(
                    f"input `{vi.name}` has a dynamic dimension other than the batch: {dims}"
                )
            self.graph.add_input(vi.name, [int(d) for d in rest if d is not None])

    def outputs(self) -> None:
        for vi in self.onnx.output:
            if vi.name not in self.graph.tensors:
                what = "a constant" if vi.name in self.consts else "never produced"
                raise self.refuse(f"graph output `{vi.name}` is {what}")
            self.graph.outputs.append(vi.name)
        if not self.graph.outputs:
            raise self.refuse("the model has no output")

    # -- helpers --------------------------------------------------------------------------
    def shape(self, name: str) -> Shape:
        """Per-sample shape of the activation `name` (refuses a constant or unknown name)."""
        if name in self.graph.tensors:
            return self.graph.tensors[name].shape
        if name in self.consts:
            raise self.fail(f"input `{name}` is a constant where an activation is expected")
        raise self.fail(
            f"reads `{name}`, which is neither a graph input, an initializer nor the output of "
            "an earlier node"
        )

    def const(self, name: str, what: str) -> np.ndarray:
        if name not in self.consts:
            raise self.fail(f"{what} `{name}` must be a constant (an initializer)")
        return self.consts[name]

    def add(self, node: g.Node, shape: Sequence[int]) -> None:
        node.source = f"ONNX node `{self.label}` ({self.op})"
        if any(s <= 0 for s in shape):
            raise self.fail(f"output would be empty ({'x'.join(map(str, shape))})")
        self.graph.add(node, shape)

    def make(
        self, cls: type[g.Node], n: Any, inputs: list[str], out_shape: Shape, **kw: Any
    ) -> None:
        self.add(cls(name=self.label, inputs=inputs, outputs=[n.output[0]], **kw), out_shape)

    def spatial(self, shape: Shape) -> int:
        """1 or 2 spatial axes; refuses vectors and higher ranks."""
        if len(shape) not in (2, 3):
            raise self.fail(
                f"needs a (C, L) or (C, H, W) tensor, `{self.label}` reads {shape} per sample"
            )
        return len(shape) - 1

    def pads(
        self,
        a: dict[str, Any],
        size: Shape,
        k: Shape,
        strides: Shape,
        dil: Shape,
    ) -> tuple[int, ...]:
        """Pads (begin..., end...) after resolving auto_pad."""
        rank = len(size)
        auto = a.get("auto_pad", "NOTSET")
        if auto in ("NOTSET", "VALID"):
            p = list(a.get("pads", [0] * 2 * rank)) if auto == "NOTSET" else [0] * 2 * rank
            if len(p) != 2 * rank:
                raise self.fail(f"pads {p} do not have {2 * rank} values")
            return tuple(int(x) for x in p)
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            raise self.fail(f"auto_pad {auto} is not supported")
        begin, end = [], []
        for n_, k_, s_, d_ in zip(size, k, strides, dil, strict=True):
            total = max((-(-n_ // s_) - 1) * s_ + d_ * (k_ - 1) + 1 - n_, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return (*begin, *end)

    def per_sample_constant(self, value: np.ndarray, rank: int) -> np.ndarray:
        """An ONNX constant broadcast against an (N, ...) activation of `rank` axes, without the
        batch axis (refused when it varies over the batch or has more axes)."""
        if value.ndim > rank:
            raise self.fail(f"constant of shape {value.shape} has more axes than the activation")
        full = value.reshape((1,) * (rank - value.ndim) + value.shape)
        if full.shape[0] != 1:
            raise self.fail(f"constant of shape {value.shape} varies over the batch axis")
        return full[0]

    def constant_node(self, value: np.ndarray, base: str) -> str:
        name = self.graph.unique_name(base)
        node = g.Constant(name=name, inputs=[], outputs=[name], value=value)
        self.add(node, value.shape)
        return name

    # -- constant folding -----------------------------------------------------------------
    def fold_constant(self, n: Any, a: dict[str, Any]) -> bool:
        """Evaluate `n` on the host when it computes a constant; False when it does not."""
        op = n.op_type
        out = n.output[0] if n.output else ""
        try:
            if op == "Constant":
                self.consts[out] = constant_value(a)
                return True
            if op == "Shape":
                src = n.input[0]
                if src in self.graph.tensors:
                    shape = np.array([BATCH, *self.graph.tensors[src].shape], dtype=np.int64)
                elif src in self.consts:
                    shape = np.array(self.consts[src].shape, dtype=np.int64)
                else:
                    self.shape(src)  # raises: unknown tensor
                    return False
                start, end = a.get("start", 0), a.get("end")
                self.consts[out] = shape[start:end]
                return True
            ins = [i for i in n.input if i]
            if op not in SHAPE_OPS and op not in ARITHMETIC_OPS:
                return False
            if not ins or not all(i in self.consts for i in ins):
                if op in SHAPE_OPS and op not in ("Concat", "Slice", "Squeeze", "Unsqueeze"):
                    raise self.fail("only shape arithmetic on constants is supported")
                return False
            self.consts[out] = fold(op, [self.consts[i] for i in ins], a)
        except FoldError as err:
            raise self.fail(str(err)) from None
        return True

    # -- convolution and linear -----------------------------------------------------------
    def conv(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        rank = self.spatial(shape)
        w = self.const(n.input[1], "weight").astype(np.float64)
        if w.ndim != rank + 2:
            raise self.fail(f"weight of shape {w.shape} for a {rank}-D convolution")
        group = int(a.get("group", 1))
        if shape[0] != w.shape[1] * group:
            raise self.fail(
                f"weight {w.shape} with group {group} expects {w.shape[1] * group} input "
                f"channels, the input has {shape[0]}"
            )
        b = None
        if len(n.input) > 2 and n.input[2]:
            b = self.const(n.input[2], "bias").astype(np.float64).reshape(-1)
        k = w.shape[2:]
        strides = tuple(int(x) for x in a.get("strides", [1] * rank))
        dil = tuple(int(x) for x in a.get("dilations", [1] * rank))
        pads = self.pads(a, shape[1:], k, strides, dil)
        out = tuple(
            (shape[1 + i] + pads[i] + pads[rank + i] - dil[i] * (k[i] - 1) - 1) // strides[i] + 1
            for i in range(rank)
        )
        self.make(
            g.Conv,
            n,
            [n.input[0]],
            (w.shape[0], *out),
            weight=w,
            bias=b,
            stride=strides,
            pads=pads,
            dilation=dil,
            groups=group,
        )

    def conv_transpose(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        rank = self.spatial(shape)
        w = self.const(n.input[1], "weight").astype(np.float64)  # (in, out/group, k...)
        group = int(a.get("group", 1))
        if w.ndim != rank + 2 or w.shape[0] != shape[0]:
            raise self.fail(f"weight of shape {w.shape} does not match the input {shape}")
        if "output_shape" in a or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            raise self.fail("output_shape and auto_pad SAME are not supported; give pads")
        k = w.shape[2:]
        strides = tuple(int(x) for x in a.get("strides", [1] * rank))
        dil = tuple(int(x) for x in a.get("dilations", [1] * rank))
        p = tuple(int(x) for x in a.get("pads", [0] * 2 * rank))
        out_pad = tuple(int(x) for x in a.get("output_padding", [0] * rank))
        conv_pads = tuple(dil[i % rank] * (k[i % rank] - 1) - p[i] for i in range(2 * rank))
        if min(conv_pads) < 0:
            raise self.fail(f"pads {p} are larger than the kernel's reach")
        # convolution form: (out, in/group, k...) with the kernel flipped
        cin, cout_g = w.shape[0] // group, w.shape[1]
        conv_w = w.reshape(group, cin, cout_g, *k).swapaxes(1, 2).reshape(group * cout_g, cin, *k)
        conv_w = np.ascontiguousarray(np.flip(conv_w, axis=tuple(range(2, 2 + rank))))
        b = None
        if len(n.input) > 2 and n.input[2]:
            b = self.const(n.input[2], "bias").astype(np.float64).reshape(-1)
        out = tuple(
            (shape[1 + i] - 1) * strides[i]
            - p[i]
            - p[rank + i]
            + dil[i] * (k[i] - 1)
            + 1
            + out_pad[i]
            for i in range(rank)
        )
        self.make(
            g.Conv,
            n,
            [n.input[0]],
            (conv_w.shape[0], *out),
            weight=conv_w,
            bias=b,
            stride=strides,
            pads=conv_pads,
            dilation=dil,
            groups=group,
            transposed=True,
            output_padding=out_pad,
        )

    def features(self, name: str) -> int:
        shape = self.shape(name)
        if len(shape) != 1:
            raise self.fail(f"input of shape {shape} must be flattened first (Flatten or Reshape)")
        return shape[0]

    def gemm(self, n: Any, a: dict[str, Any]) -> None:
        if a.get("transA", 0):
            raise self.fail("transA=1 is not supported (the input is a row vector)")
        features = self.features(n.input[0])
        bmat = self.const(n.input[1], "weight B").astype(np.float64)
        w = bmat if a.get("transB", 0) else bmat.T
        w = w * float(a.get("alpha", 1.0))
        if w.ndim != 2 or w.shape[1] != features:
            raise self.fail(f"weight {bmat.shape} does not match {features} input features")
        bias = None
        if len(n.input) > 2 and n.input[2]:
            c = self.const(n.input[2], "bias C").astype(np.float64) * float(a.get("beta", 1.0))
            bias = self.per_sample_constant(c, 2)
            if bias.size == 1:
                bias = np.full(w.shape[0], float(bias.reshape(-1)[0]))
            if bias.shape != (w.shape[0],):
                raise self.fail(f"bias C of shape {c.shape} is not one value per output")
        self.make(g.Linear, n, [n.input[0]], (w.shape[0],), weight=w, bias=bias)

    def matmul(self, n: Any, a: dict[str, Any]) -> None:
        features = self.features(n.input[0])
        bmat = self.const(n.input[1], "weight").astype(np.float64)
        if bmat.ndim != 2 or bmat.shape[0] != features:
            raise self.fail(f"weight {bmat.shape} does not match {features} input features")
        self.make(g.Linear, n, [n.input[0]], (bmat.shape[1],), weight=bmat.T.copy())

    # -- element-wise ---------------------------------------------------------------------
    def elementwise(self, n: Any, a: dict[str, Any]) -> None:
        kind = ELEMENTWISE[n.op_type]
        live = [i for i in n.input if i not in self.consts]
        shapes = [self.shape(i) for i in live]
        rank = 1 + max(len(s) for s in shapes)
        inputs: list[str] = []
        for pos, i in enumerate(n.input):
            if i in self.consts:
                value = self.consts[i].astype(np.float64)
                if n.op_type == "Div":
                    if pos == 0:
                        raise self.fail("dividing a constant by an activation is not supported")
                    value = 1.0 / value
                inputs.append(self.constant_node(self.per_sample_constant(value, rank), i))
            else:
                if n.op_type == "Div" and pos == 1:
                    raise self.fail("dividing by an activation is not supported")
                inputs.append(i)
        shape = self.broadcast([self.graph.tensors[i].shape for i in inputs])
        if shape not in shapes:
            raise self.fail(f"the result {shape} is larger than every activation it reads")
        self.make(g.Eltwise, n, inputs, shape, kind=kind)

    def broadcast(self, shapes: list[Shape]) -> Shape:
        try:
            return tuple(int(d) for d in np.broadcast_shapes(*shapes))
        except ValueError:
            raise self.fail(f"shapes {shapes} do not broadcast") from None

    # -- activations ----------------------------------------------------------------------
    def activation(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        kind = ACTIVATIONS[n.op_type]
        extra = {}
        if kind == "hardsigmoid":
            extra = {"alpha": float(a.get("alpha", 0.2)), "beta": float(a.get("beta", 0.5))}
        self.make(g.Activation, n, [n.input[0]], shape, kind=kind, **extra)

    def leaky_relu(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        self.make(g.LeakyRelu, n, [n.input[0]], shape, alpha=float(a.get("alpha", 0.01)))

    def clip(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        lo, hi = float(a.get("min", -np.inf)), float(a.get("max", np.inf))
        if len(n.input) > 1 and n.input[1]:
            lo = float(self.const(n.input[1], "min").reshape(-1)[0])
        if len(n.input) > 2 and n.input[2]:
            hi = float(self.const(n.input[2], "max").reshape(-1)[0])
        self.make(g.Clip, n, [n.input[0]], shape, lo=lo, hi=hi)

    def batchnorm(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        if len(n.output) > 1 and any(n.output[1:]):
            raise self.fail("training-mode BatchNormalization is not supported")
        if a.get("training_mode", 0):
            raise self.fail("training-mode BatchNormalization is not supported")
        gamma, beta, mean, var = (
            self.const(n.input[i], what).astype(np.float64).reshape(-1)
            for i, what in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var"))
        )
        if not gamma.size == beta.size == mean.size == var.size == shape[0]:
            raise self.fail(f"{gamma.size} channels, the input has {shape[0]}")
        eps = float(a.get("epsilon", 1e-5))
        self.make(
            g.BatchNorm,
            n,
            [n.input[0]],
            shape,
            gamma=gamma,
            beta=beta,
            mean=mean,
            var=var,
            eps=eps,
        )

    # -- pooling --------------------------------------------------------------------------
    def pool(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        rank = self.spatial(shape)
        k = tuple(int(x) for x in a["kernel_shape"])
        if len(k) != rank:
            raise self.fail(f"kernel {k} for a {rank}-D input")
        strides = tuple(int(x) for x in a.get("strides", [1] * rank))
        dil = tuple(int(x) for x in a.get("dilations", [1] * rank))
        if n.op_type == "AveragePool" and any(d != 1 for d in dil):
            raise self.fail("dilated average pooling is not supported")
        if len(n.output) > 1 and n.output[1]:
            raise self.fail("the MaxPool indices output is not supported")
        pads = self.pads(a, shape[1:], k, strides, dil)
        ceil = bool(a.get("ceil_mode", 0))
        out = tuple(
            g.pool_output_size(
                shape[1 + i], k[i], strides[i], pads[i], pads[rank + i], ceil, dil[i]
            )
            for i in range(rank)
        )
        kind = "max" if n.op_type == "MaxPool" else "avg"
        self.make(
            g.Pool,
            n,
            [n.input[0]],
            (shape[0], *out),
            kind=kind,
            kernel=k,
            stride=strides,
            dilation=dil,
            pads=pads,
            ceil=ceil,
            method="float",
            count_include_pad=bool(a.get("count_include_pad", 0)),
        )

    def global_pool(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        self.spatial(shape)
        kind = "max" if n.op_type == "GlobalMaxPool" else "avg"
        out = (shape[0],) + (1,) * (len(shape) - 1)
        self.make(g.GlobalPool, n, [n.input[0]], out, kind=kind, method="float")

    def reduce(self, n: Any, a: dict[str, Any]) -> None:
        """ReduceMean/ReduceMax over every spatial axis: a global pool (+ Flatten for
        keepdims=0)."""
        shape = self.shape(n.input[0])
        rank = self.spatial(shape)
        axes = a.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            axes = self.const(n.input[1], "axes").tolist()
        full = rank + 2
        if axes is None or sorted(int(x) % full for x in axes) != list(range(2, full)):
            spatial = ", ".join(map(str, range(2, full)))
            raise self.fail(
                f"{n.op_type} over axes {axes}: only the spatial mean (axes {spatial}) is "
                "supported, as a global pool"
            )
        kind = "max" if n.op_type == "ReduceMax" else "avg"
        pooled = (shape[0],) + (1,) * rank
        if a.get("keepdims", 1):
            self.make(g.GlobalPool, n, [n.input[0]], pooled, kind=kind, method="float")
            return
        mid = self.graph.unique_name(f"{n.output[0]}/pooled")
        self.add(
            g.GlobalPool(
                name=self.label, inputs=[n.input[0]], outputs=[mid], kind=kind, method="float"
            ),
            pooled,
        )
        self.add(
            g.Flatten(
                name=self.graph.unique_name(f"{self.label}/flatten"),
                inputs=[mid],
                outputs=[n.output[0]],
            ),
            (shape[0],),
        )

    # -- shapes ---------------------------------------------------------------------------
    def to_shape(self, n: Any, new: Shape) -> None:
        """(batch, *new): a Flatten when `new` is one axis, else a Reshape."""
        src = n.input[0]
        shape = self.shape(src)
        if int(np.prod(new)) != int(np.prod(shape)):
            raise self.fail(f"{shape} and {new} hold different numbers of elements")
        if len(new) == 1 and len(shape) > 1:
            self.make(g.Flatten, n, [src], new)
        else:
            self.make(g.Reshape, n, [src], new, shape=tuple(new))

    def flatten(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        if int(a.get("axis", 1)) != 1:
            raise self.fail(f"Flatten axis {a.get('axis')} would fold the batch dimension")
        self.to_shape(n, (int(np.prod(shape)),))

    def reshape(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        if len(n.input) > 1:
            target = self.const(n.input[1], "shape").astype(np.int64).tolist()
        else:
            target = list(a.get("shape", []))
        full = [BATCH, *shape]
        if not a.get("allowzero", 0):
            target = [full[i] if v == 0 and i < len(full) else v for i, v in enumerate(target)]
        size = int(np.prod(shape))
        if not target or target[0] not in (BATCH, 1, -1):
            raise self.fail(f"Reshape to {target} moves data across the batch")
        rest = target[1:]
        if target[0] == -1 and not (
            rest and all(v not in (-1, BATCH) for v in rest) and np.prod(rest) == size
        ):
            raise self.fail(f"Reshape to {target} moves data across the batch")
        known = [v for v in rest if v != -1]
        if rest.count(-1) > 1 or any(v <= 0 for v in known):
            raise self.fail(f"Reshape to {target} is not supported")
        if rest.count(-1) == 1:
            if size % int(np.prod(known or [1])):
                raise self.fail(f"Reshape to {target} does not divide {size} elements")
            rest = [v if v != -1 else size // int(np.prod(known or [1])) for v in rest]
        if not rest or int(np.prod(rest)) != size:
            raise self.fail(f"Reshape to {target} does not keep {size} elements")
        self.to_shape(n, tuple(int(v) for v in rest))

    def squeeze(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        axes = a.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            axes = self.const(n.input[1], "axes").tolist()
        full = [1, *shape]
        if n.op_type == "Squeeze":
            drop = (
                {int(x) % len(full) for x in axes}
                if axes is not None
                else {i for i, d in enumerate(full) if d == 1 and i}
            )
            if 0 in drop or any(full[i] != 1 for i in drop):
                raise self.fail(f"Squeeze of axes {sorted(drop)} of {tuple(full)}")
            new = tuple(d for i, d in enumerate(full) if i not in drop)
        else:
            if axes is None:
                raise self.fail("Unsqueeze needs axes")
            out_rank = len(full) + len(axes)
            put = sorted(int(x) % out_rank for x in axes)
            if 0 in put:
                raise self.fail("Unsqueeze before the batch axis is not supported")
            new_full = list(full)
            for ax in put:
                new_full.insert(ax, 1)
            new = tuple(new_full)
        if not 2 <= len(new) <= 4:
            raise self.fail(f"the result has rank {len(new)}; the graph takes ranks 2 to 4")
        self.to_shape(n, new[1:])

    def concat(self, n: Any, a: dict[str, Any]) -> None:
        shapes = [self.shape(i) for i in n.input]
        axis = int(a.get("axis", 1))
        if axis % (len(shapes[0]) + 1) != 1:
            raise self.fail(f"Concat along axis {axis}: only the channel axis (1) is supported")
        if any(s[1:] != shapes[0][1:] or len(s) != len(shapes[0]) for s in shapes):
            raise self.fail(f"inputs {shapes} differ beyond the channel axis")
        out = (sum(s[0] for s in shapes), *shapes[0][1:])
        self.make(g.Concat, n, list(n.input), out)

    def slice(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        rank = len(shape) + 1
        if len(n.input) > 1:
            values = [self.const(i, "slice bound") for i in n.input[1:] if i]
            starts, ends = values[0].tolist(), values[1].tolist()
            axes = values[2].tolist() if len(values) > 2 else list(range(len(starts)))
            steps = values[3].tolist() if len(values) > 3 else [1] * len(starts)
        else:
            starts, ends = a["starts"], a["ends"]
            axes = a.get("axes", list(range(len(starts))))
            steps = [1] * len(starts)
        src = n.input[0]
        cur = list(shape)
        parts = list(zip(starts, ends, axes, steps, strict=True))
        for k, (start, end, axis, step) in enumerate(parts):
            axis = int(axis) % rank
            if axis == 0:
                raise self.fail("slicing the batch axis is not supported")
            if step <= 0:
                raise self.fail(f"step {step}: only forward slices are supported")
            lo, hi, _ = slice(int(start), int(end), int(step)).indices(cur[axis - 1])
            cur[axis - 1] = len(range(lo, hi, int(step)))
            last = k == len(parts) - 1
            out = n.output[0] if last else self.graph.unique_name(f"{n.output[0]}/{k}")
            name = self.label if k == 0 else self.graph.unique_name(f"{self.label}/{k}")
            node = g.Slice(
                name=name,
                inputs=[src],
                outputs=[out],
                axis=axis - 1,
                start=lo,
                stop=hi,
                step=int(step),
            )
            self.add(node, tuple(cur))
            src = out

    def identity(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        if len(n.output) > 1 and any(o and self.consumers.get(o) for o in n.output[1:]):
            raise self.fail("the Dropout mask output is used")
        if n.op_type == "Dropout" and a.get("training_mode", 0):
            raise self.fail("training-mode Dropout is not supported")
        self.make(g.Reshape, n, [n.input[0]], shape, shape=shape)

    def softmax(self, n: Any, a: dict[str, Any]) -> None:
        shape = self.shape(n.input[0])
        full = len(shape) + 1
        axis = int(a.get("axis", 1 if self.opset < 13 else -1)) % full
        # before opset 13 the input is coerced to 2-D at `axis`: the class axis only when every
        # later axis has size 1
        if axis != 1 or (self.opset < 13 and any(d != 1 for d in shape[1:])):
            raise self.fail(f"{n.op_type} over axis {a.get('axis')} is not over the channel axis")
        self.make(g.Softmax, n, [n.input[0]], shape, log=n.op_type == "LogSoftmax")


SUPPORTED_OPS = (
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "BatchNormalization",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Abs",
    "HardSigmoid",
    "HardSwish",
    "Mish",
    "Softplus",
    "LeakyRelu",
    "Clip",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "ReduceMean",
    "ReduceMax",
    "Flatten",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Concat",
    "Slice",
    "Dropout",
    "Identity",
    "Softmax",
    "LogSoftmax",
)
