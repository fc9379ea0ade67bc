"""Reading an `.onnx` file: one clear message for a file that is missing, empty or not ONNX."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError


def _looks_like(head: bytes) -> str | None:
    """What a file that is not ONNX looks like, from its first bytes (None: nothing known)."""
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive (a PyTorch checkpoint or an .npz file)"
    if head[:1] == b"\x80":
        return "a Python pickle (a legacy PyTorch checkpoint?)"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.strip() and all(c.isprintable() or c in "\r\n\t" for c in text):
        return f"a text file (it begins `{text.strip().splitlines()[0][:40]}`)"
    return None


def read_onnx_file(path: str | Path) -> Any:
    """The `onnx.ModelProto` in `path`; EdgesynthError naming the file (as given) when it is
    missing, a folder, empty or not an ONNX model."""
    from edgesynth.frontends import onnxproto

    onnxproto.messages()  # ModuleNotFoundError (naming onnx) first, as `import onnx` gives

    name = str(path)
    path = Path(path)
    if not path.exists():
        raise EdgesynthError("no such file", file=name)
    if path.is_dir():
        raise EdgesynthError("is a folder, not an ONNX file", file=name)
    with open(path, "rb") as stream:
        head = stream.read(64)
    if not head:
        raise EdgesynthError("the file is empty (0 bytes), not an ONNX model", file=name)
    try:
        model = onnxproto.load_model(name)
    except Exception as err:  # the protobuf parser raises several unrelated types
        kind = _looks_like(head)
        why = f"it is {kind}" if kind else f"the ONNX parser says: {err}"
        raise EdgesynthError(f"not an ONNX model: {why}", file=name) from None
    if not model.HasField("graph"):
        raise EdgesynthError("not an ONNX model: it holds no graph", file=name)
    return model
