"""ONNX files read without importing the `onnx` package, whose `__init__` loads its checker,
helpers, ml_dtypes and protobuf's JSON support (about 50 ms of every command that reads a model).

The messages are onnx's own classes: its generated `onnx_ml_pb2.py`, loaded from the installed
package's folder into protobuf's default pool (where a later `import onnx` finds the same
classes). What is read here is read exactly as onnx reads it: a protobuf `.onnx` file whose
tensors are inside it (`onnx.load`), tensors of the plain NumPy types stored as raw bytes
(`onnx.numpy_helper.to_array`), attributes of the plain kinds
(`onnx.helper.get_attribute_value`); everything else is handed to those functions.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

_MODULE = "edgesynth.frontends._onnx_ml_pb2"
# TensorProto element types whose raw bytes NumPy reads as they are (little-endian)
_RAW_TYPES: dict[int, type] = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
# AttributeProto types: the field each kind's value is in
_ONE = {1: "f", 2: "i", 3: "s", 4: "t", 5: "g"}  # FLOAT, INT, STRING, TENSOR, GRAPH
_LIST = {6: "floats", 7: "ints", 8: "strings"}
_TENSOR = 4
_NESTED = (5, 9, 10, 11, 12)  # graphs, tensor lists, sparse tensors: onnx.load reads those


def messages() -> Any:
    """onnx's generated message module (ModelProto, TensorProto, ...); ModuleNotFoundError
    naming onnx when it is not installed."""
    if _MODULE in sys.modules:
        return sys.modules[_MODULE]
    spec = None if "onnx" in sys.modules else importlib.util.find_spec("onnx")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    source = Path(folders[0]) / "onnx_ml_pb2.py" if folders else None
    if source is None or not source.is_file():  # loaded already, missing, another layout
        import onnx

        return onnx.onnx_ml_pb2
    generated = importlib.util.spec_from_file_location(_MODULE, source)
    assert generated is not None and generated.loader is not None
    module = importlib.util.module_from_spec(generated)
    generated.loader.exec_module(module)
    sys.modules[_MODULE] = module
    return module


def load_model(path: str | Path) -> Any:
    """`onnx.load(path)`: a protobuf `.onnx` file that holds its tensors is parsed here; any
    other (text formats, external data, a file that does not parse) by onnx.load, with its
    result or its error."""
    path = Path(path)
    if path.suffix.lower() == ".onnx" and sys.byteorder == "little":
        data = path.read_bytes()
        model = messages().ModelProto()
        try:
            decoded = model.ParseFromString(data)
        except Exception:  # onnx.load raises it (and says it) below
            decoded = -1
        if decoded in (None, len(data)) and not _outside(model.graph):
            return model
    import onnx

    return onnx.load(str(path))


def _outside(graph: Any) -> bool:
    """Does `onnx.load` read more for this graph: tensors stored in external files, or
    subgraphs and tensor lists (whose tensors it also looks at)?"""
    if len(graph.sparse_initializer):
        return True
    tensors = list(graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type in _NESTED:
                return True
            if attr.type == _TENSOR:
                tensors.append(attr.t)
    return any(t.HasField("data_location") and t.data_location == _EXTERNAL for t in tensors)


def to_array(tensor: Any) -> np.ndarray:
    """`onnx.numpy_helper.to_array(tensor)`: raw bytes of a plain type read here (a read-only
    view of them, as onnx gives), any other tensor by onnx."""
    dtype = _RAW_TYPES.get(tensor.data_type)
    if (
        dtype is not None
        and sys.byteorder == "little"
        and tensor.HasField("raw_data")
        and not tensor.HasField("segment")
        and not (tensor.HasField("data_location") and tensor.data_location == _EXTERNAL)
    ):
        return np.frombuffer(tensor.raw_data, dtype=dtype).reshape(tensor.dims)
    from onnx import numpy_helper

    return numpy_helper.to_array(tensor)


def attribute_value(attr: Any) -> Any:
    """`onnx.helper.get_attribute_value(attr)`: numbers, strings, their lists, a tensor or a
    graph read here, any other kind by onnx."""
    if not attr.ref_attr_name:
        if attr.type in _ONE:
            return getattr(attr, _ONE[attr.type])
        if attr.type in _LIST:
            return list(getattr(attr, _LIST[attr.type]))
    import onnx

    return onnx.helper.get_attribute_value(attr)
