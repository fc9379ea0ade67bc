"""Read PyTorch checkpoint files (`*.pth.tar`, `*.pt`) with the standard library and NumPy only.

Two on-disk formats exist, and the vendor's published checkpoints use both:

* the zip format (torch >= 1.6): a zip archive whose single top folder holds `data.pkl` (the
  pickled object), `data/<key>` (one raw file per storage), `version` and sometimes `byteorder`;
* the legacy format (torch < 1.6): five consecutive pickles in one stream - a magic number, the
  protocol version, a system-info dict, the object itself, the list of storage keys - followed
  by the raw data of each storage in that order (an int64 element count, then the elements).

Tensors come back as NumPy arrays (copies; bfloat16 widened to float32). Every class that is
not a tensor, a storage or a plain container - the vendor's Distiller compression scheduler,
optimizer classes, `argparse.Namespace`, anything unknown - becomes an inert `Placeholder` that
records where it came from and keeps whatever state the pickle gave it. Nothing from the file
is ever imported or executed, and torch is never imported.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from os import PathLike
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from edgesynth.errors import EdgesynthError

__all__ = [
    "Placeholder",
    "TorchDtype",
    "read_torch_file",
    "read_torch_object",
    "write_torch_file",
]

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


class TorchDtype:
    """A `torch.<dtype>` object found in the pickle (e.g. in `_rebuild_tensor_v3`)."""

    def __init__(self, name: str, numpy_dtype: np.dtype) -> None:
        self.name = name
        self.numpy_dtype = numpy_dtype

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self) -> tuple:  # keep the object picklable by plain pickle
        return (TorchDtype, (self.name, self.numpy_dtype))


# torch dtype name -> how its elements are stored on disk.
# bfloat16 is stored as uint16 and widened to float32 when a tensor is built.
_DTYPES: dict[str, str] = {
    "float32": "<f4",
    "float64": "<f8",
    "float16": "<f2",
    "bfloat16": "<u2",
    "int8": "i1",
    "uint8": "u1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "bool": "?",
    "complex64": "<c8",
    "complex128": "<c16",
    "qint8": "i1",
    "quint8": "u1",
    "qint32": "<i4",
}
_DTYPE_ALIASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "cfloat": "complex64",
    "cdouble": "complex128",
}

# torch.<Name>Storage -> dtype name.
_STORAGE_TYPES: dict[str, str] = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "ShortStorage": "int16",
    "IntStorage": "int32",
    "LongStorage": "int64",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "UntypedStorage": "uint8",
    "ByteStorageBase": "uint8",
}


class _StorageType:
    """What `torch.FloatStorage` and friends resolve to: just the element type."""

    def __init__(self, name: str, dtype_name: str) -> None:
        self.name = name
        self.dtype_name = dtype_name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class Placeholder:
    """Stands in for any class the reader does not know (and therefore never imports).

    Subclasses are made per global name by `_placeholder_class`: the class object itself
    stands for the class (e.g. `optimizer_type: torch.optim.SGD`), and instances for objects
    of it. Instances keep constructor arguments in `args`, pickled state in `state`, and any
    items appended or set in `items` / `mapping`, so nothing in the file is lost.
    """

    module: str = ""
    qualname: str = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> Placeholder:
        obj = super().__new__(cls)
        obj.args = args
        obj.kwargs = kwargs
        obj.state = None
        obj.items = []
        obj.mapping = {}
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def append(self, item: Any) -> None:
        self.items.append(item)

    def extend(self, items: Any) -> None:
        self.items.extend(items)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.mapping[key] = value

    def __getitem__(self, key: Any) -> Any:
        return self.mapping[key]

    def __repr__(self) -> str:
        return f"<placeholder {self.module}.{self.qualname}>"


_PLACEHOLDER_CLASSES: dict[tuple[str, str], type[Placeholder]] = {}


def _placeholder_class(module: str, name: str) -> type[Placeholder]:
    key = (module, name)
    cls = _PLACEHOLDER_CLASSES.get(key)
    if cls is None:
        cls = type(name.rsplit(".", 1)[-1], (Placeholder,), {"module": module, "qualname": name})
        cls.__module__ = f"edgesynth.placeholder.{module}"
        cls.__qualname__ = name
        _PLACEHOLDER_CLASSES[key] = cls
    return cls


def _reconstruct(cls: Any, base: Any, state: Any) -> Any:
    """`copyreg._reconstructor`, restricted to what the reader itself can build."""
    if isinstance(cls, type) and issubclass(cls, Placeholder):
        obj = cls.__new__(cls)
        if state is not None:
            obj.args = (state,)
        return obj
    if cls is collections.OrderedDict or cls is dict:
        return cls()
    raise pickle.UnpicklingError(f"cannot rebuild an object of {cls!r}")


class _Storage:
    """One storage: its elements as a flat NumPy array (in the on-disk dtype)."""

    __slots__ = ("data", "dtype_name")

    def __init__(self, data: np.ndarray, dtype_name: str) -> None:
        self.data = data
        self.dtype_name = dtype_name


def _finish_dtype(flat: np.ndarray, dtype_name: str) -> np.ndarray:
    """The on-disk elements as the tensor's value type (bfloat16 -> float32, native order)."""
    if dtype_name == "bfloat16":
        return (flat.astype(np.uint32) << 16).view(np.float32)
    if not flat.dtype.isnative:
        return flat.astype(flat.dtype.newbyteorder("="))
    return flat


