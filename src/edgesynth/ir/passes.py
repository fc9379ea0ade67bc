"""Generic rewrites of the network graph, shared by every target's `lower`.

Each pass takes a graph and returns a new one (the input is never modified; parameter arrays a
pass does not change are shared). A node that absorbs another records the absorbed node's name
in `folded`, and takes over the absorbed node's output tensor name, so names a user knows (ONNX
tensor names) survive the rewrite. `simplify` applies the passes until nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from edgesynth.ir import graph as g

Pass = Callable[[g.Graph], g.Graph]


def _copy(graph: g.Graph) -> g.Graph:
    """A new graph with copies of the nodes and tensors (parameter arrays shared)."""
    out = replace(
        graph,
        tensors={k: replace(t) for k, t in graph.tensors.items()},
        nodes=[
            replace(n, inputs=list(n.inputs), outputs=list(n.outputs), folded=list(n.folded))
            for n in graph.nodes
        ],
        inputs=list(graph.inputs),
        outputs=list(graph.outputs),
        warnings=list(graph.warnings),
        meta=dict(graph.meta),
    )
    return out


def _rename_output(graph: g.Graph, node: g.Node, new: str) -> None:
    """`node` now writes tensor `new` (which must be free) instead of its own output."""
    old = node.output
    tensor = graph.tensors.pop(old)
    graph.tensors[new] = replace(tensor, name=new)
    node.outputs[0] = new
    for other in graph.nodes:
        other.inputs = [new if t == old else t for t in other.inputs]
    graph.outputs = [new if t == old else t for t in graph.outputs]


def _absorb(graph: g.Graph, keeper: g.Node, gone: g.Node, record: bool = True) -> None:
    """Remove `gone` (which reads only `keeper`'s output, its sole reader); `keeper` takes over
    `gone`'s output name and, with `record`, lists `gone` in its `folded` names."""
    out = gone.output
    graph.nodes.remove(gone)
    del graph.tensors[out]
    _rename_output(graph, keeper, out)
    if record:
        keeper.folded += [gone.name, *gone.folded]


def _sole_reader(graph: g.Graph, tensor: str) -> g.Node | None:
    """The one node reading `tensor`, if exactly one does and it is not a graph output."""
    readers = graph.consumers(tensor)
    if len(readers) != 1 or tensor in graph.outputs or readers[0].inputs.count(tensor) != 1:
        return None
    return readers[0]


def _is_float(node: g.Conv | g.Linear) -> bool:
    return not np.issubdtype(np.asarray(node.weight).dtype, np.integer)


def _zero_bias(node: g.Conv | g.Linear) -> np.ndarray:
    return np.zeros(int(node.weight.shape[0]))


def fold_batchnorm(graph: g.Graph) -> g.Graph:
    """Fold every BatchNorm that directly follows a float Conv/Linear into its weights and bias:
    w' = w * s, b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps), per output channel.

    Mathematically exact; in float it changes rounding (the product is scaled before instead of
    after the sum: a few ulps). Not done, because unsafe, when the convolution's output is also
    read elsewhere or is a graph output (that reader would see the batchnorm), when something
    (an activation, a pool) sits between them, or on integer graphs (integer weights cannot
    absorb a real scale exactly).
    """
    out = _copy(graph)
    for node in list(out.nodes):
        if not isinstance(node, g.Conv | g.Linear) or not _is_float(node):
            continue
        reader = _sole_reader(out, node.output)
        if not isinstance(reader, g.BatchNorm) or reader.gamma.size != node.weight.shape[0]:
            continue
        s = reader.gamma / np.sqrt(reader.var + reader.eps)
        bias = node.bias if node.bias is not None else _zero_bias(node)
        node.weight = node.weight * s.reshape((-1,) + (1,) * (node.weight.ndim - 1))
        node.bias = (bias - reader.mean) * s + reader.beta
        _absorb(out, node, reader)
    return out


def _per_channel(value: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """The constant as one value per channel of a (channels, ...) tensor of `rank` axes, or
    None when it varies along another axis or does not broadcast."""
    v = np.asarray(value, dtype=np.float64)
    if v.ndim > rank:
        return None
    v = v.reshape((1,) * (rank - v.ndim) + v.shape)
    if any(d != 1 for d in v.shape[1:]) or v.shape[0] not in (1, channels):
        return None
    flat = v.reshape(-1)
    return np.full(channels, flat[0]) if flat.size == 1 else flat


def fold_constant_add(graph: g.Graph) -> g.Graph:
    """Fold `x + c` (and `x - c`) into the bias of the float Conv/Linear that produces x, when
    the constant c is one value per output channel: b' = b + c.

    Exact in real arithmetic; in float the sum is associated differently ((acc + b) + c against
    acc + (b + c): an ulp). Not done, because unsafe, when x is read elsewhere or is a graph
    output, when c varies across positions (then it is not a bias), when the constant is the
    subtrahend's minuend (c - x), or on integer graphs (the bias is in accumulator units there
    and c in output units).
    """
    out = _copy(graph)
    producers = {n.output: n for n in out.nodes}
    for node in list(out.nodes):
        if not isinstance(node, g.Conv | g.Linear) or not _is_float(node):
            continue
        reader = _sole_reader(out, node.output)
        if not (isinstance(reader, g.Eltwise) and reader.kind in ("add", "sub")):
            continue
        if len(reader.inputs) != 2:
            continue
        other = reader.inputs[1] if reader.inputs[0] == node.output else reader.inputs[0]
        const = producers.get(other)
        if not isinstance(const, g.Constant):
            continue
        if reader.kind == "sub" and reader.inputs[0] != node.output:
            continue
        channels = int(node.weight.shape[0])
        c = _per_channel(const.value, channels, len(out.tensors[node.output].shape))
        if c is None:
            continue
        bias = node.bias if node.bias is not None else _zero_bias(node)
        node.bias = bias + c if reader.kind == "add" else bias - c
        _absorb(out, node, reader)
    return drop_unused(out)


def _is_identity(graph: g.Graph, node: g.Node) -> bool:
    """Does `node` return its (only) input unchanged?"""
    if len(node.inputs) != 1:
        return False
    same_shape = graph.tensors[node.inputs[0]].shape == graph.tensors[node.output].shape
    if isinstance(node, g.Reshape | g.Flatten | g.Concat):
        return same_shape
    if isinstance(node, g.Slice):
        return same_shape and node.step == 1
    if isinstance(node, g.Clip):
        return node.lo == -np.inf and node.hi == np.inf
    if isinstance(node, g.Pool):
        return (
            same_shape
            and all(k == 1 for k in node.kernel)
            and all(s == 1 for s in node.stride)
            and not any(node.pads)
        )
    return False


def drop_identities(graph: g.Graph) -> g.Graph:
    """Remove operators that return their input unchanged: a Reshape/Flatten to the same shape
    (how the ONNX front end writes Dropout and Identity), a one-input Concat, a full Slice, an
    unbounded Clip, a 1x1 stride-1 pool without padding.

    The name that survives is the later one when the input has no other reader (so the ONNX
    tensor a user names, e.g. a Dropout's output, stays); otherwise the readers are rewired to
    the input. Never unsafe for the values; kept (not removed) when both the input and the
    output are graph inputs/outputs, so the graph's interface keeps its names.
    """
    out = _copy(graph)
    for node in list(out.nodes):
        if not _is_identity(out, node):
            continue
        src = node.inputs[0]
        producer = out.producer(src)
        if producer is not None and _sole_reader(out, src) is node and len(producer.outputs) == 1:
            _absorb(out, producer, node, record=False)
        elif node.output not in out.outputs:
            out.nodes.remove(node)
            del out.tensors[node.output]
            for other in out.nodes:
                other.inputs = [src if t == node.output else t for t in other.inputs]
    return out


def drop_unused(graph: g.Graph) -> g.Graph:
    """Remove operators whose outputs nothing reads and that are not graph outputs (constants
    left over after folding). Never unsafe: no result changes."""
    out = _copy(graph)
    changed = True
    while changed:
        changed = False
        for node in reversed(out.nodes):
            if any(out.consumers(t) or t in out.outputs for t in node.outputs):
                continue
            out.nodes.remove(node)
            for t in node.outputs:
                del out.tensors[t]
            changed = True
    return out


PASSES: tuple[Pass, ...] = (drop_identities, fold_constant_add, fold_batchnorm, drop_unused)


def simplify(graph: g.Graph, passes: tuple[Pass, ...] = PASSES) -> g.Graph:
    """Apply `passes` in turn until the graph stops changing."""
    current = graph
    while True:
        before = _signature(current)
        for p in passes:
            current = p(current)
        if _signature(current) == before:
            return current


def _signature(graph: g.Graph) -> tuple[object, ...]:
    return tuple((n.name, tuple(n.inputs), tuple(n.outputs), tuple(n.folded)) for n in graph.nodes)


_GATED = {"sigmoid": "swish", "hardsigmoid": "hardswish"}  # x x gate(x): the one function


def _writer(graph: g.Graph, tensor: str) -> g.Node | None:
    return next((n for n in graph.nodes if tensor in n.outputs), None)


def _gate(graph: g.Graph, x: str, gated: str, mul: g.Node) -> tuple[str, list[g.Node]] | None:
    """(the fused kind, the gate's nodes) where `gated` is sigmoid(x), hardsigmoid(x) with
    alpha 1/6 and beta 1/2, or tanh(softplus(x)), each tensor read only by the next node."""
    gate = _writer(graph, gated)
    if not isinstance(gate, g.Activation) or _sole_reader(graph, gated) is not mul:
        return None
    if gate.kind == "tanh":
        inner = _writer(graph, gate.inputs[0])
        if (isinstance(inner, g.Activation) and inner.kind == "softplus"
                and inner.inputs == [x] and _sole_reader(graph, inner.output) is gate):  # fmt: skip
            return "mish", [inner, gate]
        return None
    if gate.kind not in _GATED or gate.inputs != [x]:
        return None
    if gate.kind == "hardsigmoid" and not (abs(gate.alpha - 1 / 6) < 1e-6 and gate.beta == 0.5):
        return None
    return _GATED[gate.kind], [gate]


def fuse_gated_activations(graph: g.Graph) -> g.Graph:
    """x x sigmoid(x) -> swish, x x hardsigmoid(x) (alpha 1/6, beta 1/2) -> hardswish and
    x x tanh(softplus(x)) -> mish, as torch.onnx writes SiLU, Mish (and Hardswish before opset
    14): a Mul reading a tensor and the gate's output, where the gate reads that tensor and
    the Mul is its sole reader. The one activation takes the Mul's name and output and lists
    the gate's operators in its `folded` names."""
    out = _copy(graph)
    for mul in list(out.nodes):
        if not (isinstance(mul, g.Eltwise) and mul.kind == "mul" and len(mul.inputs) == 2):
            continue
        for x, gated in (mul.inputs, mul.inputs[::-1]):
            found = _gate(out, x, gated, mul)
            if found is None:
                continue
            kind, gates = found
            folded = [name for n in gates for name in (n.name, *n.folded)]
            fused = g.Activation(name=mul.name, inputs=[x], outputs=[mul.output], kind=kind,
                                 folded=[*folded, *mul.folded])  # fmt: skip
            out.nodes[out.nodes.index(mul)] = fused
            for n in gates:
                out.nodes.remove(n)
                del out.tensors[n.output]
            break
    return out
