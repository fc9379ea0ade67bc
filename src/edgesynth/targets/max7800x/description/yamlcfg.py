"""Load a vendor YAML network description into a `NetworkSpec`.

The YAML is composed into a node tree rather than constructed, so every key keeps its line.
Keys and value spellings are the ones the vendor's izer accepts; values are normalized to the
canonical spellings of `spec.py`. Nothing that needs the device or the weights is inferred:
a key the file does not set stays None. All problems in a file are reported together.

`spec_from_document` reads a description made in memory (the max7800x target's lowering of a
network graph) with the same keys, converters and checks, without any text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from edgesynth.errors import EdgesynthError, MultipleErrors, did_you_mean
from edgesynth.targets.max7800x.description.spec import DataBufferSpec, LayerSpec, NetworkSpec

__all__ = ["load_spec", "spec_from_document"]


class _Invalid(Exception):
    """A value the vendor does not accept; the message says what it does accept."""


Convert = Callable[[Any], Any]


def _show(value: Any) -> str:
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(minimum: int | None = None, maximum: int | None = None) -> Convert:
    if minimum is not None and maximum is not None:
        wanted = f"an integer from {minimum} to {maximum}"
    elif minimum is not None:
        wanted = f"an integer >= {minimum}"
    else:
        wanted = "an integer"

    def convert(value: Any) -> int:
        if not _is_int(value):
            raise _Invalid(f"must be {wanted}, not {_show(value)}")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise _Invalid(f"must be {wanted}, not {value}")
        return value

    return convert


def _int_list(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise _Invalid(f"must be a list of integers, not {_show(value)}")
    return value


def _number_text(value: str, hex_only: bool) -> int:
    # Dots, underscores and spaces only group digits: 0x0000.0000.0000.000f
    digits = value.replace(".", "").replace("_", "").replace(" ", "").lower()
    hex_digits = hex_only or digits.startswith("0x")
    try:
        return int(digits, 16 if hex_digits else 10)
    except ValueError:
        raise _Invalid(f"is not a number: {_show(value)}") from None


def _procmap(value: Any) -> int:
    wanted = "a 64-bit processor map such as 0x0000.0000.0000.000f, with at least one bit set"
    if isinstance(value, str):
        value = _number_text(value, hex_only=True)  # as the vendor: hex even without 0x
    if not _is_int(value) or not 0 < value < 2**64:
        raise _Invalid(f"must be {wanted}, not {_show(value)}")
    return value


def _offset(value: Any) -> int:
    if isinstance(value, str):
        value = _number_text(value, hex_only=False)
    if not _is_int(value) or value < 0:
        raise _Invalid(f"must be a byte offset >= 0 such as 0x2000, not {_show(value)}")
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise _Invalid(f"must be true or false, not {_show(value)}")


def _text(value: Any) -> str:
    if value is None or isinstance(value, bool | list | dict):
        raise _Invalid(f"must be a single word or number, not {_show(value)}")
    return str(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid(f"must be text, not {_show(value)}")
    if value.lower() in ("stop", "input"):
        raise _Invalid(f"`{value}` is reserved; choose another name")
    return value


def _choice(table: dict[Any, Any], shown: str) -> Convert:
    def convert(value: Any) -> Any:
        key = value.lower() if isinstance(value, str) else value
        if isinstance(key, bool) or not isinstance(key, str | int) or key not in table:
            hint = ""
            if isinstance(key, str):
                hint = did_you_mean(key, [k for k in table if isinstance(k, str)])
            raise _Invalid(f"must be {shown}, not {_show(value)}.{hint}")
        return table[key]

    return convert


class _Pair:
    """A size given as `n`, `AxB` or `[A, B]`. Conv1d layers take one integer: (n, fill)."""

    def __init__(self, minimum: int, fill_1d: int) -> None:
        self.minimum = minimum
        self.fill_1d = fill_1d

    def __call__(self, value: Any, one_d: bool) -> tuple[int, int]:
        m = self.minimum
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)  # the vendor reads a quoted `3` like 3
        if one_d:
            wanted = f"a single integer >= {m} for a Conv1d layer"
            if isinstance(value, list) and value and value[1:] in ([], [self.fill_1d]):
                value = value[0]  # [n] or [n, fill]: the unused dimension given explicitly
            if not _is_int(value) or value < m:
                raise _Invalid(f"must be {wanted}, not {_show(value)}")
            return (value, self.fill_1d)
        wanted = f"an integer >= {m}, `AxB` or [A, B], such as 3, 3x3 or [3, 3]"
        pair = value
        if _is_int(value):
            pair = [value, value]
        elif isinstance(value, str):
            parts = value.lower().replace(" ", "").split("x")
            pair = [int(p) if p.isdigit() else p for p in parts]
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(_is_int(p) and p >= m for p in pair)
        ):
            raise _Invalid(f"must be {wanted}, not {_show(value)}")
        return (pair[0], pair[1])


def _dims(value: Any) -> tuple[int, int]:
    """`[H, W]`, or one integer L for 1D data, which is (L, 1)."""
    dims = [value] if _is_int(value) else value
    if (
        not isinstance(dims, list)
        or len(dims) not in (1, 2)
        or not all(_is_int(d) and d >= 1 for d in dims)
    ):
        raise _Invalid(f"must be [H, W] or a single length L, not {_show(value)}")
    return (dims[0], dims[1] if len(dims) == 2 else 1)


def _in_crop(value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(_is_int(v) and v >= 0 for v in value)
    ):
        raise _Invalid(f"must be [start, end], two integers >= 0, not {_show(value)}")
    return (value[0], value[1])


def _ref(value: Any) -> int | str:
    """A layer given by sequence number or name."""
    if (_is_int(value) and value >= 0) or (isinstance(value, str) and value):
        return value
    raise _Invalid(f"must be a layer number >= 0 or a layer name, not {_show(value)}")


def _next_ref(value: Any) -> int | str:
    if value == -1 or (isinstance(value, str) and value.lower() == "stop"):
        return "stop"
    if (_is_int(value) and value >= 0) or (isinstance(value, str) and value):
        return value
    raise _Invalid(f"must be a layer number, a layer name or `stop`, not {_show(value)}")


def _in_sequences(value: Any) -> list[int | str]:
    items = value if isinstance(value, list) else [value]
    result: list[int | str] = []
    for item in items:
        if isinstance(item, str) and item.lower() == "input":
            item = -1
        if not ((_is_int(item) and item >= -1) or (isinstance(item, str) and item)):
            raise _Invalid(
                "must be a layer number, a layer name, `input` or -1 (the input data), "
                f"or a list of those, not {_show(value)}"
            )
        result.append(item)
    if not result:
        raise _Invalid("must name at least one layer")
    return result


def _bias_group(value: Any) -> int | list[int]:
    if _is_int(value) and value >= 0:
        return value
    if isinstance(value, list) and value and all(_is_int(v) and v >= 0 for v in value):
        return value
    raise _Invalid(f"must be a quadrant number or a list of quadrant numbers, not {_show(value)}")


# Operation spellings: (operation, implied element-wise op). Like the vendor, an element-wise
# operation on its own is a passthrough with that element-wise op.
_OPERATIONS: dict[str, tuple[str, str | None]] = {
    "conv1d": ("conv1d", None),
    "conv2d": ("conv2d", None),
    "convtranspose2d": ("convtranspose2d", None),
    "none": ("none", None),
    "passthrough": ("none", None),
    "linear": ("linear", None),
    "fc": ("linear", None),
    "mlp": ("linear", None),
    "add": ("none", "add"),
    "sub": ("none", "sub"),
    "xor": ("none", "xor"),
    "bitwisexor": ("none", "xor"),
    "bitwise_xor": ("none", "xor"),
    "or": ("none", "or"),
    "bitwiseor": ("none", "or"),
    "bitwise_or": ("none", "or"),
}
_OPERATION_TEXT = (
    "Conv1d, Conv2d, ConvTranspose2d, None/Passthrough, Linear/FC/MLP, Add, Sub, "
    "Xor/BitwiseXor or Or/BitwiseOr"
)

_OPERATION = _choice(_OPERATIONS, _OPERATION_TEXT)
_ACTIVATION = _choice({"relu": "relu", "abs": "abs", "none": "none"}, "ReLU, Abs or None")
_ELTWISE = _choice({"add": "add", "sub": "sub", "xor": "xor", "or": "or"}, "add, sub, xor or or")
_WIDTH = _choice({8: 8, 32: 32}, "8 or 32")
_QUANTIZATION = _choice(
    {1: 1, 2: 2, 4: 4, 8: 8, "bin": "binary", "binary": "binary"}, "1, 2, 4, 8 or binary"
)
_DATA_FORMAT = _choice({"hwc": "HWC", "little": "HWC", "chw": "CHW", "big": "CHW"}, "HWC or CHW")

# YAML key -> (LayerSpec field, converter). Several keys are the vendor's aliases of one field.
_LAYER_KEYS: dict[str, tuple[str, Convert | _Pair]] = {
    "name": ("name", _name),
    "sequence": ("sequence", _int(0)),
    "next_sequence": ("next_sequence", _next_ref),
    "simulated_sequence": ("simulated_sequence", _next_ref),
    "snoop_sequence": ("snoop_sequence", _ref),
    "weight_source": ("weight_source", _ref),
    "processors": ("processors", _procmap),
    "output_processors": ("output_processors", _procmap),
    "out_offset": ("out_offset", _offset),
    "in_offset": ("in_offset", _offset),
    "output_width": ("output_width", _WIDTH),
    "data_format": ("data_format", _DATA_FORMAT),
    "operation": ("operation", _OPERATION),
    "op": ("operation", _OPERATION),
    "operator": ("operation", _OPERATION),
    "convolution": ("operation", _OPERATION),
    "eltwise": ("eltwise", _ELTWISE),
    "operands": ("operands", _int(2, 16)),
    "pool_first": ("pool_first", _bool),
    "activate": ("activation", _ACTIVATION),
    "activation": ("activation", _ACTIVATION),
    "quantization": ("quantization", _QUANTIZATION),
    "output_shift": ("output_shift", _int()),
    "kernel_size": ("kernel_size", _Pair(1, 1)),
    "stride": ("stride", _Pair(1, 1)),
    "pad": ("pad", _Pair(0, 0)),
    "dilation": ("dilation", _Pair(1, 1)),
    "max_pool": ("max_pool", _Pair(1, 1)),
    "avg_pool": ("avg_pool", _Pair(1, 1)),
    "pool_stride": ("pool_stride", _Pair(1, 1)),
    "pool_dilation": ("pool_dilation", _Pair(1, 1)),
    "groups": ("groups", _int(1)),
    "conv_groups": ("groups", _int(1)),
    "in_channels": ("in_channels", _int(1)),
    "out_channels": ("out_channels", _int(1)),
    "in_dim": ("in_dim", _dims),
    "in_crop": ("in_crop", _in_crop),
    "in_sequences": ("in_sequences", _in_sequences),
    "in_skip": ("read_gap", _int(0)),
    "read_gap": ("read_gap", _int(0)),
    "in_channel_skip": ("in_channel_skip", _int(0)),
    "write_gap": ("write_gap", _int(0)),
    "streaming": ("streaming", _bool),
    "flatten": ("flatten", _bool),
    "output": ("output", _bool),
    "bypass": ("bypass", _bool),
    "calcx4": ("calcx4", _bool),
    "readahead": ("readahead", _bool),
    "tcalc": ("tcalc", _bool),
    "bias_group": ("bias_group", _bias_group),
    "bias_quadrant": ("bias_group", _bias_group),
    "buffer_shift": ("buffer_shift", _int(1)),
    "buffer_insert": ("buffer_insert", _int(1)),
    "output_pad": ("output_padding", _Pair(0, 0)),
    "output_padding": ("output_padding", _Pair(0, 0)),
    "cpu": ("cpu", _bool),  # edgesynth's own: the layer runs on the Cortex-M4 (`cpu_marks`)
}

OWN_KEYS = ("cpu",)  # edgesynth's own keys, which the vendor's tool has not: not suggested

_UNLOAD_KEYS: dict[str, tuple[str, Convert]] = {
    "processors": ("processors", _procmap),
    "channels": ("channels", _int(1)),
    "dim": ("dim", _dims),
    "offset": ("offset", _offset),
    "width": ("width", _WIDTH),
    "write_gap": ("write_gap", _int(0)),
}
_DATA_BUFFER_KEYS: dict[str, tuple[str, Convert]] = {
    **{k: _UNLOAD_KEYS[k] for k in ("processors", "channels", "dim", "offset", "width")},
    "name": ("name", _name),
}
_GLOBAL_KEYS: dict[str, tuple[str, Convert | None]] = {
    "arch": ("arch", _text),
    "dataset": ("dataset", _text),
    "weights": ("weights", _text),
    "bias": ("bias", _text),
    "output_map": ("output_map", _procmap),
    "snoop": ("snoop", _int_list),
    "layers": ("layers", None),  # the lists are read by their own code below
    "unload": ("unload", None),
    "data_buffer": ("data_buffer", None),
}


class _Entry(NamedTuple):
    key: str  # as written, which may be an alias
    line: int
    node: Node
    convert: Any


def _line(node: Node) -> int:
    return node.start_mark.line + 1


def _kind(node: Node) -> str:
    if isinstance(node, ScalarNode):
        return f"the value `{node.value}`" if node.value else "an empty value"
    return "a list" if isinstance(node, SequenceNode) else "a mapping"


class _Loader:
    def __init__(self, file: str, text: str, show_lines: bool = True) -> None:
        self.file = file
        self.text = text
        self.show_lines = show_lines  # False: lines only order the problems (no file text)
        # (message, line, key, layer): built into errors at the end, once layer names are known
        self.problems: list[tuple[str, int | None, str | None, LayerSpec | None]] = []
        self.constructor = yaml.constructor.SafeConstructor()

    def error(
        self, message: str, line: int | None, key: str | None = None, layer: LayerSpec | None = None
    ) -> None:
        self.problems.append((message, line, key, layer))

    def errors(self) -> list[EdgesynthError]:
        """Every problem found, in line order."""
        return [
            EdgesynthError(
                message,
                file=self.file,
                line=line if self.show_lines else None,
                layer=layer.index if layer else None,
                layer_name=layer.name if layer else None,
                key=key,
            )
            for message, line, key, layer in sorted(self.problems, key=lambda p: p[1] or 0)
        ]

    def value(self, entry: _Entry, layer: LayerSpec | None = None, *extra: Any) -> Any:
        """The converted value of `entry`, or None after recording why it is not acceptable."""
        try:
            return entry.convert(self.constructor.construct_object(entry.node, deep=True), *extra)
        except _Invalid as exc:
            self.error(str(exc), entry.line, entry.key, layer)
        except yaml.YAMLError as exc:
            self.error(f"cannot be read: {exc}", entry.line, entry.key, layer)
        return None

    def entries(
        self,
        node: MappingNode,
        table: dict[str, tuple[str, Any]],
        what: str,
        layer: LayerSpec | None = None,
        prefix: str = "",
    ) -> dict[str, _Entry]:
        """The mapping's keys by canonical name; reports unknown, repeated and aliased keys."""
        found: dict[str, _Entry] = {}
        for key_node, value_node in node.value:
            line = _line(key_node)
            key = key_node.value if isinstance(key_node, ScalarNode) else _kind(key_node)
            if key not in table:
                vendor = [k for k in table if k not in OWN_KEYS]  # what the messages list
                hint = did_you_mean(key, vendor)
                if not hint:
                    hint = " Accepted keys: " + ", ".join(sorted(vendor)) + "."
                self.error(f"unknown {what} key.{hint}", line, prefix + key, layer)
                continue
            canonical, convert = table[key]
            if canonical in found:
                first = found[canonical]
                if first.key == prefix + key:
                    problem = f"appears twice in one {what} (first on line {first.line})"
                else:
                    problem = (
                        f"means the same as `{first.key}` on line {first.line}; "
                        "give only one of them"
                    )
                self.error(problem, line, prefix + key, layer)
                continue
            found[canonical] = _Entry(prefix + key, line, value_node, convert)
        return found

    def items(self, node: Node, key: str, what: str) -> list[Node]:
        """The items of a YAML list that must hold mappings."""
        if not isinstance(node, SequenceNode):
            self.error(
                f"must be a list of {what} (each starting with `- `), not {_kind(node)}",
                _line(node),
                key,
            )
            return []
        good = []
        for item in node.value:
            if isinstance(item, MappingNode):
                good.append(item)
            else:
                self.error(
                    f"each entry must be a mapping of keys, not {_kind(item)}", _line(item), key
                )
        return good

    def entry_line(self, node: Node) -> int:
        """The line of the `- ` that starts a list entry, which may precede its first key."""
        i = node.start_mark.index - 1
        while i >= 0 and self.text[i] in " \t\r\n":
            i -= 1
        if i >= 0 and self.text[i] == "-":
            return self.text.count("\n", 0, i) + 1
        return _line(node)

    def network(self, root: Node) -> NetworkSpec:
        spec = NetworkSpec(path=self.file)
        if not isinstance(root, MappingNode):
            self.error(
                "a network description must be a mapping with `arch`, `dataset` and `layers`, "
                f"not {_kind(root)}",
                _line(root),
            )
            return spec
        found = self.entries(root, _GLOBAL_KEYS, "top-level")
        for canonical, entry in found.items():
            spec.lines[canonical] = entry.line
            if entry.convert is not None:
                setattr(spec, canonical, self.value(entry))
        for required in ("arch", "dataset", "layers"):
            if required not in found:
                self.error(
                    "is missing; every network description needs `arch`, `dataset` and `layers`",
                    _line(root),
                    required,
                )
        if "unload" in found:
            spec.unload = [
                self.unload(i, n)
                for i, n in enumerate(self.items(found["unload"].node, "unload", "unload entries"))
            ]
        if "data_buffer" in found:
            node = found["data_buffer"].node
            buffers = [
                self.data_buffer(i, n)
                for i, n in enumerate(self.items(node, "data_buffer", "data buffers"))
            ]
            spec.data_buffer = [b for b in buffers if b is not None]
        if "layers" in found:
            node = found["layers"].node
            layers = self.items(node, "layers", "layers")
            if isinstance(node, SequenceNode) and not node.value:
                self.error("must list at least one layer", _line(node), "layers")
            spec.layers = [self.layer(i, n) for i, n in enumerate(layers)]
        self.check_references(spec)
        return spec

    def unload(self, index: int, node: MappingNode) -> dict[str, object]:
        prefix = f"unload[{index}]."
        found = self.entries(node, _UNLOAD_KEYS, "unload", prefix=prefix)
        result: dict[str, object] = {k: self.value(e) for k, e in found.items()}
        for required in ("processors", "channels", "dim", "offset"):
            if required not in found:
                self.error(
                    "is missing; each unload entry needs `processors`, `channels`, "
                    "`dim` and `offset`",
                    _line(node),
                    prefix + required,
                )
        result["line"] = self.entry_line(node)
        return result

    def data_buffer(self, index: int, node: MappingNode) -> DataBufferSpec | None:
        prefix = f"data_buffer[{index}]."
        found = self.entries(node, _DATA_BUFFER_KEYS, "data_buffer", prefix=prefix)
        values = {k: self.value(e) for k, e in found.items()}
        missing = [
            k for k in ("processors", "channels", "dim", "offset", "name") if values.get(k) is None
        ]
        for required in missing:
            if required not in found:
                self.error(
                    "is missing; a data buffer needs `processors`, `channels`, `dim`, "
                    "`offset` and `name`",
                    _line(node),
                    prefix + required,
                )
        if missing:
            return None
        return DataBufferSpec(line=self.entry_line(node), **values)

    def layer(self, index: int, node: MappingNode) -> LayerSpec:
        layer = LayerSpec(index=index, line=self.entry_line(node))
        found = self.entries(node, _LAYER_KEYS, "layer", layer)
        # The name first, so that every other message can show it; then the operation,
        # because a Conv1d layer reads its sizes as single integers.
        implied_eltwise = None
        for canonical in ("name", "operation"):
            if canonical in found:
                layer.lines[canonical] = found[canonical].line
                value = self.value(found[canonical], layer)
                if canonical == "operation" and value is not None:
                    value, implied_eltwise = value
                setattr(layer, canonical, value)
        one_d = layer.operation == "conv1d"
        for canonical, entry in found.items():
            layer.lines[canonical] = entry.line
            if canonical in ("name", "operation"):
                continue
            if isinstance(entry.convert, _Pair):
                value = self.value(entry, layer, one_d)
            else:
                value = self.value(entry, layer)
            setattr(layer, canonical, value)
        if implied_eltwise is not None:
            if layer.eltwise not in (None, implied_eltwise):
                self.error(
                    f"conflicts with the operation `{found['operation'].key}: {implied_eltwise}`",
                    found["eltwise"].line,
                    "eltwise",
                    layer,
                )
            layer.eltwise = implied_eltwise
        if "max_pool" in found and "avg_pool" in found:
            self.error(
                "cannot be used with `max_pool` in the same layer; give one pooling",
                found["avg_pool"].line,
                found["avg_pool"].key,
                layer,
            )
        return layer

    def check_references(self, spec: NetworkSpec) -> None:
        """Layer names are unique, and every name a layer refers to exists."""
        names: dict[str, str] = {}  # lower-case -> as declared; the vendor ignores case
        for layer in spec.layers:
            if layer.name is None:
                continue
            if layer.name.lower() in names:
                self.error(
                    f"`{layer.name}` is already the name of another layer",
                    layer.lines["name"],
                    "name",
                    layer,
                )
            names.setdefault(layer.name.lower(), layer.name)
        buffers: dict[str, str] = {}
        for buffer in spec.data_buffer:
            assert buffer.name is not None
            if buffer.name.lower() in names or buffer.name.lower() in buffers:
                self.error(
                    f"`{buffer.name}` is already the name of a layer or buffer",
                    buffer.line,
                    "data_buffer.name",
                )
            buffers.setdefault(buffer.name.lower(), buffer.name)

        def resolve(ref: Any, layer: LayerSpec, key: str, known: dict[str, str]) -> Any:
            if not isinstance(ref, str):
                return ref
            if ref.lower() in known:
                return known[ref.lower()]
            hint = did_you_mean(ref, known.values())
            self.error(f"`{ref}` is not the name of any layer.{hint}", layer.lines[key], key, layer)
            return ref

        with_stop = {**names, "stop": "stop"}  # no layer may be named `stop`
        used: dict[int, LayerSpec] = {}
        sequence = -1
        for layer in spec.layers:
            layer.next_sequence = resolve(layer.next_sequence, layer, "next_sequence", with_stop)
            layer.simulated_sequence = resolve(
                layer.simulated_sequence, layer, "simulated_sequence", with_stop
            )
            layer.snoop_sequence = resolve(layer.snoop_sequence, layer, "snoop_sequence", names)
            layer.weight_source = resolve(layer.weight_source, layer, "weight_source", names)
            if layer.in_sequences is not None:
                known = {**names, **buffers}
                layer.in_sequences = [
                    resolve(r, layer, "in_sequences", known) for r in layer.in_sequences
                ]
            # The vendor numbers a layer without `sequence` one after the layer before it.
            sequence = layer.sequence if layer.sequence is not None else sequence + 1
            if sequence in used:
                self.error(
                    f"layer sequence {sequence} is already used by the layer on line "
                    f"{used[sequence].line}",
                    layer.lines.get("sequence", layer.line),
                    "sequence",
                    layer,
                )
            used.setdefault(sequence, layer)


