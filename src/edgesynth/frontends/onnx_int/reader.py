"""Read an ONNX file into plain Python: nodes with decoded attributes, constant tensors, the
graph's inputs and outputs. Nothing here interprets an operator.

Unnamed nodes get the name an exporter would give them, `<OpType>_<index>` (the index counts
every node, `Constant` ones included), so messages can always name the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError


@dataclass
class OnnxNode:
    name: str
    op: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any]
    index: int


@dataclass
class OnnxValueInfo:
    name: str
    shape: tuple[int, ...]  # 0 where the dimension is symbolic
    elem_type: int


@dataclass
class OnnxModel:
    path: Path
    nodes: list[OnnxNode]
    constants: dict[str, np.ndarray]
    inputs: list[OnnxValueInfo]
    outputs: list[OnnxValueInfo]
    opsets: dict[str, int] = field(default_factory=dict)
    producer: str = ""
    metadata: dict[str, str] = field(default_factory=dict)  # the model's metadata_props


def _require_onnx() -> Any:
    try:
        import onnx
    except ModuleNotFoundError:
        raise EdgesynthError(
            "reading ONNX files needs the `onnx` package: pip install 'edgesynth[pulp]'"
        ) from None
    return onnx


def _attribute(onnx: Any, attr: Any) -> Any:
    from onnx import numpy_helper

    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
    return value


def _value_info(vi: Any) -> OnnxValueInfo:
    tensor = vi.type.tensor_type
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") else 0 for d in tensor.shape.dim)
    return OnnxValueInfo(vi.name, shape, int(tensor.elem_type))


def read_onnx(path: Path) -> OnnxModel:
    """Load `path`; raise EdgesynthError naming the file when it is not a readable ONNX model."""
    onnx = _require_onnx()
    from onnx import numpy_helper

    from edgesynth.frontends.onnxfile import read_onnx_file

    model = read_onnx_file(path)
    path = Path(path)
    graph = model.graph
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    nodes: list[OnnxNode] = []
    for index, node in enumerate(graph.node):
        attrs = {a.name: _attribute(onnx, a) for a in node.attribute}
        name = node.name or f"{node.op_type}_{index}"
        if node.op_type == "Constant" and not node.input:
            if "value" not in attrs:
                raise EdgesynthError(
                    f"Constant node {name} has no tensor `value`; only tensor constants are "
                    "supported",
                    file=str(path),
                )
            constants[node.output[0]] = np.asarray(attrs["value"])
            continue
        nodes.append(
            OnnxNode(
                name=name,
                op=node.op_type,
                domain=node.domain,
                inputs=list(node.input),
                outputs=list(node.output),
                attrs=attrs,
                index=index,
            )
        )
    inputs = [_value_info(vi) for vi in graph.input if vi.name not in constants]
    outputs = [_value_info(vi) for vi in graph.output]
    opsets = {o.domain or "ai.onnx": int(o.version) for o in model.opset_import}
    metadata = {p.key: p.value for p in model.metadata_props}
    return OnnxModel(path, nodes, constants, inputs, outputs, opsets, model.producer_name, metadata)