def _build_tensor(
    storage: Any, offset: int, size: Any, stride: Any, dtype_name: str | None = None
) -> np.ndarray:
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError(f"tensor data is not a storage ({storage!r})")
    flat = storage.data
    name = storage.dtype_name
    if dtype_name is not None and dtype_name != name:
        # An untyped (byte) storage reinterpreted as the tensor's dtype.
        code = _DTYPES.get(dtype_name)
        if code is None:
            raise pickle.UnpicklingError(f"unsupported tensor dtype torch.{dtype_name}")
        want = np.dtype(code)
        if flat.dtype.byteorder == ">" and want.itemsize > 1:
            want = want.newbyteorder(">")
        raw = flat.view(np.uint8)
        flat = raw[: len(raw) - len(raw) % want.itemsize].view(want)
        name = dtype_name
    shape = tuple(int(s) for s in size)
    strides = tuple(int(s) for s in stride)
    offset = int(offset)
    if len(strides) != len(shape):
        raise pickle.UnpicklingError("tensor size and stride disagree")
    count = 1
    for s in shape:
        count *= s
    if count == 0:
        return _finish_dtype(np.empty(shape, dtype=flat.dtype), name)
    last = offset + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))
    if offset < 0 or min(strides, default=0) < 0 or last >= len(flat):
        raise pickle.UnpicklingError(
            f"tensor of size {list(shape)} at offset {offset} does not fit its storage "
            f"of {len(flat)} elements"
        )
    item = flat.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], shape=shape, strides=tuple(st * item for st in strides), writeable=False
    )
    return _finish_dtype(np.array(view, copy=True), name)  # a contiguous copy, 0-d kept


def _rebuild_tensor(storage: Any, storage_offset: int, size: Any, stride: Any) -> np.ndarray:
    return _build_tensor(storage, storage_offset, size, stride)


def _rebuild_tensor_v2(
    storage: Any,
    storage_offset: int,
    size: Any,
    stride: Any,
    requires_grad: Any = None,
    backward_hooks: Any = None,
    metadata: Any = None,
) -> np.ndarray:
    return _build_tensor(storage, storage_offset, size, stride)


def _rebuild_tensor_v3(
    storage: Any,
    storage_offset: int,
    size: Any,
    stride: Any,
    requires_grad: Any,
    backward_hooks: Any,
    dtype: Any,
    metadata: Any = None,
) -> np.ndarray:
    name = dtype.name if isinstance(dtype, TorchDtype) else None
    return _build_tensor(storage, storage_offset, size, stride, name)


