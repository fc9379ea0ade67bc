"""The YAML network-description loader: every vendor corpus file, value forms, and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.targets.max7800x.description.spec import (
    ACTIVATIONS,
    ELTWISE_OPS,
    OPERATIONS,
    NetworkSpec,
)
from edgesynth.targets.max7800x.description.yamlcfg import load_spec

CORPUS = Path(__file__).parents[3].parent / "shared" / "corpus"
CASES = CORPUS / "cases"
CORPUS_YAMLS = sorted(CASES.glob("*/*/**/*.yaml")) if CASES.is_dir() else []
needs_corpus = pytest.mark.usefixtures("corpus")  # fails when the corpus is missing


def case(device: str, name: str, relative: str) -> NetworkSpec:
    return load_spec(CASES / device / name / relative)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "net.yaml"
    path.write_text(text)
    return path


def one_layer(tmp_path: Path, body: str) -> NetworkSpec:
    """Load a network whose single layer has `processors: 1` plus `body` (indented keys)."""
    return load_spec(write(tmp_path, f"arch: a\ndataset: b\nlayers:\n  - processors: 1\n{body}"))


def error_of(tmp_path: Path, text: str) -> EdgesynthError:
    with pytest.raises(EdgesynthError) as info:
        load_spec(write(tmp_path, text))
    return info.value


# --- the vendor corpus ----------------------------------------------------------------------


@needs_corpus
@pytest.mark.parametrize(
    "path", CORPUS_YAMLS, ids=[str(p.relative_to(CASES)) for p in CORPUS_YAMLS]
)
def test_every_corpus_file_loads(path: Path) -> None:
    spec = load_spec(path)
    assert spec.path == str(path)
    assert spec.arch and spec.dataset and spec.layers
    for index, layer in enumerate(spec.layers):
        assert layer.index == index
        assert layer.processors is not None and layer.line >= 1
        assert layer.operation in (*OPERATIONS, None)
        assert layer.eltwise in (*ELTWISE_OPS, None)
        assert layer.activation in (*ACTIVATIONS, None)
        assert set(layer.lines) <= set(vars(layer))


@needs_corpus
def test_corpus_is_complete() -> None:
    assert len(CORPUS_YAMLS) == 554


@needs_corpus
def test_mnist_max78000() -> None:
    spec = case("MAX78000", "mnist", "networks/mnist-chw-ai85.yaml")
    assert (spec.arch, spec.dataset) == ("ai85net5", "MNIST")
    assert len(spec.layers) == 5
    first, last = spec.layers[0], spec.layers[4]
    assert first.processors == 0x1
    assert first.out_offset == 0x2000
    assert first.pad == (1, 1)
    assert first.data_format == "CHW"
    assert first.operation == "conv2d"
    assert first.activation == "relu"
    assert first.kernel_size is None and first.in_offset is None  # nothing inferred
    assert spec.layers[1].max_pool == (2, 2) and spec.layers[1].pool_stride == (2, 2)
    assert spec.layers[1].processors == 0xFFFFFFFFFFFFFFF0
    assert spec.layers[3].avg_pool == (2, 2) and spec.layers[3].max_pool is None
    assert last.operation == "linear"
    assert last.flatten is True
    assert last.output_width == 32
    assert last.processors == 0x0FFF
    assert last.out_offset == 0x1000
    # lines point at the YAML text
    text = Path(spec.path).read_text().splitlines()
    assert text[last.lines["flatten"] - 1].strip() == "flatten: true"
    assert text[first.line - 1].lstrip().startswith("- ")
    assert text[spec.lines["layers"] - 1].startswith("layers:")


@needs_corpus
def test_conv1d_sizes_are_single_integers() -> None:
    spec = case("MAX78000", "kws20_v3", "networks/kws20-v3-hwc.yaml")
    first, second, third = spec.layers[:3]
    assert first.operation == "conv1d"
    assert first.kernel_size == (1, 1) and first.pad == (0, 0)
    assert second.kernel_size == (3, 1)
    assert third.max_pool == (2, 1) and third.pool_stride == (2, 1) and third.pad == (1, 0)


@needs_corpus
def test_hex_processor_maps_with_dots_and_underscores() -> None:
    dotted = case("MAX78000", "test-depthwise-nopool-c", "tests/test-depthwise-nopool-c.yaml")
    assert dotted.layers[0].processors == 0xFFFFFFFFFFFFFF00
    assert dotted.layers[0].output_processors == 0x00FFFFFFFFFFFFFF
    name = "test-conv1d-dilation7-pad0-128ch"
    underscored = case("MAX78000", name, f"tests/{name}.yaml")
    assert underscored.layers[0].processors == 2**64 - 1
    assert underscored.layers[0].dilation == (7, 1)


@needs_corpus
def test_next_sequence_numbers_and_stop() -> None:
    name = "test-linklayer-hoparound"
    spec = case("MAX78002", name, f"tests/{name}.yaml")
    assert [layer.next_sequence for layer in spec.layers] == [3, 0, "stop", 2]
    assert spec.bias == "linklayer-hoparound"


@needs_corpus
def test_fire_in_sequences_and_passthrough() -> None:
    spec = case("MAX78000", "test-ai85-fire-cifar10", "tests/test-ai85-fire-cifar10.yaml")
    assert spec.layers[0].operation == "none"
    assert spec.layers[1].kernel_size == (1, 1)
    assert spec.layers[2].in_dim == (16, 16)
    assert spec.layers[3].in_sequences == [1]
    assert spec.layers[4].in_sequences == [2, 3]
    assert spec.layers[6].operation == "linear"


@needs_corpus
def test_binary_quantization_snoop_and_aliases() -> None:
    spec = case("MAX78002", "test-snoop2-stop", "tests/test-snoop2-stop.yaml")
    assert spec.snoop is not None and spec.snoop[12] == 0x201001 and len(spec.snoop) == 32
    assert spec.layers[0].simulated_sequence == "stop"
    assert spec.layers[0].output_shift == -1
    assert spec.layers[1].quantization == "binary"
    assert spec.layers[1].groups == 64  # written `conv_groups`
    assert "groups" in spec.layers[1].lines


@needs_corpus
def test_eltwise_operation_and_other_vendor_keys() -> None:
    add = case("MAX78000", "test-eltwiseadd-7ch", "tests/test-eltwiseadd-7ch.yaml")
    assert (add.layers[0].operation, add.layers[0].eltwise) == ("none", "add")
    assert add.layers[0].operands is None  # the default of 2 is not filled in
    kern = case("MAX78002", "test-maxkern", "tests/test-maxkern.yaml")
    assert kern.layers[1].read_gap == 15  # written `in_skip`
    bypass = case("MAX78002", "test-bypass-identity", "tests/test-bypass-identity.yaml")
    assert bypass.bias == "64" and bypass.layers[0].bypass is True
    name = "test-upsample-nonsquare-pad1C"
    up = case("MAX78002", name, f"tests/{name}.yaml")
    assert up.layers[0].operation == "convtranspose2d"
    assert up.layers[0].output_padding == (1, 1)  # written `output_pad`


# --- value forms ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("0x0000.0000.0000.000f", 0xF),
        ("0x0000_0000_0000_00f0", 0xF0),
        ('"0xffff ffff 0000 0000"', 0xFFFFFFFF00000000),
        ('"ff00"', 0xFF00),
        ("0x1", 1),
        ("7", 7),
    ],
)
def test_processor_map_forms(tmp_path: Path, written: str, expected: int) -> None:
    text = f"arch: a\ndataset: b\noutput_map: {written}\nlayers:\n  - processors: {written}\n"
    spec = load_spec(write(tmp_path, text))
    assert spec.layers[0].processors == expected
    assert spec.output_map == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [("0x2000", 0x2000), ('"0x2000"', 0x2000), ("'0x0000.4000'", 0x4000), ("512", 512), ("0", 0)],
)
def test_offset_forms(tmp_path: Path, written: str, expected: int) -> None:
    layer = one_layer(tmp_path, f"    out_offset: {written}\n    in_offset: {written}\n").layers[0]
    assert layer.out_offset == expected and layer.in_offset == expected


@pytest.mark.parametrize("written", ["3x3", "3X3", "'3 x 3'", "[3, 3]", "3", "'3'"])
def test_2d_size_forms(tmp_path: Path, written: str) -> None:
    body = "".join(
        f"    {key}: {written}\n" for key in ("kernel_size", "max_pool", "pool_stride", "pad")
    )
    layer = one_layer(tmp_path, "    op: conv2d\n" + body).layers[0]
    assert layer.kernel_size == layer.max_pool == layer.pool_stride == layer.pad == (3, 3)


def test_non_square_sizes(tmp_path: Path) -> None:
    layer = one_layer(tmp_path, "    max_pool: [2, 3]\n    pool_dilation: 2x1\n").layers[0]
    assert layer.max_pool == (2, 3) and layer.pool_dilation == (2, 1)


def test_conv1d_fills_the_unused_dimension(tmp_path: Path) -> None:
    body = (
        "    operation: Conv1d\n    kernel_size: 5\n    pad: 2\n    stride: 1\n"
        "    dilation: 3\n    avg_pool: 4\n    pool_stride: [4, 1]\n"
    )
    layer = one_layer(tmp_path, body).layers[0]
    assert layer.kernel_size == (5, 1)
    assert layer.pad == (2, 0)
    assert layer.stride == (1, 1)
    assert layer.dilation == (3, 1)
    assert layer.avg_pool == (4, 1)
    assert layer.pool_stride == (4, 1)


@pytest.mark.parametrize(
    ("written", "operation", "eltwise"),
    [
        ("conv2d", "conv2d", None),
        ("Conv2d", "conv2d", None),
        ("conv1d", "conv1d", None),
        ("ConvTranspose2d", "convtranspose2d", None),
        ("passthrough", "none", None),
        ("None", "none", None),
        ("mlp", "linear", None),
        ("fc", "linear", None),
        ("Linear", "linear", None),
        ("Add", "none", "add"),
        ("Sub", "none", "sub"),
        ("Xor", "none", "xor"),
        ("BitwiseXor", "none", "xor"),
        ("Or", "none", "or"),
        ("bitwise_or", "none", "or"),
    ],
)
@pytest.mark.parametrize("key", ["operation", "op", "operator", "convolution"])
def test_operation_spellings(
    tmp_path: Path, key: str, written: str, operation: str, eltwise: str | None
) -> None:
    layer = one_layer(tmp_path, f"    {key}: {written}\n").layers[0]
    assert (layer.operation, layer.eltwise) == (operation, eltwise)
    assert "operation" in layer.lines


@pytest.mark.parametrize(
    ("key", "written", "expected"),
    [
        ("activate", "ReLU", "relu"),
        ("activation", "relu", "relu"),
        ("activate", "Abs", "abs"),
        ("activate", "None", "none"),
        ("activation", "none", "none"),
        ("quantization", "1", 1),
        ("quantization", "8", 8),
        ("quantization", "binary", "binary"),
        ("quantization", "bin", "binary"),
        ("quantization", "Binary", "binary"),
        ("data_format", "HWC", "HWC"),
        ("data_format", "chw", "CHW"),
        ("data_format", "big", "CHW"),
        ("data_format", "little", "HWC"),
        ("eltwise", "add", "add"),
        ("eltwise", "Xor", "xor"),
        ("flatten", "true", True),
        ("streaming", "True", True),
        ("pool_first", "false", False),
        ("output", "yes", True),
        ("calcx4", "1", True),
        ("in_dim", "[16, 8]", (16, 8)),
        ("in_dim", "32", (32, 1)),
        ("in_crop", "[3, 3]", (3, 3)),
        ("in_sequences", "2", [2]),
        ("in_sequences", "[1, -1]", [1, -1]),
        ("in_sequences", "[Input, 0]", [-1, 0]),
        ("next_sequence", "-1", "stop"),
        ("next_sequence", "Stop", "stop"),
        ("next_sequence", "4", 4),
        ("bias_group", "0", 0),
        ("bias_group", "[0, 2]", [0, 2]),
        ("bias_quadrant", "3", 3),
        ("output_shift", "-4", -4),
        ("read_gap", "1", 1),
        ("in_skip", "2", 2),
        ("in_channel_skip", "1", 1),
        ("conv_groups", "8", 8),
        ("output_pad", "1", (1, 1)),
        ("output_padding", "0", (0, 0)),
    ],
)
def test_value_spellings(tmp_path: Path, key: str, written: str, expected: object) -> None:
    layer = one_layer(tmp_path, f"    {key}: {written}\n").layers[0]
    aliases = {
        "activate": "activation",
        "in_skip": "read_gap",
        "conv_groups": "groups",
        "output_pad": "output_padding",
        "bias_quadrant": "bias_group",
    }
    field = aliases.get(key, key)
    assert getattr(layer, field) == expected
    assert field in layer.lines


def test_absent_keys_stay_none(tmp_path: Path) -> None:
    layer = one_layer(tmp_path, "").layers[0]
    assert layer.processors == 1
    unset = {k: v for k, v in vars(layer).items() if k not in ("index", "line", "lines")}
    assert all(v is None for k, v in unset.items() if k not in ("processors", "extra"))
    assert layer.lines == {"processors": 4} and layer.line == 4


def test_layer_names_are_references(tmp_path: Path) -> None:
    text = """\
