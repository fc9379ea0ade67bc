"""Turn the nodes of an integer ONNX graph into the network graph, one handler per ONNX op
(`ops_layers`, `ops_arith`, `ops_dialects`).

Values flow as `Sym`s (exact pending arithmetic, see `symbolic.py`) or constants (NumPy arrays).
A handler either folds its node into a `Sym` (elementwise arithmetic with constants, casts,
rounding, clipping, padding) or writes graph operators (convolution, linear, pooling, addition
of two values, flatten). Host-side post-processing after the integer network (`Gather`,
`Unsqueeze`, `Concat` splitting an output, `Sigmoid`, `Softmax`, `LogSoftmax`) is dropped with a
warning: the values it reads become the graph's outputs.
"""

from __future__ import annotations

from collections.abc import Callable

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx_int.builder import TAIL, TAIL_ENTRY, Builder, Tail
from edgesynth.frontends.onnx_int.ops_arith import (
    add,
    cast,
    clip,
    div,
    floor,
    identity,
    mul,
    relu,
    round_,
    sub,
)
from edgesynth.frontends.onnx_int.ops_dialects import requant_shift
from edgesynth.frontends.onnx_int.ops_layers import (
    averagepool,
    concat,
    conv,
    flatten,
    gemm,
    global_averagepool,
    global_maxpool,
    matmul,
    maxpool,
    pad,
    reshape,
    squeeze_unsqueeze,
)
from edgesynth.frontends.onnx_int.reader import OnnxModel, OnnxNode
from edgesynth.frontends.onnx_int.symbolic import Sym
from edgesynth.ir import graph as g

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