def _rebuild_parameter(data: Any, requires_grad: Any = None, backward_hooks: Any = None) -> Any:
    return data


def _rebuild_parameter_with_state(
    data: Any, requires_grad: Any, backward_hooks: Any, state: Any
) -> Any:
    return data


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    # Tensor subclasses: build the plain tensor, drop the subclass and its Python attributes.
    return func(*args)


def _rebuild_device_tensor_from_numpy(
    data: Any, dtype: Any, device: Any, requires_grad: Any
) -> Any:
    return np.array(data, copy=True)


def _get_layout(name: Any) -> str:
    return str(name)


def _device(*args: Any) -> str:
    return ":".join(str(a) for a in args)


def _size(dims: Any = ()) -> tuple[int, ...]:
    return tuple(dims)


def _codecs_encode(text: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    # Protocol-2 pickles write `bytes` as _codecs.encode(str, 'latin1').
    return str(text).encode(encoding, errors)


def _numpy_global(name: str) -> Any:
    """The few NumPy entry points a pickle of NumPy scalars/arrays needs (data only)."""
    if name == "scalar":
        try:
            from numpy._core.multiarray import scalar  # NumPy >= 2
        except ImportError:  # pragma: no cover - NumPy 1.x
            from numpy.core.multiarray import scalar  # type: ignore[no-redef]
        return scalar
    if name == "_reconstruct":
        try:
            from numpy._core.multiarray import _reconstruct
        except ImportError:  # pragma: no cover - NumPy 1.x
            from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
        return _reconstruct
    if name == "dtype":
        return np.dtype
    if name == "ndarray":
        return np.ndarray
    return None


_SAFE_BUILTINS = {
    "dict": dict,
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "slice": slice,
    "complex": complex,
    "bytearray": bytearray,
    "bytes": bytes,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "range": range,
    "object": object,
}

_TORCH_FUNCTIONS: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
    ("torch._utils", "_rebuild_device_tensor_from_numpy"): _rebuild_device_tensor_from_numpy,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch._tensor", "_rebuild_from_type"): lambda func, type_, args, dict_: func(*args),
    ("torch.serialization", "_get_layout"): _get_layout,
    ("torch", "device"): _device,
    ("torch", "Size"): _size,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "defaultdict"): lambda *args: collections.defaultdict(None),
    ("copyreg", "_reconstructor"): _reconstruct,
    ("copy_reg", "_reconstructor"): _reconstruct,
    ("_codecs", "encode"): _codecs_encode,
}