arch: a
dataset: b
data_buffer:
  - processors: 0xffffffff00000000
    dim: 15
    channels: 32
    offset: 0x7fc4
    name: tcn_buffer
unload:
  - processors: 0x0f
    channels: 4
    dim: [2, 3]
    offset: 0x100
    width: 32
layers:
  - processors: 1
    name: Expand_1x1
    next_sequence: final
  - processors: 1
    name: expand_3x3
    weight_source: EXPAND_1X1
    snoop_sequence: 0
  - processors: 1
    name: final
    sequence: 5
    in_sequences: [expand_1x1, Expand_3x3, input, TCN_Buffer]
    buffer_shift: 1
    buffer_insert: 2
    simulated_sequence: expand_3x3
"""
    spec = load_spec(write(tmp_path, text))
    first, second, final = spec.layers
    assert first.next_sequence == "final"
    assert second.weight_source == "Expand_1x1"  # normalized to the declared spelling
    assert second.snoop_sequence == 0
    assert final.sequence == 5
    assert final.in_sequences == ["Expand_1x1", "expand_3x3", -1, "tcn_buffer"]
    assert (final.buffer_shift, final.buffer_insert) == (1, 2)
    assert final.simulated_sequence == "expand_3x3"
    (buffer,) = spec.data_buffer
    assert (buffer.processors, buffer.dim, buffer.channels) == (0xFFFFFFFF00000000, (15, 1), 32)
    assert (buffer.offset, buffer.name, buffer.line) == (0x7FC4, "tcn_buffer", 4)
    assert buffer.width is None
    assert spec.unload == [
        {"processors": 0xF, "channels": 4, "dim": (2, 3), "offset": 0x100, "width": 32, "line": 10}
    ]


def test_entry_line_is_the_dash(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "arch: a\ndataset: b\nlayers:\n  -\n    processors: 1\n"))
    assert spec.layers[0].line == 4
    assert spec.layers[0].lines["processors"] == 5


# --- errors ---------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(EdgesynthError) as info:
        load_spec(missing)
    assert info.value.file == str(missing)
    assert str(info.value) == f"{missing}: YAML network description not found"


def test_empty_file(tmp_path: Path) -> None:
    error = error_of(tmp_path, "# only a comment\n")
    assert not isinstance(error, MultipleErrors)
    assert "the file is empty" in str(error)
    assert "`arch`, `dataset` and `layers`" in str(error)


def test_syntax_error_has_the_line(tmp_path: Path) -> None:
    error = error_of(tmp_path, "arch: a\ndataset: b\nlayers:\n  - pad: 1\n    processors: [1\n")
    assert not isinstance(error, MultipleErrors)
    assert error.line == 6
    assert "YAML syntax error" in error.message and "expected ',' or ']'" in error.message


def test_tab_indentation_is_a_syntax_error(tmp_path: Path) -> None:
    error = error_of(tmp_path, "arch: a\ndataset: b\nlayers:\n  - processors: 1\n\tpad: 1\n")
    assert error.line == 5 and "YAML syntax error" in error.message


def test_scalar_where_layers_belong(tmp_path: Path) -> None:
    error = error_of(tmp_path, "arch: a\ndataset: b\nlayers: conv2d\n")
    assert str(error) == (
        f"{error.file}:3: `layers`: must be a list of layers (each starting with `- `), "
        "not the value `conv2d`"
    )


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    error = error_of(tmp_path, "- processors: 1\n")
    assert "must be a mapping with `arch`, `dataset` and `layers`" in error.message
    assert error.line == 1


def test_missing_layers(tmp_path: Path) -> None:
    error = error_of(tmp_path, "arch: a\ndataset: b\n")
    assert not isinstance(error, MultipleErrors)
    assert (error.key, error.line) == ("layers", 1)
    assert "is missing; every network description needs `arch`, `dataset` and `layers`" in str(
        error
    )


def test_empty_layer_list(tmp_path: Path) -> None:
    error = error_of(tmp_path, "arch: a\ndataset: b\nlayers: []\n")
    assert "must list at least one layer" in str(error)


def test_unknown_key_suggests_the_closest(tmp_path: Path) -> None:
    text = "arch: a\ndataset: b\nlayers:\n  - processors: 1\n    name: c1\n    kernel_sise: 3x3\n"
    error = error_of(tmp_path, text)
    assert (error.line, error.layer, error.layer_name, error.key) == (6, 0, "c1", "kernel_sise")
    assert str(error) == (
        f"{error.file}:6: layer 0 (c1): `kernel_sise`: unknown layer key. "
        "Did you mean `kernel_size`?"
    )


def test_unknown_key_without_a_close_match_lists_the_keys(tmp_path: Path) -> None:
    error = error_of(tmp_path, "arch: a\ndataset: b\nlayers:\n  - processors: 1\nzzz: 1\n")
    assert error.line == 5
    assert "unknown top-level key. Accepted keys: arch, bias, data_buffer, dataset" in str(error)


def test_bad_value_names_the_allowed_values(tmp_path: Path) -> None:
    text = "arch: a\ndataset: b\nlayers:\n  - processors: 1\n    activate: relu6\n"
    error = error_of(tmp_path, text)
    assert (error.line, error.key) == (5, "activate")
    assert error.message == "must be ReLU, Abs or None, not `relu6`. Did you mean `relu`?"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    quantization: 3\n", "must be 1, 2, 4, 8 or binary, not `3`"),
        ("    output_width: 16\n", "must be 8 or 32, not `16`"),
        ("    op: conv3d\n", "must be Conv1d, Conv2d, ConvTranspose2d, None/Passthrough"),
        ("    data_format: nchw\n", "must be HWC or CHW, not `nchw`"),
        ("    eltwise: mul\n", "must be add, sub, xor or or, not `mul`"),
        ("    operands: 17\n", "must be an integer from 2 to 16, not 17"),
        ("    flatten: maybe\n", "must be true or false, not `maybe`"),
        ("    pad: -1\n", "must be an integer >= 0, `AxB` or [A, B]"),
        ("    kernel_size: 3x3x3\n", "must be an integer >= 1, `AxB` or [A, B]"),
        ("    op: conv1d\n    kernel_size: 3x3\n", "must be a single integer >= 1 for a Conv1d"),
        ("    in_dim: [1, 2, 3]\n", "must be [H, W] or a single length L"),
        ("    out_offset: -4\n", "must be a byte offset >= 0 such as 0x2000, not `-4`"),
        ("    output_processors: 0\n", "must be a 64-bit processor map"),
        ("    output_processors: 0xg\n", "is not a number: `0xg`"),
        ("    name: input\n", "`input` is reserved; choose another name"),
        ("    in_sequences: [1.5]\n", "must be a layer number, a layer name, `input` or -1"),
        ("    weight_source: stop\n", "`stop` is not the name of any layer"),
    ],
)
def test_bad_values(tmp_path: Path, body: str, message: str) -> None:
    error = error_of(tmp_path, f"arch: a\ndataset: b\nlayers:\n  - processors: 1\n{body}")
    assert message in error.message
    assert error.layer == 0 and error.line is not None and error.line >= 5


def test_duplicate_key(tmp_path: Path) -> None:
    text = "arch: a\ndataset: b\nlayers:\n  - processors: 1\n    pad: 1\n    pad: 2\n"
    error = error_of(tmp_path, text)
    assert (error.line, error.key) == (6, "pad")
    assert error.message == "appears twice in one layer (first on line 5)"


def test_two_aliases_of_one_key(tmp_path: Path) -> None:
    text = "arch: a\ndataset: b\nlayers:\n  - processors: 1\n    op: conv2d\n    operation: mlp\n"
    error = error_of(tmp_path, text)
    assert (error.line, error.key) == (6, "operation")
    assert error.message == "means the same as `op` on line 5; give only one of them"


def test_missing_placement_is_left_to_the_planner(tmp_path: Path) -> None:
    path = tmp_path / "net.yaml"
    path.write_text("arch: a\ndataset: b\nlayers:\n  - pad: 1\n")
    layer = load_spec(path).layers[0]
    assert (layer.processors, layer.output_processors, layer.in_offset, layer.out_offset) == (
        None,
        None,
        None,
        None,
    )


def test_unknown_layer_name(tmp_path: Path) -> None:
    text = (
        "arch: a\ndataset: b\nlayers:\n  - processors: 1\n    name: expand_1x1\n"
        "  - processors: 1\n    in_sequences: [expand_1x2]\n"
    )
    error = error_of(tmp_path, text)
    assert (error.line, error.layer, error.key) == (7, 1, "in_sequences")
    assert error.message == (
        "`expand_1x2` is not the name of any layer. Did you mean `expand_1x1`?"
    )


def test_duplicate_names_and_sequences(tmp_path: Path) -> None:
    text = (
        "arch: a\ndataset: b\nlayers:\n  - processors: 1\n    name: x\n"
        "  - processors: 1\n    name: X\n    sequence: 0\n"
    )
    with pytest.raises(MultipleErrors) as info:
        load_spec(write(tmp_path, text))
    messages = [e.message for e in info.value.errors]
    assert messages == [
        "`X` is already the name of another layer",
        "layer sequence 0 is already used by the layer on line 4",
    ]


def test_all_errors_of_a_file_are_reported_together_in_line_order(tmp_path: Path) -> None:
    text = """\