def _read(file: str) -> str:
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EdgesynthError("YAML network description not found", file=file) from None
    except IsADirectoryError:
        raise EdgesynthError("is a directory, not a YAML network description", file=file) from None
    except UnicodeDecodeError as exc:
        head = Path(file).read_bytes()[:6]
        if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80":
            what = "a PyTorch checkpoint (zip archive or pickle)"
        elif head.startswith(b"\x93NUMPY"):
            what = "a NumPy .npy file"
        else:
            what = f"binary data, not UTF-8 text ({exc.reason})"
        raise EdgesynthError(
            f"is {what}, not a YAML network description; check which file goes where.",
            file=file,
        ) from None
    except OSError as exc:
        raise EdgesynthError(f"cannot be read: {exc.strerror}", file=file) from None


# LibYAML's parser where PyYAML was built with it: the same node tree (tags, values, lines and
# offsets) in a tenth of the time. A file it refuses is parsed again by PyYAML's own parser,
# whose messages are the ones reported.
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def _compose(text: str, file: str) -> Node:
    if _FAST_LOADER is not None:
        try:
            root = yaml.compose(text, Loader=_FAST_LOADER)
        except yaml.YAMLError:
            pass
        else:
            return _non_empty(root, file)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        context = f" ({exc.context})" if exc.context and exc.problem else ""
        where = f" at column {mark.column + 1}" if mark else ""
        raise EdgesynthError(
            f"YAML syntax error{where}: {problem}{context}",
            file=file,
            line=mark.line + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise EdgesynthError(f"YAML error: {exc}", file=file) from None
    return _non_empty(root, file)


def _non_empty(root: Node | None, file: str) -> Node:
    if root is None:
        raise EdgesynthError(
            "the file is empty; a network description needs `arch`, `dataset` and `layers`",
            file=file,
        )
    return root


def load_spec(path: str | Path) -> NetworkSpec:
    """Read the YAML network description at `path`.

    Raises `EdgesynthError` naming the file, line, layer and key of the problem, or
    `MultipleErrors` when the file has several.
    """
    file = str(path)
    text = _read(file)
    loader = _Loader(file, text)
    spec = loader.network(_compose(text, file))
    _raise(loader.errors())
    return spec


def _raise(errors: list[EdgesynthError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MultipleErrors(errors)


def _number(node: Node, count: int = 0) -> int:
    """Mark every node of a tree with its position in document order, as its "line": the
    order a file would give them, for ordering problems (never shown)."""
    node.start_mark = yaml.Mark("", 0, count, 0, None, None)
    count += 1
    if isinstance(node, MappingNode):
        for key, value in node.value:
            count = _number(value, _number(key, count))
    elif isinstance(node, SequenceNode):
        for item in node.value:
            count = _number(item, count)
    return count


def _forget_lines(spec: NetworkSpec) -> None:
    """Lines of a description that has no text: 0 (none), every key still listed as given."""
    spec.lines = dict.fromkeys(spec.lines, 0)
    for layer in spec.layers:
        layer.line, layer.lines = 0, dict.fromkeys(layer.lines, 0)
    for buffer in spec.data_buffer:
        buffer.line = 0
    for entry in spec.unload or []:
        entry["line"] = 0


def spec_from_document(document: dict[str, Any], path: str) -> NetworkSpec:
    """The `NetworkSpec` of a description given as the mapping a YAML file would hold, read
    with the file's keys, converters and checks; its problems name `path` (no line)."""
    root = yaml.representer.SafeRepresenter(sort_keys=False).represent_data(document)
    _number(root)
    loader = _Loader(path, "", show_lines=False)
    spec = loader.network(root)
    _raise(loader.errors())
    _forget_lines(spec)
    return spec