_TENSOR_BUILDERS = {
    ("torch._utils", "_rebuild_tensor"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor_v3"),
}


def _no_tensor(*args: Any, **kwargs: Any) -> None:
    return None


class _Unpickler(pickle.Unpickler):
    """Resolves torch's globals to our own builders and everything else to placeholders."""

    def __init__(self, file: BinaryIO, persistent: Any, *, survey: bool = False) -> None:
        super().__init__(file, encoding="latin1")
        self._persistent = persistent
        self._survey = survey

    def find_class(self, module: str, name: str) -> Any:
        if self._survey and (module, name) in _TENSOR_BUILDERS:
            return _no_tensor  # the legacy survey pass: storages are not read yet
        found = _TORCH_FUNCTIONS.get((module, name))
        if found is not None:
            return found
        if module in ("builtins", "__builtin__") and name in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[name]
        if module == "torch":
            if name in _STORAGE_TYPES:
                return _StorageType(name, _STORAGE_TYPES[name])
            canonical = _DTYPE_ALIASES.get(name, name)
            if canonical in _DTYPES:
                code = "<f4" if canonical == "bfloat16" else _DTYPES[canonical]
                return TorchDtype(canonical, np.dtype(code))
        if module.startswith("numpy"):
            found = _numpy_global(name)
            if found is not None:
                return found
        return _placeholder_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        return self._persistent(pid)


def _dtype_of(storage_type: Any) -> str:
    if isinstance(storage_type, _StorageType):
        return storage_type.dtype_name
    if isinstance(storage_type, TorchDtype):
        return storage_type.name
    name = getattr(storage_type, "qualname", None) or repr(storage_type)
    raise pickle.UnpicklingError(f"unsupported storage type {name}")


def _as_str(value: Any) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else str(value)


def _element_array(raw: bytes | memoryview, dtype_name: str, big_endian: bool) -> np.ndarray:
    code = _DTYPES.get(dtype_name)
    if code is None:
        raise pickle.UnpicklingError(f"unsupported storage dtype torch.{dtype_name}")
    dtype = np.dtype(code)
    if big_endian and dtype.itemsize > 1:
        dtype = dtype.newbyteorder(">")
    return np.frombuffer(raw, dtype=dtype)


# ------------------------------------------------------------------------------------------
# zip format


def _read_zip(path: Path, archive: zipfile.ZipFile) -> Any:
    names = archive.namelist()
    pickles = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if not pickles:
        if any(n.endswith("constants.pkl") for n in names):
            raise EdgesynthError(
                "this is a TorchScript archive (torch.jit.save), not a checkpoint; "
                "save the model's state_dict with torch.save instead",
                file=str(path),
            )
        raise EdgesynthError(
            "not a PyTorch checkpoint: zip archive without a `data.pkl`", file=str(path)
        )
    root = pickles[0].split("/", 1)[0]
    big_endian = False
    order_name = f"{root}/byteorder"
    if order_name in names:
        order = archive.read(order_name).decode("ascii", "replace").strip()
        if order not in ("little", "big"):
            raise pickle.UnpicklingError(f"unknown byte order {order!r}")
        big_endian = order == "big"
    storages: dict[str, _Storage] = {}

    def persistent(pid: Any) -> Any:
        if not isinstance(pid, tuple) or not pid or _as_str(pid[0]) != "storage":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        storage_type, key, _location, numel = pid[1:5]
        key = _as_str(key)
        found = storages.get(key)
        if found is None:
            dtype_name = _dtype_of(storage_type)
            try:
                raw = archive.read(f"{root}/data/{key}")
            except KeyError:
                raise pickle.UnpicklingError(f"storage `{key}` is missing") from None
            flat = _element_array(raw, dtype_name, big_endian)
            if len(flat) < int(numel):
                raise pickle.UnpicklingError(
                    f"storage `{key}` holds {len(flat)} elements, {numel} expected"
                )
            found = storages[key] = _Storage(flat[: int(numel)], dtype_name)
        return found

    return _Unpickler(io.BytesIO(archive.read(pickles[0])), persistent).load()


# ------------------------------------------------------------------------------------------
# legacy format


def _read_legacy(path: Path, stream: BinaryIO) -> Any:
    def plain(pid: Any) -> Any:
        raise pickle.UnpicklingError("unexpected persistent id in the file header")

    magic = _Unpickler(stream, plain).load()
    if magic != _LEGACY_MAGIC:
        raise EdgesynthError(
            "not a PyTorch checkpoint (neither a zip archive nor a legacy torch file)",
            file=str(path),
        )
    protocol = _Unpickler(stream, plain).load()
    if protocol != _LEGACY_PROTOCOL:
        raise pickle.UnpicklingError(f"unsupported legacy protocol version {protocol!r}")
    sys_info = _Unpickler(stream, plain).load()
    big_endian = isinstance(sys_info, dict) and sys_info.get("little_endian") is False
    object_start = stream.tell()

    # Pass 1: learn each storage's dtype and size (the data comes after the pickles).
    layout: dict[str, tuple[str, int]] = {}

    def survey(pid: Any) -> Any:
        kind = _as_str(pid[0]) if isinstance(pid, tuple) and pid else ""
        if kind == "module":
            return pid[1]
        if kind != "storage":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        storage_type, root_key, _location, numel = pid[1:5]
        layout.setdefault(_as_str(root_key), (_dtype_of(storage_type), int(numel)))
        return None

    _Unpickler(stream, survey, survey=True).load()
    keys = _Unpickler(stream, plain).load()
    if not isinstance(keys, list):
        raise pickle.UnpicklingError("storage key list missing")
    roots: dict[str, _Storage] = {}
    for key in keys:
        key = _as_str(key)
        if key not in layout:
            raise pickle.UnpicklingError(f"storage `{key}` is not used by any tensor")
        dtype_name, numel = layout[key]
        header = stream.read(8)
        if len(header) != 8:
            raise pickle.UnpicklingError("file ends inside the tensor data")
        count = struct.unpack(">q" if big_endian else "<q", header)[0]
        if count != numel:
            raise pickle.UnpicklingError(
                f"storage `{key}` holds {count} elements, {numel} expected"
            )
        itemsize = np.dtype(_DTYPES[dtype_name]).itemsize
        raw = stream.read(count * itemsize)
        if len(raw) != count * itemsize:
            raise pickle.UnpicklingError("file ends inside the tensor data")
        roots[key] = _Storage(_element_array(raw, dtype_name, big_endian), dtype_name)
    views: dict[str, _Storage] = {}

    # Pass 2: the object itself, with the storages in hand.
    def persistent(pid: Any) -> Any:
        kind = _as_str(pid[0])
        if kind == "module":
            return pid[1]
        _storage_type, root_key, _location, _numel, view = pid[1:6]
        root = roots.get(_as_str(root_key))
        if root is None:
            raise pickle.UnpicklingError(f"storage `{_as_str(root_key)}` has no data")
        if view is None:
            return root
        view_key, offset, view_size = view
        view_key = _as_str(view_key)
        if view_key not in views:
            views[view_key] = _Storage(
                root.data[int(offset) : int(offset) + int(view_size)], root.dtype_name
            )
        return views[view_key]

    stream.seek(object_start)
    return _Unpickler(stream, persistent).load()


# ------------------------------------------------------------------------------------------


def not_a_checkpoint_reason(path: str | PathLike[str]) -> str:
    """What a file that is not a readable PyTorch checkpoint is, judged by its first bytes:
    empty, a truncated zip archive, a NumPy array, text, or something else."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(64)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not head:
        return "the file is empty, not a PyTorch checkpoint"
    if head.startswith(b"PK\x03\x04") and not zipfile.is_zipfile(path):
        size = Path(path).stat().st_size
        return (
            f"truncated or damaged: a zip archive whose directory (at the end of the file) is "
            f"missing, {size} bytes long; was the copy or download cut short?"
        )
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy file, not a PyTorch checkpoint"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\r\n\t" for c in text):
        first = text.strip().splitlines()[0][:40] if text.strip() else ""
        return f"a text file (it begins `{first}`), not a PyTorch checkpoint"
    return "not a PyTorch checkpoint (neither a zip archive nor a legacy torch file)"


def read_torch_object(path: str | PathLike[str]) -> Any:
    """The object pickled in a PyTorch file (zip or legacy format), tensors as NumPy arrays.

    Raises EdgesynthError naming the file when it is missing, unreadable, not a torch file
    or corrupt.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise EdgesynthError(f"checkpoint file {what}", file=str(path))
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return _read_zip(path, archive)
        with path.open("rb") as stream:
            head = stream.read(2)
            if len(head) < 2 or head[0] != 0x80:
                raise EdgesynthError(not_a_checkpoint_reason(path), file=str(path))
            stream.seek(0)
            return _read_legacy(path, stream)
    except EdgesynthError:
        raise
    except (PermissionError, FileNotFoundError, IsADirectoryError) as exc:
        raise EdgesynthError(
            f"cannot read checkpoint: {exc.strerror or exc}", file=str(path)
        ) from None
    except Exception as exc:  # anything else means the file is damaged or not what it claims
        detail = str(exc) or type(exc).__name__
        raise EdgesynthError(
            f"corrupt or unsupported PyTorch checkpoint ({detail})", file=str(path)
        ) from None


def read_torch_file(path: str | PathLike[str]) -> dict:
    """A PyTorch checkpoint's top-level dict, every tensor a NumPy array; torch not needed."""
    obj = read_torch_object(path)
    if not isinstance(obj, dict):
        raise EdgesynthError(
            f"expected a checkpoint dict at the top level, found {type(obj).__name__}",
            file=str(path),
        )
    return obj


# ------------------------------------------------------------------------------------------
# writing (zip format), for tools and tests that need a checkpoint without torch

_STORAGE_FOR_DTYPE: dict[str, str] = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "float16": "HalfStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "int16": "ShortStorage",
    "int32": "IntStorage",
    "int64": "LongStorage",
    "bool": "BoolStorage",
    "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
}


