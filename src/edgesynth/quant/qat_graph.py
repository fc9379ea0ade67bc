"""A gap8 QAT network (`quant.qat_gap8`) as edgesynth's float graph: traced by torch.fx (the
edgesynth layers kept whole), each layer linked to the layer (or input quantizer) whose codes it
reads, and written as graph nodes with the activation ranges the learned clips define, which
`quant.requant_onnx.quantize_graph` turns into the integer network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.quant.qat_gap8 import Add, AvgPool2d, Layer, Quantized

RESULTS = ("layer", "add", "avgpool")  # operations with their own output quantizer
PASS_THROUGH = (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d)
SUPPORTED = (
    "edgesynth.quant.qat_gap8 Conv1d/Conv2d/Linear/Add/AvgPool2d, torch.nn MaxPool1d/MaxPool2d, "
    "Flatten, "
    "Dropout, Identity, torch.flatten(x, 1)"
)


class _Tracer(torch.fx.Tracer):
    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, Quantized) or super().is_leaf_module(m, qualname)


def trace(body: nn.Module) -> torch.fx.Graph:
    try:
        return _Tracer().trace(body)
    except Exception as err:  # torch.fx reports data-dependent Python as any exception
        raise EdgesynthError(
            f"{type(body).__name__}.forward cannot be traced by torch.fx ({err}); write it "
            f"as a chain of {SUPPORTED}"
        ) from None


@dataclass(frozen=True)
class Step:
    """One traced operation: `kind` layer | add | avgpool (a quantized result, RESULTS) |
    maxpool | flatten | same (an identity)."""

    kind: str
    node: torch.fx.Node
    sources: tuple[torch.fx.Node, ...]  # the operation's inputs
    module: nn.Module | None = None

    @property
    def source(self) -> torch.fx.Node:
        return self.sources[0]


def steps(body: nn.Module, fx: torch.fx.Graph) -> list[Step]:
    """The traced operations in order; one message naming every unsupported one."""
    out: list[Step] = []
    bad: list[str] = []
    for node in fx.nodes:
        if node.op in ("placeholder", "output"):
            continue
        sources = tuple(a for a in node.args if isinstance(a, torch.fx.Node))
        kind, module = _kind(body, node)
        if kind is None or not sources or (kind == "add") != (len(sources) == 2):
            bad.append(describe(node, module))
        out.append(Step(kind or "?", node, sources, module))
    if bad:
        raise EdgesynthError(
            f"{type(body).__name__}: {', '.join(bad)} is not quantized for gap8; the QAT "
            f"network takes {SUPPORTED} (a ReLU goes in the layer: activation='relu'; a sum "
            "of two tensors is qat_gap8.Add()(a, b))"
        )
    return out


def describe(node: torch.fx.Node, module: nn.Module | None) -> str:
    """A traced operation as the user wrote it: `conv1` (ReLU), `add` (operator.add)."""
    if module is not None:
        return f"`{node.target}` ({type(module).__name__})"
    if node.op == "call_method":
        return f"`{node.name}` (.{node.target}())"
    return f"`{node.name}` ({getattr(node.target, '__name__', node.target)})"


def _kind(body: nn.Module, node: torch.fx.Node) -> tuple[str | None, nn.Module | None]:
    if node.op == "call_module":
        m = body.get_submodule(str(node.target))
        if isinstance(m, Layer):
            return "layer", m
        if isinstance(m, Add):
            return "add", m
        if isinstance(m, AvgPool2d):
            return "avgpool", m
        if isinstance(m, nn.MaxPool1d | nn.MaxPool2d) and not m.return_indices:
            return "maxpool", m
        if isinstance(m, nn.Flatten) and m.start_dim == 1 and m.end_dim == -1:
            return "flatten", m
        if isinstance(m, PASS_THROUGH):
            return "same", m
        return None, m
    flat = node.target in (torch.flatten, "flatten")
    if flat and node.op in ("call_function", "call_method") and _flattens_from_1(node):
        return "flatten", None
    return None, None


def _flattens_from_1(node: torch.fx.Node) -> bool:
    start = node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)
    end = node.args[2] if len(node.args) > 2 else node.kwargs.get("end_dim", -1)
    return start == 1 and end == -1 and len(node.args) >= 1


def link(body: nn.Module, fx: torch.fx.Graph, first: Any, output_bits: int) -> list[Quantized]:
    """Give every layer and sum its sources (the results or input quantizer whose codes it
    reads), its `qualname` and its output's bits (`output_bits` for the network's output);
    them in order."""
    producer: dict[torch.fx.Node, Any] = {n: first for n in fx.nodes if n.op == "placeholder"}
    found: list[Quantized] = []
    for step in steps(body, fx):
        sources = tuple(producer.get(n) for n in step.sources)
        if any(src is None for src in sources):
            raise EdgesynthError(f"{describe(step.node, step.module)} reads no traced tensor")
        if step.kind not in RESULTS:
            producer[step.node] = sources[0]
            continue
        module = step.module
        assert isinstance(module, Quantized)
        if module in found:
            raise EdgesynthError(f"`{step.node.target}` is called twice (shared weights or clip)")
        if isinstance(module, Add):
            object.__setattr__(module, "sources", sources)  # references, not submodules
        else:
            object.__setattr__(module, "source", sources[0])
        object.__setattr__(module, "qualname", str(step.node.target))
        module.bits = 8
        found.append(module)
        producer[step.node] = module
    (result,) = [n for n in fx.nodes if n.op == "output"]
    last = result.args[0]
    if isinstance(last, torch.fx.Node) and last.op == "call_module":
        module = body.get_submodule(str(last.target))
        if isinstance(module, Quantized):
            module.bits = output_bits  # the network's output: output_bits wide
    return found


def float_graph(
    body: nn.Module, fx: torch.fx.Graph, sample: torch.Tensor, input_range: tuple[float, float]
) -> tuple[g.Graph, dict[str, tuple[float, float]], dict[str, str]]:
    """The float graph (per-sample shapes from running `sample`, float mode), the ranges the
    learned clips define, and each layer's output tensor (after its ReLU)."""
    from torch.fx.passes.shape_prop import ShapeProp

    ShapeProp(torch.fx.GraphModule(body, fx)).propagate(sample)
    graph = g.Graph(name=type(body).__name__, source=f"{type(body).__name__} (gap8 QAT)")
    names: dict[torch.fx.Node, str] = {}
    ranges: dict[str, tuple[float, float]] = {"input": input_range}
    finals: dict[str, str] = {}
    for node in fx.nodes:
        if node.op == "placeholder":
            names[node] = "input"
            graph.add_input("input", tuple(node.meta["tensor_meta"].shape[1:]))
    for step in steps(body, fx):
        x = names[step.source]  # type: ignore[index]
        shape = tuple(step.node.meta["tensor_meta"].shape[1:])
        if step.kind == "same":
            names[step.node] = x
            continue
        name = str(step.node.target) if step.kind in RESULTS else step.node.name
        if step.kind in RESULTS:
            inputs = [names[n] for n in step.sources]
            graph.add(_result(step.module, name, inputs), shape)  # type: ignore[arg-type]
            names[step.node] = _output(graph, step.module, name, shape, ranges)  # type: ignore[arg-type]
            finals[name] = names[step.node]
            continue
        node = _pool(step.module, name, x) if step.kind == "maxpool" else None  # type: ignore[arg-type]
        graph.add(node or g.Flatten(name=name, inputs=[x], outputs=[name]), shape)
        names[step.node] = name
    (result,) = [n for n in fx.nodes if n.op == "output"]
    graph.outputs = [names[result.args[0]]]  # type: ignore[index]
    return graph, ranges, finals


