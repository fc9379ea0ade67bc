"""The state of one conversion: the graph being written, every ONNX value (a pending `Sym`, a
constant, or a host-side tail value), integer ranges, and how a pending value becomes graph
operators (`Builder.materialize`)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx_int import symbolic as sy
from edgesynth.frontends.onnx_int.reader import OnnxModel, OnnxNode
from edgesynth.frontends.onnx_int.symbolic import WIDE, Sym
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
                raise self.fail(
                    node,
                    f"{what} holds non-integer values: not an integer graph (a float model is "
                    "quantized by `edgesynth compile MODEL -t gap8 --calibration CAL.npy`)",
                )
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