arch: a
datset: b
layers:
  - processors: 0x1
    activate: sigmoid
    pading: 1
  - processors: 1
    quantization: 16
"""
    with pytest.raises(MultipleErrors) as info:
        load_spec(write(tmp_path, text))
    errors = info.value.errors
    assert [(e.line, e.key) for e in errors] == [
        (1, "dataset"),
        (2, "datset"),
        (5, "activate"),
        (6, "pading"),
        (8, "quantization"),
    ]
    rendered = str(info.value)
    assert rendered.startswith("5 problems found:\n")
    assert f"{errors[1].file}:2: `datset`: unknown top-level key. Did you mean" in rendered
    assert "layer 0: `pading`: unknown layer key. Did you mean `pad`?" in rendered
    assert "layer 1: `quantization`: must be 1, 2, 4, 8 or binary, not `16`." in rendered


def test_unload_and_data_buffer_errors(tmp_path: Path) -> None:
    text = """\
arch: a
dataset: b
unload:
  - processors: 1
    dims: 4
data_buffer:
  - processors: 1
    dim: 4
    channels: 2
    offset: 0
layers:
  - processors: 1
"""
    with pytest.raises(MultipleErrors) as info:
        load_spec(write(tmp_path, text))
    rendered = [e.render() for e in info.value.errors]
    assert any("`unload[0].dims`: unknown unload key. Did you mean `dim`?" in r for r in rendered)
    assert any("`unload[0].channels`: is missing" in r for r in rendered)
    assert any("`data_buffer[0].name`: is missing; a data buffer needs" in r for r in rendered)
