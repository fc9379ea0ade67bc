"""The ONNX front end: a float ONNX model -> the network graph (`edgesynth.ir.graph.Graph`).

    from edgesynth.frontends.onnx import load_onnx
    graph = load_onnx("model.onnx")          # float graph, one primitive operator per ONNX op
    graph = passes.simplify(graph)           # optional: fold BatchNorm/constant Adds, drop no-ops

The graph's tensors keep their ONNX names and shapes without the batch axis; every node's
`source` names its ONNX node and operator. Refused models raise `EdgesynthError` naming the file,
the node, the operator and what is supported (`SUPPORTED_OPS`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError
from edgesynth.frontends.onnx.convert import SUPPORTED_OPS, Converter, node_label
from edgesynth.ir.graph import Graph

__all__ = ["SUPPORTED_OPS", "from_model", "load_onnx", "node_label"]


def from_model(model: Any, path: str = "<onnx model>") -> Graph:
    """Convert an in-memory `onnx.ModelProto`; `path` names it in messages."""
    return Converter(model, str(path)).run()


def load_onnx(path: str | Path) -> Graph:
    """Read an ONNX file into a float graph."""
    try:
        import onnx  # noqa: F401  (the reader's; here to say which package is missing)
    except ModuleNotFoundError:
        raise EdgesynthError(
            "reading ONNX models needs the onnx package: pip install 'edgesynth[onnx]'"
        ) from None
    from edgesynth.frontends.onnxfile import read_onnx_file

    return from_model(read_onnx_file(path), str(path))