class _Global:
    """A reference to `module.name` written into the pickle without importing it."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, *args: Any) -> None:  # pickle insists that reduce functions be callable
        raise TypeError("a pickle-only reference")


_REBUILD_V2 = _Global("torch._utils", "_rebuild_tensor_v2")


class _StorageRef:
    def __init__(self, key: str, storage_type: str, numel: int) -> None:
        self.key = key
        self.storage_type = storage_type
        self.numel = numel


class _Writer(pickle._Pickler):  # the Python pickler: `save` can be extended
    def __init__(self, file: BinaryIO) -> None:
        super().__init__(file, protocol=2)
        self.storages: list[tuple[str, bytes]] = []

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _StorageRef):
            return ("storage", _Global("torch", obj.storage_type), obj.key, "cpu", obj.numel)
        return None

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if isinstance(obj, _Global):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("ascii"))
            return
        if isinstance(obj, np.generic):
            obj = obj.item()
        if isinstance(obj, np.ndarray):
            obj = self._tensor(obj)
        elif obj is not collections.OrderedDict and not isinstance(
            obj, dict | list | tuple | str | bytes | int | float | bool | type(None) | _StorageRef
        ):
            raise TypeError(f"cannot write a {type(obj).__name__} into a torch file")
        super().save(obj, save_persistent_id)

    def _tensor(self, array: np.ndarray) -> tuple:
        name = _STORAGE_FOR_DTYPE.get(array.dtype.name)
        if name is None:
            raise TypeError(f"cannot write {array.dtype} tensors")
        flat = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
        key = str(len(self.storages))
        self.storages.append((key, flat.tobytes()))
        stride, step = [], 1
        for dim in reversed(array.shape):
            stride.append(step)
            step *= max(dim, 1)
        args = (
            _StorageRef(key, name, int(array.size)),
            0,
            tuple(int(d) for d in array.shape),
            tuple(reversed(stride)),
            False,
            collections.OrderedDict(),
        )
        return _Reduced(_REBUILD_V2, args)


class _Reduced:
    """An object that pickles as `func(*args)`."""

    def __init__(self, func: _Global, args: tuple) -> None:
        self.func = func
        self.args = args

    def __reduce__(self) -> tuple:
        return (self.func, self.args)


def write_torch_file(path: str | PathLike[str], obj: dict) -> None:
    """Write `obj` (dicts, lists, scalars, strings, NumPy arrays as tensors) as a torch zip file.

    `torch.load` reads the result; so does `read_torch_file`. No torch needed.
    """
    path = Path(path)
    buffer = io.BytesIO()
    writer = _Writer(buffer)
    writer.dump(obj)
    root = path.name.split(".", 1)[0] or "archive"
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr(f"{root}/data.pkl", buffer.getvalue())
            archive.writestr(f"{root}/byteorder", "little")
            for key, raw in writer.storages:
                archive.writestr(f"{root}/data/{key}", raw)
            archive.writestr(f"{root}/version", "3\n")
    except OSError as exc:
        raise EdgesynthError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