def _result(module: Quantized, name: str, inputs: list[str]) -> g.Node:
    """The float node of a layer, sum or average pooling."""
    if isinstance(module, Layer):
        return _layer(module, name, inputs[0])
    if isinstance(module, Add):
        return g.Eltwise(name=name, inputs=inputs, outputs=[name], kind="add")
    assert isinstance(module, AvgPool2d)
    if module.kernel_size is None:
        return g.GlobalPool(name=name, inputs=inputs, outputs=[name], kind="avg", method="float")
    k, s = module.kernel_size, module.stride or module.kernel_size
    return g.Pool(
        name=name, inputs=inputs, outputs=[name], kind="avg", kernel=(k, k), stride=(s, s),
        method="float",
    )  # fmt: skip


def _layer(layer: Layer, name: str, x: str) -> g.Node:
    """The layer's convolution or linear node."""
    op = layer.op
    w = op.weight.detach().double().cpu().numpy()
    b = None if op.bias is None else op.bias.detach().double().cpu().numpy()
    where = f"layer `{name}`"
    if isinstance(op, nn.Linear):
        return g.Linear(name=name, inputs=[x], outputs=[name], weight=w, bias=b, source=where)
    if not isinstance(op.padding, tuple) or op.padding_mode != "zeros":
        raise EdgesynthError(f"{where}: padding must be whole numbers of zeros")
    pads = tuple(int(p) for p in op.padding) * 2
    return g.Conv(
        name=name, inputs=[x], outputs=[name], weight=w, bias=b, stride=tuple(op.stride),
        pads=pads, dilation=tuple(op.dilation), groups=int(op.groups), source=where,
    )  # fmt: skip


def _output(
    graph: g.Graph, result: Quantized, name: str, shape: tuple[int, ...],
    ranges: dict[str, tuple[float, float]],
) -> str:  # fmt: skip
    """The result's ReLU and range; returns the tensor holding its codes."""
    top = abs(float(result.alpha.detach()))
    if result.activation == "relu":
        relu = f"{name}.relu"
        graph.add(g.Activation(name=relu, inputs=[name], outputs=[relu], kind="relu"), shape)
        ranges[relu] = (0.0, top)
        return relu
    ranges[name] = (-top, top)
    return name


def _pool(m: nn.MaxPool1d | nn.MaxPool2d, name: str, x: str) -> g.Pool:
    rank = 1 if isinstance(m, nn.MaxPool1d) else 2

    def tup(v: Any) -> tuple[int, ...]:
        return tuple(int(i) for i in v) if isinstance(v, tuple | list) else (int(v),) * rank

    stride = tup(m.stride if m.stride is not None else m.kernel_size)
    return g.Pool(
        name=name, inputs=[x], outputs=[name], kind="max", kernel=tup(m.kernel_size),
        stride=stride, pads=tup(m.padding) * 2, dilation=tup(m.dilation), ceil=bool(m.ceil_mode),
    )  # fmt: skip
