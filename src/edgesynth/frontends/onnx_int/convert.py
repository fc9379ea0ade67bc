"""Turn the nodes of an integer ONNX graph into the network graph, one handler per ONNX op.

Values flow as `Sym`s (exact pending arithmetic, see `symbolic.py`) or constants (NumPy arrays).
A handler either folds its node into a `Sym` (elementwise arithmetic with constants, casts,
rounding, clipping, padding) or writes graph operators (convolution, linear, pooling, addition
of two values, flatten). Host-side post-processing after the integer network (`Gather`,
`Unsqueeze`, `Concat` splitting an output, `Sigmoid`, `Softmax`, `LogSoftmax`) is dropped with a
warning: the values it reads become the graph's outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx_int import symbolic as sy
from edgesynth.frontends.onnx_int.reader import OnnxModel, OnnxNode
from edgesynth.frontends.onnx_int.symbolic import WIDE, Sym, Term
from edgesynth.ir import graph as g

INT_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}  # ONNX uint8 int8 uint16 int16 int32 int64 uint32 uint64
FLOAT_TYPES = {1, 10, 11, 16}
TAIL_ENTRY = {"Gather", "Sigmoid", "Softmax", "LogSoftmax", "Tanh", "ArgMax"}


class Tail:
    """A value computed by host-side post-processing (not part of the integer network)."""


TAIL = Tail()
Value = Sym | np.ndarray | Tail


class Builder:
    def __init__(self, model: OnnxModel, input_types: dict[str, g.QType]) -> None:
        self.model = model
        self.file = str(model.path)
        self.graph = g.Graph(name=model.path.stem, source=self.file)
        self.env: dict[str, Value] = dict(model.constants)
        self.ranges: dict[str, tuple[int, int]] = {}
        self.tail_inputs: list[str] = []
        self.dropped: list[str] = []
        self.onnx_to_graph: dict[str, str] = {}
        for vi in model.inputs:
            if len(vi.shape) < 2:
                raise EdgesynthError(
                    f"input `{vi.name}` has shape {vi.shape}: expected (batch, channels, ...)",
                    file=self.file,
                )
            qtype = input_types[vi.name]
            shape = tuple(int(s) for s in vi.shape[1:])
            if any(s <= 0 for s in shape):
                raise EdgesynthError(
                    f"input `{vi.name}` has a symbolic shape {vi.shape}; give it a fixed shape",
                    file=self.file,
                )
            self.graph.add_input(vi.name, shape, qtype)
            self.ranges[vi.name] = (qtype.lo, qtype.hi)
            self.env[vi.name] = sy.bare(vi.name, shape, True, vi.name)
            self.onnx_to_graph[vi.name] = vi.name

    # -- helpers -------------------------------------------------------------------------------
    def fail(self, node: OnnxNode, message: str) -> EdgesynthError:
        return EdgesynthError(f"ONNX node {node.name} ({node.op}): {message}", file=self.file)

    def value(self, node: OnnxNode, k: int) -> Value:
        name = node.inputs[k]
        if name not in self.env:
            raise self.fail(node, f"input `{name}` is not produced by any earlier node")
        return self.env[name]

    def sym(self, node: OnnxNode, k: int) -> Sym:
        v = self.value(node, k)
        if not isinstance(v, Sym):
            raise self.fail(node, f"input `{node.inputs[k]}` is a constant; expected activations")
        return v

    def const(self, node: OnnxNode, k: int) -> np.ndarray:
        v = self.value(node, k) if k < len(node.inputs) and node.inputs[k] else None
        if not isinstance(v, np.ndarray):
            raise self.fail(node, f"input {k} must be a constant (an initializer)")
        return v

    def integers(self, node: OnnxNode, a: np.ndarray, what: str) -> np.ndarray:
        arr = np.asarray(a)
        if np.issubdtype(arr.dtype, np.floating):
            if not np.all(np.isfinite(arr)) or not np.array_equal(arr, np.round(arr)):
                raise self.fail(node, f"{what} holds non-integer values: not an integer graph")
            if np.abs(arr).max(initial=0) >= 2.0**53:
                raise self.fail(node, f"{what} holds values beyond 2**53")
        elif not np.issubdtype(arr.dtype, np.integer):
            raise self.fail(node, f"{what} has type {arr.dtype}; expected numbers")
        return arr.astype(np.int64)

    def per_channel(self, node: OnnxNode, c: np.ndarray, s: Sym) -> np.ndarray | Fraction:
        """A constant operand of elementwise arithmetic: a scalar fraction, or an integer
        per-channel object array (ONNX broadcasting along the channel axis only)."""
        arr = np.asarray(c)
        if arr.size == 1:
            x = arr.reshape(()).item()
            if isinstance(x, float) and x != int(x):
                return sy.rational(x, f"ONNX node {node.name}")
            return np.asarray(int(x), dtype=object)
        rank = len(s.shape) + 1
        shape = (1,) * (rank - arr.ndim) + tuple(arr.shape)
        channel_axis_only = (
            len(shape) == rank
            and all(d == 1 for i, d in enumerate(shape) if i != 1)
            and shape[1] == s.shape[0]
        )
        if not channel_axis_only:
            raise self.fail(
                node,
                f"constant of shape {tuple(arr.shape)} against activations "
                f"{(1, *s.shape)}: only scalars and per-channel constants are supported",
            )
        return sy.as_object(self.integers(node, arr.reshape(-1), "the constant"))

    def set(self, node: OnnxNode, value: Value, k: int = 0) -> None:
        self.env[node.outputs[k]] = value

    # -- writing the graph -------------------------------------------------------------------
    def add_node(self, op: g.Node, shape: tuple[int, ...], lo: int, hi: int, typed=None) -> str:
        qtype = typed or sy.qtype_for(lo, hi, f"ONNX node {op.source or op.name}")
        self.graph.add(op, shape, qtype)
        self.ranges[op.output] = (lo, hi)
        return op.output

    def materialize(self, s: Sym, consumer: OnnxNode) -> str:
        """Write `s` as graph operators; return the tensor holding it."""
        if s.pads is not None:
            raise self.fail(consumer, "a `Pad` output can only feed a Conv or a pooling")
        if s.is_bare:
            return s.terms[0].tensor
        if s.rounding is None:
            if s.div != 1:
                raise self.fail(
                    consumer,
                    f"reads `{s.onnx_name}`, which is not an integer (a division by {s.div} "
                    "with no Floor/Cast/Clip after it)",
                )
            s = replace(s, rounding="floor")
        s = sy.reduce(s)
        name = self.graph.unique_name(s.onnx_name)
        source = ", ".join(s.nodes)
        term_tensors: list[str] = []
        for k, term in enumerate(s.terms):
            if len(s.terms) == 1 or sy._is_one(term.mul):
                term_tensors.append(term.tensor)
                continue
            lo, hi = self.ranges[term.tensor]
            mul = sy.simplify(term.mul)
            rlo, rhi = sy.requantize_range(lo, hi, mul, 0, 1, "floor", -WIDE, WIDE)
            op = g.Requantize(
                name=self.graph.unique_name(f"{name}_in{k}"),
                inputs=[term.tensor],
                outputs=[self.graph.unique_name(f"{name}_in{k}")],
                source=source,
                mul=mul,
                add=0,
                div=1,
                rounding="floor",
                lo=-WIDE,
                hi=WIDE,
            )
            term_tensors.append(self.add_node(op, s.shape, rlo, rhi))
        if len(s.terms) > 1:
            lo = sum(self.ranges[t][0] for t in term_tensors)
            hi = sum(self.ranges[t][1] for t in term_tensors)
            target = name if (sy._is_zero(s.add) and s.div == 1 and not _clips(s)) else None
            out_name = target or self.graph.unique_name(f"{name}_sum")
            node_name = self.graph.unique_name(s.origin) if s.origin else out_name
            op = g.Eltwise(
                name=node_name, inputs=term_tensors, outputs=[out_name], source=source, kind="add"
            )
            current = self.add_node(op, s.shape, lo, hi)
            mul: np.ndarray | int = 1
            if target:
                return self._remember(s, current)
        else:
            current = term_tensors[0]
            mul = sy.simplify(s.terms[0].mul)
        lo, hi = self.ranges[current]
        clip_lo = -WIDE if s.lo is None else s.lo
        clip_hi = WIDE if s.hi is None else s.hi
        add = sy.simplify(s.add)
        rlo, rhi = sy.requantize_range(lo, hi, mul, add, s.div, s.rounding, clip_lo, clip_hi)
        if rlo > rhi:
            rlo = rhi = clip_lo if rlo > clip_hi else clip_hi
        op = g.Requantize(
            name=name,
            inputs=[current],
            outputs=[name],
            source=source,
            mul=mul,
            add=add,
            div=s.div,
            rounding=s.rounding,
            lo=clip_lo,
            hi=clip_hi,
        )
        typed = sy.qtype_for(clip_lo, clip_hi, name) if _clips(s) else None
        return self._remember(s, self.add_node(op, s.shape, rlo, rhi, typed))

    def _remember(self, s: Sym, tensor: str) -> str:
        self.onnx_to_graph[s.onnx_name] = tensor
        # later readers of the same ONNX value reuse the tensor
        if isinstance(self.env.get(s.onnx_name), Sym):
            self.env[s.onnx_name] = sy.bare(tensor, s.shape, s.integer_domain, s.onnx_name)
        return tensor

    def open(self, s: Sym, consumer: OnnxNode) -> Sym:
        """`s` ready for more arithmetic: written to the graph first if rounded or clipped."""
        if not s.closed and s.pads is None:
            return s
        tensor = self.materialize(s, consumer)
        return sy.bare(tensor, s.shape, s.integer_domain, s.onnx_name)

    def tensor_of(self, node: OnnxNode, k: int) -> tuple[str, Sym]:
        s = self.sym(node, k)
        pads = s.pads
        base = replace(s, pads=None)
        return self.materialize(base, node), replace(s, pads=pads)


def _clips(s: Sym) -> bool:
    return s.lo is not None or s.hi is not None


# -- handlers -----------------------------------------------------------------------------------


def _spatial_attrs(b: Builder, node: OnnxNode, rank: int) -> dict[str, tuple[int, ...]]:
    a = node.attrs
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", ""):
        raise b.fail(node, f"auto_pad={auto_pad} is not supported; export with explicit pads")
    kernel = tuple(int(k) for k in a["kernel_shape"]) if "kernel_shape" in a else ()
    return {
        "kernel": kernel,
        "strides": tuple(int(s) for s in a.get("strides", [1] * rank)),
        "pads": tuple(int(p) for p in a.get("pads", [0] * (2 * rank))),
        "dilations": tuple(int(d) for d in a.get("dilations", [1] * rank)),
    }


def _merge_pads(own: tuple[int, ...], pending: tuple[int, ...] | None) -> tuple[int, ...]:
    if pending is None:
        return own
    return tuple(a + b for a, b in zip(own, pending, strict=True))


def _out_size(size: int, lo: int, hi: int, kernel: int, stride: int, dilation: int, ceil=False):
    span = dilation * (kernel - 1) + 1
    room = size + lo + hi - span
    if room < 0:
        return 0
    return (-(-room // stride) if ceil else room // stride) + 1


def conv(b: Builder, node: OnnxNode) -> None:
    x, xs = b.tensor_of(node, 0)
    weight = b.integers(node, b.const(node, 1), "the weight")
    bias = b.integers(node, b.const(node, 2), "the bias") if len(node.inputs) > 2 else None
    rank = weight.ndim - 2
    if rank not in (1, 2) or len(xs.shape) != rank + 1:
        raise b.fail(node, f"{rank}-D convolution of {xs.shape} activations is not supported")
    at = _spatial_attrs(b, node, rank)
    groups = int(node.attrs.get("group", 1))
    if at["kernel"] and at["kernel"] != weight.shape[2:]:
        raise b.fail(node, f"kernel_shape {at['kernel']} disagrees with weights {weight.shape}")
    pads = _merge_pads(at["pads"], xs.pads)
    cin = xs.shape[0]
    if weight.shape[1] * groups != cin or weight.shape[0] % groups:
        raise b.fail(node, f"weights {weight.shape} with group={groups} do not fit {cin} channels")
    out_spatial = tuple(
        _out_size(
            xs.shape[1 + i],
            pads[i],
            pads[rank + i],
            weight.shape[2 + i],
            at["strides"][i],
            at["dilations"][i],
        )
        for i in range(rank)
    )
    if min(out_spatial) <= 0:
        raise b.fail(node, f"the kernel does not fit the {xs.shape[1:]} input")
    if bias is not None:
        bias = bias.reshape(-1)
    lo, hi = b.ranges[x]
    rlo, rhi = sy.conv_range(weight, bias, lo, hi, padded=any(pads))
    name = b.graph.unique_name(node.outputs[0])
    op = g.Conv(
        name=node.name,
        inputs=[x],
        outputs=[name],
        source=node.name,
        weight=weight,
        bias=bias,
        stride=at["strides"],
        pads=pads,
        dilation=at["dilations"],
        groups=groups,
    )
    out = b.add_node(op, (weight.shape[0], *out_spatial), rlo, rhi)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, (weight.shape[0], *out_spatial), False, node.outputs[0]))


def _linear(b: Builder, node: OnnxNode, weight: np.ndarray, bias: np.ndarray | None) -> None:
    x, xs = b.tensor_of(node, 0)
    if xs.pads is not None:
        raise b.fail(node, "a padded value cannot feed a linear layer")
    if len(xs.shape) != 1:
        raise b.fail(node, f"expects flattened activations, got per-sample shape {xs.shape}")
    if weight.shape[1] != xs.shape[0]:
        raise b.fail(node, f"weights {weight.shape[::-1]} do not fit {xs.shape[0]} inputs")
    lo, hi = b.ranges[x]
    rlo, rhi = sy.conv_range(weight, bias, lo, hi, padded=False)
    name = b.graph.unique_name(node.outputs[0])
    op = g.Linear(
        name=node.name, inputs=[x], outputs=[name], source=node.name, weight=weight, bias=bias
    )
    out = b.add_node(op, (weight.shape[0],), rlo, rhi)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, (weight.shape[0],), False, node.outputs[0]))


def matmul(b: Builder, node: OnnxNode) -> None:
    weight = b.integers(node, b.const(node, 1), "the weight")
    if weight.ndim != 2:
        raise b.fail(node, f"weights of shape {weight.shape}: expected a matrix")
    _linear(b, node, weight.T.copy(), None)


def gemm(b: Builder, node: OnnxNode) -> None:
    a = node.attrs
    if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
        raise b.fail(node, "alpha and beta must be 1 in an integer graph")
    if int(a.get("transA", 0)):
        raise b.fail(node, "transA=1 is not supported")
    weight = b.integers(node, b.const(node, 1), "the weight")
    if not int(a.get("transB", 0)):
        weight = weight.T.copy()
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = b.integers(node, b.const(node, 2), "the bias").reshape(-1)
        if bias.size == 1:
            bias = np.full(weight.shape[0], int(bias[0]), dtype=np.int64)
    _linear(b, node, weight, bias)


def _pool(b: Builder, node: OnnxNode, kind: str, global_: bool = False) -> None:
    x, xs = b.tensor_of(node, 0)
    rank = len(xs.shape) - 1
    if rank not in (1, 2):
        raise b.fail(node, f"pooling of per-sample shape {xs.shape} is not supported")
    if global_:
        at = {
            "kernel": tuple(xs.shape[1:]),
            "strides": (1,) * rank,
            "pads": (0,) * (2 * rank),
            "dilations": (1,) * rank,
        }
    else:
        at = _spatial_attrs(b, node, rank)
    ceil = bool(node.attrs.get("ceil_mode", 0))
    lo, hi = b.ranges[x]
    if xs.pads is not None and kind == "max" and lo < 0:
        raise b.fail(
            node,
            "a zero `Pad` before max pooling of signed values is not supported (the pooling "
            "would see the zeros)",
        )
    pads = _merge_pads(at["pads"], xs.pads)
    out_spatial = tuple(
        _out_size(
            xs.shape[1 + i],
            pads[i],
            pads[rank + i],
            at["kernel"][i],
            at["strides"][i],
            at["dilations"][i],
            ceil,
        )
        for i in range(rank)
    )
    if min(out_spatial) <= 0:
        raise b.fail(node, f"the window does not fit the {xs.shape[1:]} input")
    count = int(np.prod(at["kernel"]))
    if kind == "sum":
        exact = tuple(
            _out_size(
                xs.shape[1 + i],
                pads[i],
                pads[rank + i],
                at["kernel"][i],
                at["strides"][i],
                at["dilations"][i],
            )
            for i in range(rank)
        )
        own_pads = any(at["pads"])
        include = int(node.attrs.get("count_include_pad", 0))
        if exact != out_spatial:
            raise b.fail(node, "ceil_mode average pooling (a varying divisor) is not supported")
        if own_pads and not include:
            raise b.fail(
                node,
                "padded average pooling with count_include_pad=0 divides by a varying "
                "count; not supported",
            )
        padded = any(pads)
        rlo = count * (min(lo, 0) if padded else lo)
        rhi = count * (max(hi, 0) if padded else hi)
    else:
        rlo, rhi = lo, hi
    name = b.graph.unique_name(node.outputs[0])
    op = g.Pool(
        name=node.name,
        inputs=[x],
        outputs=[name],
        source=node.name,
        kind=kind,
        kernel=at["kernel"],
        stride=at["strides"],
        dilation=at["dilations"],
        pads=pads,
        ceil=ceil,
        method="floor",
    )
    shape = (xs.shape[0], *out_spatial)
    out = b.add_node(op, shape, rlo, rhi)
    result = sy.bare(out, shape, xs.integer_domain, node.outputs[0])
    if kind == "sum":  # the ONNX average is the sum divided by the window size, exactly
        result = replace(result, div=count, integer_domain=False, nodes=[node.name])
    else:
        b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, result)


def maxpool(b: Builder, node: OnnxNode) -> None:
    if int(node.attrs.get("storage_order", 0)) or (len(node.outputs) > 1 and node.outputs[1]):
        raise b.fail(node, "MaxPool indices are not supported")
    _pool(b, node, "max")


def averagepool(b: Builder, node: OnnxNode) -> None:
    _pool(b, node, "sum")


def global_averagepool(b: Builder, node: OnnxNode) -> None:
    _pool(b, node, "sum", global_=True)


def global_maxpool(b: Builder, node: OnnxNode) -> None:
    _pool(b, node, "max", global_=True)


def pad(b: Builder, node: OnnxNode) -> None:
    s = b.sym(node, 0)
    a = node.attrs
    if a.get("mode", "constant") != "constant":
        raise b.fail(node, f"mode={a.get('mode')} padding is not supported (only zeros)")
    if "pads" in a:
        pads = [int(p) for p in a["pads"]]
        value = float(a.get("value", 0.0))
    else:
        pads = [int(p) for p in b.const(node, 1).reshape(-1)]
        has_value = len(node.inputs) > 2 and node.inputs[2]
        value = float(b.const(node, 2).reshape(-1)[0]) if has_value else 0.0
    if value != 0.0:
        raise b.fail(node, f"padding with {value} is not supported (only zeros)")
    rank = len(s.shape) + 1
    if len(pads) != 2 * rank:
        raise b.fail(node, f"pads {pads} do not match rank {rank}")
    before, after = pads[:rank], pads[rank:]
    if before[0] or after[0] or before[1] or after[1]:
        raise b.fail(node, "padding the batch or channel axis is not supported")
    if any(p < 0 for p in pads):
        raise b.fail(node, "negative pads (cropping) are not supported")
    spatial = tuple(before[2:]) + tuple(after[2:])
    tensor = b.materialize(replace(s, pads=None), node)
    base = sy.bare(tensor, s.shape, s.integer_domain, node.outputs[0])
    total = _merge_pads(spatial, s.pads) if s.pads is not None else spatial
    b.set(node, replace(base, pads=total if any(total) else None))


def mul(b: Builder, node: OnnxNode) -> None:
    left, right = b.value(node, 0), b.value(node, 1)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        b.set(node, np.asarray(left * right))
        return
    if isinstance(left, Sym) and isinstance(right, Sym):
        raise b.fail(node, "the product of two activations is not supported")
    s, c = (left, right) if isinstance(left, Sym) else (right, left)
    s = b.open(s, node)
    factor = b.per_channel(node, c, s)
    out = sy.scale(s, factor, node.name)
    out.integer_domain = s.integer_domain and np.issubdtype(np.asarray(c).dtype, np.integer)
    out.onnx_name = node.outputs[0]
    b.set(node, out)


def _add_sub(b: Builder, node: OnnxNode, sign: int) -> None:
    left, right = b.value(node, 0), b.value(node, 1)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        b.set(node, np.asarray(left + sign * right))
        return
    if isinstance(left, Sym) and isinstance(right, Sym):
        if any(k.startswith("in1_") for k in node.attrs):
            quantlab_add(b, node)
            return
        a, c = b.open(left, node), b.open(right, node)
        if a.shape != c.shape:
            raise b.fail(node, f"adds {a.shape} and {c.shape}: broadcasting is not supported")
        b.set(node, sy.combine(a, c, sign, node.name, node.outputs[0]))
        return
    if isinstance(left, Sym):
        s = b.open(left, node)
        const = b.per_channel(node, right, s)
        if sign < 0:
            const = -const
    else:
        s = b.open(right, node)
        if sign < 0:
            s = sy.scale(s, np.asarray(-1, dtype=object), node.name)
        const = b.per_channel(node, left, s)
    out = sy.offset(s, const, node.name)
    out.onnx_name = node.outputs[0]
    b.set(node, out)


def add(b: Builder, node: OnnxNode) -> None:
    _add_sub(b, node, 1)


def sub(b: Builder, node: OnnxNode) -> None:
    _add_sub(b, node, -1)


def div(b: Builder, node: OnnxNode) -> None:
    left, right = b.value(node, 0), b.value(node, 1)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        b.set(node, np.asarray(left / right))
        return
    if not isinstance(left, Sym) or isinstance(right, Sym):
        raise b.fail(node, "only activations divided by a constant are supported")
    d = np.asarray(right)
    if d.size != 1:
        raise b.fail(node, "division by a per-channel constant is not supported")
    s = b.open(left, node)
    value = d.reshape(()).item()
    f = sy.rational(value, f"ONNX node {node.name}")
    if f <= 0:
        raise b.fail(node, f"division by {value}: the divisor must be positive")
    out = sy.scale(s, 1 / f, node.name)
    out.onnx_name = node.outputs[0]
    if s.integer_domain and np.issubdtype(d.dtype, np.integer):
        out.rounding = "trunc"  # ONNX integer division truncates toward zero
    b.set(node, out)


def _round(b: Builder, node: OnnxNode, mode: str) -> None:
    s = b.sym(node, 0)
    if s.pads is not None:
        raise b.fail(node, "rounding a padded value is not supported")
    if s.rounding is None:
        s = replace(s, rounding=mode)
    b.set(node, replace(s, onnx_name=node.outputs[0], nodes=[*s.nodes, node.name]))


def floor(b: Builder, node: OnnxNode) -> None:
    _round(b, node, "floor")


def round_(b: Builder, node: OnnxNode) -> None:
    _round(b, node, "half_even")


def cast(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    to = int(node.attrs.get("to", 1))
    if isinstance(v, np.ndarray):
        b.set(node, v)
        return
    s = v
    if to in INT_TYPES:
        if s.rounding is None and s.div != 1:
            s = replace(s, rounding="trunc")  # float -> int conversion truncates
        s = replace(s, integer_domain=True)
    elif to in FLOAT_TYPES:
        s = replace(s, integer_domain=False)
    else:
        raise b.fail(node, f"cast to ONNX type {to} is not supported")
    b.set(node, replace(s, onnx_name=node.outputs[0], nodes=[*s.nodes, node.name]))


def _bound(b: Builder, node: OnnxNode, x: object, low: bool) -> int | None:
    v = float(np.asarray(x).reshape(-1)[0])
    if abs(v) >= 1e30:
        return None
    if v != int(v):
        raise b.fail(node, f"clip bound {v} is not an integer")
    return int(v)


def clip(b: Builder, node: OnnxNode) -> None:
    s = b.sym(node, 0)
    a = node.attrs
    if "min" in a or "max" in a:
        lo = _bound(b, node, a.get("min", -1e38), True)
        hi = _bound(b, node, a.get("max", 1e38), False)
    else:
        has = [k < len(node.inputs) and node.inputs[k] for k in (1, 2)]
        lo = _bound(b, node, b.const(node, 1), True) if has[0] else None
        hi = _bound(b, node, b.const(node, 2), False) if has[1] else None
    _clip(b, node, s, lo, hi)


def relu(b: Builder, node: OnnxNode) -> None:
    _clip(b, node, b.sym(node, 0), 0, None)


def _clip(b: Builder, node: OnnxNode, s: Sym, lo: int | None, hi: int | None) -> None:
    if s.pads is not None:
        raise b.fail(node, "clipping a padded value is not supported")
    if s.rounding is None and s.div == 1:
        s = replace(s, rounding="floor")  # an integer: rounding does nothing
    new_lo = lo if s.lo is None else (s.lo if lo is None else max(s.lo, lo))
    new_hi = hi if s.hi is None else (s.hi if hi is None else min(s.hi, hi))
    b.set(
        node,
        replace(s, lo=new_lo, hi=new_hi, onnx_name=node.outputs[0], nodes=[*s.nodes, node.name]),
    )


def identity(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    if isinstance(v, Sym):
        v = replace(v, onnx_name=node.outputs[0])
    b.set(node, v)


def flatten(b: Builder, node: OnnxNode) -> None:
    if int(node.attrs.get("axis", 1)) != 1:
        raise b.fail(node, "only Flatten(axis=1) is supported")
    _flatten(b, node)


def _flatten(b: Builder, node: OnnxNode) -> None:
    s = b.sym(node, 0)
    if len(s.shape) == 1 and s.pads is None:
        b.set(node, replace(s, onnx_name=node.outputs[0]))
        return
    x = b.materialize(s, node)
    size = int(np.prod(s.shape))
    name = b.graph.unique_name(node.outputs[0])
    op = g.Flatten(name=node.name, inputs=[x], outputs=[name], source=node.name)
    lo, hi = b.ranges[x]
    out = b.add_node(op, (size,), lo, hi, b.graph.tensors[x].qtype)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, (size,), s.integer_domain, node.outputs[0]))


def reshape(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    target = [int(t) for t in b.const(node, 1).reshape(-1)]
    if isinstance(v, np.ndarray):
        b.set(node, v.reshape(target))
        return
    s = v
    size = int(np.prod(s.shape))
    rest = target[1:]
    if target[0] not in (-1, 1, 0) and not (len(target) == 2 and target[1] in (-1, size)):
        raise b.fail(node, f"reshape to {target} changes the batch axis")
    if len(target) == 2 and target[0] in (-1, 1) and target[1] in (-1, size):
        _flatten(b, node)
        return
    if -1 in rest:
        known = int(np.prod([r for r in rest if r != -1]))
        rest[rest.index(-1)] = size // known
    shape = tuple(s.shape[i] if r == 0 else r for i, r in enumerate(rest))
    if int(np.prod(shape)) != size:
        raise b.fail(node, f"cannot reshape {s.shape} to {shape}")
    if shape == s.shape:
        b.set(node, replace(s, onnx_name=node.outputs[0]))
        return
    if len(shape) == 1:
        _flatten(b, node)
        return
    x = b.materialize(s, node)
    name = b.graph.unique_name(node.outputs[0])
    op = g.Reshape(name=node.name, inputs=[x], outputs=[name], source=node.name, shape=shape)
    lo, hi = b.ranges[x]
    out = b.add_node(op, shape, lo, hi, b.graph.tensors[x].qtype)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, shape, s.integer_domain, node.outputs[0]))


def squeeze_unsqueeze(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    if isinstance(v, np.ndarray):
        axes = node.attrs.get("axes")
        if axes is None and len(node.inputs) > 1:
            axes = [int(a) for a in b.const(node, 1).reshape(-1)]
        if node.op == "Unsqueeze":
            out = v
            for axis in sorted(axes or []):
                out = np.expand_dims(out, axis)
        else:
            out = np.squeeze(v, axis=tuple(axes) if axes else None)
        b.set(node, out)
        return
    raise b.fail(node, f"{node.op} of activations inside the integer network is not supported")


def requant_shift(b: Builder, node: OnnxNode) -> None:
    """Deeploy's RequantShift(x, mul, add): clip(floor((x*mul + add + div/2) / div))."""
    x, xs = b.tensor_of(node, 0)
    if xs.pads is not None:
        raise b.fail(node, "a padded value cannot be requantized")
    base = sy.bare(x, xs.shape, True, node.outputs[0])
    a = node.attrs
    d = float(np.asarray(a.get("div", 1)).reshape(-1)[0])
    if d <= 0 or d != int(d):
        raise b.fail(node, f"div={d}: expected a positive integer")
    dv = int(d)
    levels = int(float(np.asarray(a.get("n_levels_out", a.get("n_levels", 256))).reshape(-1)[0]))
    signed = bool(float(np.asarray(a.get("signed", 1)).reshape(-1)[0]))
    mul_ = b.per_channel(node, b.const(node, 1), base)
    add_ = b.per_channel(node, b.const(node, 2), base)
    if isinstance(mul_, Fraction) or isinstance(add_, Fraction):
        raise b.fail(node, "mul and add must be integers")
    lo, hi = (-(levels // 2), levels // 2 - 1) if signed else (0, levels - 1)
    s = Sym(
        [Term(x, mul_)],
        np.asarray(add_ + dv // 2, dtype=object),
        dv,
        xs.shape,
        True,
        node.outputs[0],
        [node.name],
        rounding="floor",
        lo=lo,
        hi=hi,
    )
    b.set(node, s)


def quantlab_add(b: Builder, node: OnnxNode) -> None:
    """Quantlab's integer addition: each input requantized by its own `in<k>_mul/_add/_shift`
    (when `in<k>_rq`) and clipped to `in<k>_n_levels`, summed, then requantized by `out_*` (when
    `out_rq`) and clipped to `out_n_levels`. Rounding is floor (a right shift)."""
    a = node.attrs
    terms: list[str] = []
    for k in (1, 2):
        x, xs = b.tensor_of(node, k - 1)
        lo, hi = b.ranges[x]
        if int(a.get(f"in{k}_rq", 0)):
            levels = int(a.get(f"in{k}_n_levels", 256))
            clo, chi = (0, levels - 1) if lo >= 0 else (-(levels // 2), levels // 2 - 1)
            m, ad = int(a[f"in{k}_mul"]), int(a[f"in{k}_add"])
            dv = 1 << int(a[f"in{k}_shift"])
            rlo, rhi = sy.requantize_range(lo, hi, m, ad, dv, "floor", clo, chi)
            name = b.graph.unique_name(f"{node.outputs[0]}_in{k}")
            op = g.Requantize(
                name=name,
                inputs=[x],
                outputs=[name],
                source=node.name,
                mul=m,
                add=ad,
                div=dv,
                rounding="floor",
                lo=clo,
                hi=chi,
            )
            x = b.add_node(op, xs.shape, rlo, rhi, sy.qtype_for(clo, chi, name))
        terms.append(x)
    shape = b.sym(node, 0).shape
    lo = sum(b.ranges[t][0] for t in terms)
    hi = sum(b.ranges[t][1] for t in terms)
    name = b.graph.unique_name(f"{node.outputs[0]}_sum")
    op = g.Eltwise(
        name=b.graph.unique_name(node.name),
        inputs=terms,
        outputs=[name],
        source=node.name,
        kind="add",
    )
    total = b.add_node(op, shape, lo, hi)
    levels = int(a.get("out_n_levels", 256))
    clo, chi = (0, levels - 1) if lo >= 0 else (-(levels // 2), levels // 2 - 1)
    if int(a.get("out_rq", 0)):
        m, ad, dv = int(a["out_mul"]), int(a["out_add"]), 1 << int(a["out_shift"])
    else:
        m, ad, dv = 1, 0, 1
    rlo, rhi = sy.requantize_range(lo, hi, m, ad, dv, "floor", clo, chi)
    out_name = b.graph.unique_name(node.outputs[0])
    op = g.Requantize(
        name=b.graph.unique_name(f"{node.name}_out"),
        inputs=[total],
        outputs=[out_name],
        source=node.name,
        mul=m,
        add=ad,
        div=dv,
        rounding="floor",
        lo=clo,
        hi=chi,
    )
    out = b.add_node(op, shape, rlo, rhi, sy.qtype_for(clo, chi, node.name))
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, shape, False, node.outputs[0]))


def concat(b: Builder, node: OnnxNode) -> None:
    values = [b.value(node, k) for k in range(len(node.inputs))]
    if all(isinstance(v, np.ndarray) for v in values):
        b.set(node, np.concatenate(values, axis=int(node.attrs.get("axis", 0))))
        return
    raise b.fail(node, "concatenation of activations inside the integer network is not supported")


HANDLERS: dict[str, Callable[[Builder, OnnxNode], None]] = {
    "Conv": conv,
    "MatMul": matmul,
    "Gemm": gemm,
    "MaxPool": maxpool,
    "AveragePool": averagepool,
    "GlobalAveragePool": global_averagepool,
    "GlobalMaxPool": global_maxpool,
    "Pad": pad,
    "Mul": mul,
    "Add": add,
    "Sub": sub,
    "Div": div,
    "Floor": floor,
    "Round": round_,
    "Cast": cast,
    "Clip": clip,
    "Relu": relu,
    "Identity": identity,
    "Dropout": identity,
    "Flatten": flatten,
    "Reshape": reshape,
    "Squeeze": squeeze_unsqueeze,
    "Unsqueeze": squeeze_unsqueeze,
    "Concat": concat,
    "RequantShift": requant_shift,
}


def convert(model: OnnxModel, input_types: dict[str, g.QType]) -> Builder:
    """Run every node through its handler; return the builder holding the finished graph."""
    b = Builder(model, input_types)
    for node in model.nodes:
        reads = [b.env.get(n) for n in node.inputs if n]
        if node.op in TAIL_ENTRY or any(isinstance(v, Tail) for v in reads):
            _enter_tail(b, node)
            continue
        handler = HANDLERS.get(node.op)
        if handler is None:
            known = ", ".join(sorted(HANDLERS))
            raise b.fail(
                node, f"operator `{node.op}` is not part of the integer dialects (known: {known})"
            )
        handler(b, node)
    _finish(b)
    return b


def _enter_tail(b: Builder, node: OnnxNode) -> None:
    for name in node.inputs:
        v = b.env.get(name)
        if isinstance(v, Sym):
            tensor = b.materialize(v, node)
            if tensor not in b.tail_inputs:
                b.tail_inputs.append(tensor)
    b.dropped.append(node.name)
    for out in node.outputs:
        b.env[out] = TAIL


def _finish(b: Builder) -> None:
    outputs: list[str] = []
    for vi in b.model.outputs:
        v = b.env.get(vi.name)
        if isinstance(v, Sym):
            fake = _terminal(vi.name)
            tensor = b.materialize(v, fake)
            if tensor not in outputs:
                outputs.append(tensor)
    for t in b.tail_inputs:
        if t not in outputs:
            outputs.append(t)
    if not outputs:
        raise EdgesynthError("the graph computes no integer output", file=b.file)
    b.graph.outputs = outputs
    if b.dropped:
        b.graph.warnings.append(
            "host-side post-processing left out of the integer network: " + ", ".join(b.dropped)
        )
    b.graph.validate()


def _terminal(name: str) -> OnnxNode:
    return OnnxNode(
        name=f"graph output {name}",
        op="Output",
        domain="",
        inputs=[name],
        outputs=[],
        attrs={},
        index=-1,
    )
