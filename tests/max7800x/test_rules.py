"""Device rules for MAX78000/MAX78002: each rule on a hand-made network, then the corpus."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.targets.max7800x import rules
from edgesynth.targets.max7800x.description.network import Layer, Network
from edgesynth.targets.max7800x.description.spec import LayerSpec, NetworkSpec
from edgesynth.targets.max7800x.device import MAX78000, MAX78002, Device, get_device
from edgesynth.targets.max7800x.rules import RuleOptions

# Every YAML key of a test layer sits on its own line: layer line + offset.
KEYS = (
    "processors",
    "output_processors",
    "out_offset",
    "in_offset",
    "operation",
    "kernel_size",
    "pad",
    "stride",
    "dilation",
    "groups",
    "max_pool",
    "avg_pool",
    "pool_stride",
    "pool_dilation",
    "activation",
    "output_width",
    "data_format",
    "streaming",
    "flatten",
    "operands",
    "eltwise",
    "pool_first",
    "quantization",
    "output_shift",
    "calcx4",
    "readahead",
    "next_sequence",
    "in_sequences",
    "output_padding",
    "read_gap",
    "write_gap",
    "bias_group",
    "in_channels",
    "out_channels",
)
LAYER_STRIDE = 40
PATH = "net.yaml"


def line_of(index: int, key: str | None = None) -> int:
    base = 3 + LAYER_STRIDE * index
    return base if key is None else base + 1 + KEYS.index(key)


def make_layer(
    index: int = 0, *, name: str | None = None, spec: dict | None = None, **values
) -> Layer:
    """A conv2d 3x3 pad 1 layer, 4 -> 4 channels, 8x8, processors 0xf, unless told otherwise."""
    lines = {key: line_of(index, key) for key in KEYS}
    layer_spec = LayerSpec(index=index, line=line_of(index), lines=lines, name=name, **(spec or {}))
    defaults: dict = dict(
        operation="conv2d",
        kernel_size=(3, 3),
        pad=(1, 1),
        in_channels=4,
        out_channels=4,
        in_dim=(8, 8),
        pooled_dim=(8, 8),
        out_dim=(8, 8),
        processors=0xF,
        out_offset=0,
        quantization=8,
        output_shift=0,
    )
    defaults.update(values)
    if defaults["operation"] == "conv1d":
        defaults.setdefault("kernel_size", (3, 1))
    layer = Layer(index=index, spec=layer_spec, **defaults)
    if layer.operation != "none" and layer.weights is None:
        layer.weights = np.zeros((layer.out_channels, 1, 1, 1), dtype=np.int64)
    return layer


def make_net(
    *layers: Layer, device: Device = MAX78000, input_channels: int | None = None, **spec_values
) -> Network:
    """Layers run in order; each one's `next_sequence` is the next (-1 for the last)."""
    layers_list = list(layers)
    for i, layer in enumerate(layers_list):
        if layer.next_sequence is None:
            layer.next_sequence = i + 1 if i + 1 < len(layers_list) else -1
    order, i = [], 0
    while i != -1 and i < len(layers_list) and i not in order:
        order.append(i)
        i = layers_list[i].next_sequence
    spec = NetworkSpec(
        path=PATH,
        layers=[x.spec for x in layers_list],
        lines={"snoop": 2, "output_map": 1},
        **spec_values,
    )
    first = layers_list[0]
    channels = input_channels or first.in_channels * first.operands
    return Network(
        spec=spec,
        device=device.name,
        layers=layers_list,
        input_shape=(channels, *first.in_dim),
        order=order,
        output_layer=order[-1],
    )


def violations(net: Network, device: Device = MAX78000, **options) -> list[EdgesynthError]:
    return rules.find_violations(net, device, RuleOptions(**options))


def only(net: Network, device: Device = MAX78000, **options) -> EdgesynthError:
    found = violations(net, device, **options)
    assert len(found) == 1, "\n".join(e.render() for e in found)
    return found[0]


def assert_names(err: EdgesynthError, layer: int | None, key: str | None, *parts: str) -> None:
    """The error points at the file, line, layer and key, and its message has every part."""
    assert err.file == PATH
    assert err.layer == layer
    assert err.key == key
    if layer is not None:
        assert err.line == line_of(layer, key if key in KEYS else None)
    for part in parts:
        assert part in err.message, f"{part!r} not in: {err.message}"


# ------------------------------------------------------------------------------------------------
# Entry points


@pytest.mark.parametrize("device", [MAX78000, MAX78002])
def test_a_valid_network_passes(device: Device) -> None:
    net = make_net(
        make_layer(0, in_channels=3, processors=0x7, out_channels=16, out_offset=0x2000),
        make_layer(
            1,
            in_channels=16,
            processors=0xFFFF,
            out_channels=10,
            pool=(2, 2),
            pool_type="max",
            pool_stride=(2, 2),
            pooled_dim=(4, 4),
            out_dim=(4, 4),
        ),
        device=device,
    )
    assert violations(net, device) == []
    rules.check_network(net, device)  # does not raise


def test_one_violation_raises_it_several_raise_them_together() -> None:
    one = make_net(make_layer(0, out_offset=0x7FF0))
    with pytest.raises(EdgesynthError) as caught:
        rules.check_network(one, MAX78000)
    assert not isinstance(caught.value, MultipleErrors)
    assert caught.value.key == "out_offset"
    assert caught.value.render().startswith(f"{PATH}:{line_of(0, 'out_offset')}: layer 0: ")

    two = make_net(make_layer(0, out_offset=0x7FF0, dilation=(2, 2), name="conv1"))
    with pytest.raises(MultipleErrors) as caught_many:
        rules.check_network(two, MAX78000)
    keys = {e.key for e in caught_many.value.errors}
    assert keys == {"out_offset", "dilation"}
    assert "2 problems found" in caught_many.value.render()
    assert "layer 0 (conv1)" in caught_many.value.render()


def test_the_rules_read_the_rules_group_of_the_typed_options() -> None:
    from edgesynth.targets.max7800x.options import Max7800xOptions

    net = make_net(make_layer(0, in_channels=3, processors=0x7, streaming=True, out_offset=0x2000))
    options = Max7800xOptions.for_device(MAX78000, rules=RuleOptions(fifo=True))
    assert rules.find_violations(net, MAX78000, options.rules) == []
    # without --fifo the streaming first layer is refused
    err = only(net)
    assert_names(err, 0, "streaming", "--fifo")


# ------------------------------------------------------------------------------------------------
# Derived quantities


def test_passes_and_processors_per_pass() -> None:
    dev = get_device("MAX78000")
    procs, shared = dev.processors, dev.processors_sharing_memory
    assert rules.passes(3, procs) == 1
    assert rules.passes(64, procs) == 1
    assert rules.passes(65, procs) == 2
    assert rules.passes(1024, procs) == 16
    assert rules.processors_per_pass(3, procs, shared) == 3
    assert rules.processors_per_pass(64, procs, shared) == 64
    # 2 passes of 50, rounded up to whole instances
    assert rules.processors_per_pass(100, procs, shared) == 52
    assert rules.processors_per_pass(128, procs, shared) == 64
    # 3 passes of 44 (43.3 rounded to 4s)
    assert rules.processors_per_pass(130, procs, shared) == 44
    assert rules.processors_per_pass(8, 4, shared) == 4


def test_memory_sizes_per_instance() -> None:
    layer = make_layer(0, out_channels=16, out_dim=(32, 32), in_dim=(32, 32), in_channels=64)
    # HWC: one 32-bit word per pixel holds 4 channels; an instance serves 4 processors
    assert rules.output_words_per_instance(layer, MAX78000) == 1024
    assert rules.output_bytes(layer, MAX78000) == 4096
    wide = make_layer(0, out_channels=10, out_dim=(1, 1), output_width=32)
    assert rules.output_bytes(wide, MAX78000) == 16
    multipass = make_layer(0, out_channels=128, out_dim=(4, 4))
    assert rules.output_words_per_instance(multipass, MAX78000) == 32
    chw = make_layer(0, in_channels=3, in_dim=(128, 128), data_format="CHW")
    assert rules.input_bytes(chw, 64) == 16384  # 4 pixels per word, one channel per instance
    assert rules.input_words_per_instance(chw, 64) == 4096
    eltwise = make_layer(0, operation="none", operands=2, in_channels=4, in_dim=(12, 12))
    assert rules.input_bytes(eltwise, 64) == 12 * 12 * 4 * 2


@pytest.mark.parametrize(
    ("values", "output_map", "words"),
    [
        # the vendor's kernel lengths for its cifar-10 demo network
        (dict(in_channels=3, out_channels=64), 0xFFFFFFFFFFFFFFFF, 64),
        (dict(in_channels=64, out_channels=32, kernel_size=(1, 1), pad=(0, 0)), 0xFFFFFFFF, 4),
        (
            dict(in_channels=128, out_channels=128, kernel_size=(1, 1), pad=(0, 0)),
            0xFFFFFFFFFFFFFFFF,
            29,
        ),
        (
            dict(
                operation="linear",
                kernel_size=(1, 1),
                pad=(0, 0),
                in_channels=128,
                out_channels=10,
                flatten=True,
                pooled_dim=(2, 2),
            ),
            0x3FF,
            9,
        ),
        (dict(in_channels=64, out_channels=64, quantization=2), 0xFFFFFFFFFFFFFFFF, 16),
    ],
)
def test_kernel_words(values: dict, output_map: int, words: int) -> None:
    assert rules.kernel_words(make_layer(0, **values), output_map, 64, 4) == words


def test_bias_bytes() -> None:
    layer = make_layer(0, out_channels=10, bias=np.ones(10, dtype=np.int64))
    assert rules.bias_bytes(layer, 0x3FF, MAX78000, 64) == 10
    assert rules.bias_bytes(layer, 0x3FF << 2, MAX78000, 64) == 12  # output starts mid-instance
    layer.bias = np.zeros(10, dtype=np.int64)
    assert rules.bias_bytes(layer, 0x3FF, MAX78000, 64) == 0  # all-zero bias is not stored


# ------------------------------------------------------------------------------------------------
# Data memory


def test_out_offset_range() -> None:
    net = make_net(make_layer(0, out_offset=0xC0000))
    found = violations(net)
    err = next(e for e in found if "outside" in e.message)
    assert_names(err, 0, "out_offset", "0xc0000", "0x0000 to 0x1ffff", "MAX78000")
    assert violations(make_net(make_layer(0, out_offset=0x1F000)), MAX78000) != []  # too full
    err2 = next(
        e
        for e in violations(make_net(make_layer(0, out_offset=0x60000), device=MAX78002), MAX78002)
        if "outside" in e.message
    )
    assert "0x0000 to 0x4ffff" in err2.message


def test_spec_only_rules_run_before_building() -> None:
    spec = NetworkSpec(
        path=PATH,
        layers=[
            LayerSpec(index=0, line=5, lines={"out_offset": 7}, out_offset=0xC0000),
            LayerSpec(index=1, line=9, lines={"in_offset": 11}, in_offset=0x8000),
        ],
    )
    (err,) = rules.spec_violations(spec, MAX78000)
    assert (err.line, err.layer, err.key) == (7, 0, "out_offset")
    assert "0x1ffff" in err.message
    with pytest.raises(EdgesynthError):
        rules.check_spec(spec, MAX78000)
    too_long = NetworkSpec(path=PATH, layers=[LayerSpec(index=i, line=i) for i in range(33)])
    (err,) = rules.spec_violations(too_long, MAX78000)
    assert err.layer == 32 and "33 layers" in err.message and "at most 32" in err.message
    assert rules.spec_violations(too_long, MAX78002) == []


def test_output_must_fit_one_data_memory_instance() -> None:
    layer = make_layer(
        0,
        in_channels=64,
        processors=0xFFFFFFFFFFFFFFFF,
        out_channels=16,
        in_dim=(32, 32),
        pooled_dim=(32, 32),
        out_dim=(32, 32),
        out_offset=0x8000,
        name="conv3",
    )
    err = only(make_net(layer))
    assert_names(
        err,
        0,
        "out_offset",
        "0x8000",
        "16-channel 32x32 output",
        "4 channels per 32-bit word",
        "4,096 bytes (1,024 words) per memory instance",
        "ends at 0x9000",
        "32,768-byte (8,192-word) data-memory instance of the MAX78000",
        "lower `out_offset` to at most 0x7000",
    )
    assert err.render().startswith(f"{PATH}:{line_of(0, 'out_offset')}: layer 0 (conv3): ")
    # the MAX78002's instances hold 80 KiB
    assert violations(make_net(layer, device=MAX78002), MAX78002) == []


def test_output_too_large_for_any_offset() -> None:
    layer = make_layer(
        0,
        in_channels=3,
        processors=0x0000000100010001,
        data_format="CHW",
        out_channels=16,
        in_dim=(128, 128),
        pooled_dim=(128, 128),
        out_dim=(128, 128),
    )
    err = only(make_net(layer))
    assert_names(err, 0, "out_offset", "65,536 bytes", "the output alone is too large")


def test_wide_and_multipass_output_sizes() -> None:
    wide = make_layer(
        0, out_channels=16, out_dim=(8, 8), output_width=32, activation=None, out_offset=0x7F00
    )
    err = only(make_net(wide))
    assert_names(err, 0, "out_offset", "32-bit output, one channel per word", "1,024 bytes")
    multipass = make_layer(
        0, in_channels=4, out_channels=128, out_offset=0x7F00, output_processors=(1 << 64) - 1
    )
    err = only(make_net(multipass))
    assert_names(err, 0, "out_offset", "x 2 passes", "512 bytes")


def test_input_must_fit_one_data_memory_instance() -> None:
    layer = make_layer(
        0,
        in_channels=1,
        processors=0x1,
        data_format="CHW",
        in_dim=(200, 200),
        pooled_dim=(100, 100),
        pool=(2, 2),
        pool_stride=(2, 2),
        pool_type="max",
        out_dim=(100, 100),
        out_offset=0,
    )
    found = violations(make_net(layer))
    err = next(e for e in found if e.key == "in_offset")
    assert_names(
        err,
        0,
        "in_offset",
        "200x200 input",
        "CHW, one channel per memory instance",
        "40,000 bytes",
        "the input alone is too large",
        "`streaming`",
    )
    # a streaming layer keeps only a window of its input
    layer.streaming = True
    assert all(e.key != "in_offset" for e in violations(make_net(layer), fifo=True))


def test_in_offset_defaults_to_the_previous_out_offset() -> None:
    first = make_layer(
        0,
        in_channels=4,
        out_channels=64,
        out_offset=0x7E00,
        output_processors=(1 << 64) - 1,
        in_dim=(16, 16),
        pooled_dim=(16, 16),
        out_dim=(16, 16),
    )
    second = make_layer(
        1,
        in_channels=64,
        processors=(1 << 64) - 1,
        in_dim=(16, 16),
        pooled_dim=(16, 16),
        out_dim=(16, 16),
        out_offset=0,
    )
    found = violations(make_net(first, second))
    keys = {(e.layer, e.key) for e in found}
    assert (0, "out_offset") in keys  # 0x7e00 + 256 words runs past 0x8000
    assert (1, "in_offset") in keys  # ... and so does the next layer's input
    in_err = next(e for e in found if e.key == "in_offset")
    assert "from `in_offset` 0x7e00" in in_err.message


# ------------------------------------------------------------------------------------------------
# Processors


def test_processor_map_must_match_the_channel_count() -> None:
    layer = make_layer(
        0,
        operation="none",
        eltwise="add",
        operands=2,
        kernel_size=(1, 1),
        pad=(0, 0),
        in_channels=4,
        out_channels=4,
        processors=(1 << 64) - 1,
        output_processors=0xF,
    )
    found = violations(make_net(layer))
    err = next(e for e in found if e.key == "processors")
    assert_names(
        err,
        0,
        "processors",
        "0xffffffffffffffff enables 64 processors",
        "4 input channels per operand",
        "need exactly 4",
        "0x000000000000000f",
    )


def test_processor_map_multipass() -> None:
    layer = make_layer(0, in_channels=100, processors=0xFFFF, output_processors=0xF)
    err = only(make_net(layer))
    assert_names(
        err,
        0,
        "processors",
        "enables 16 processors",
        "100 input channels",
        "need exactly 52",
        "52 processors per pass, 2 passes",
    )


def test_default_output_map_is_the_next_layers_processors() -> None:
    first = make_layer(0, in_channels=3, processors=0x7, out_channels=16)
    second = make_layer(1, in_channels=16, processors=0x0007FFF000000000, out_channels=4)
    err = only(make_net(first, second))
    assert_names(
        err,
        1,
        "processors",
        "0x0007fff000000000 enables 15 processors",
        "16 input channels need exactly 16",
        "0x000ffff000000000",
        "receives the output of layer 0 (16 output channels)",
    )


def test_output_processors_must_match_the_output_channels() -> None:
    layer = make_layer(0, out_channels=16, output_processors=0x0007FFF000000000)
    err = only(make_net(layer))
    assert_names(
        err,
        0,
        "output_processors",
        "0x0007fff000000000",
        "15 processors",
        "16 output channels need exactly 16",
    )


def test_global_output_map_of_the_final_layer() -> None:
    net = make_net(make_layer(0, out_channels=10), output_map=0xFF)
    err = only(net)
    assert err.key == "output_map" and err.line == 1
    assert "the global `output_map`" in err.message and "10 output channels" in err.message


def test_passthrough_output_processors_must_be_packed() -> None:
    layer = make_layer(
        0,
        operation="none",
        kernel_size=(1, 1),
        pad=(0, 0),
        in_channels=4,
        out_channels=4,
        processors=0x11111,
        output_processors=0x11111,
        in_dim=(17, 23),
        pool=(2, 2),
        pool_stride=(2, 2),
        pool_type="max",
        pooled_dim=(8, 11),
        out_dim=(8, 11),
    )
    found = violations(make_net(layer))
    err = next(e for e in found if e.key == "output_processors" and "passthrough" in e.message)
    assert_names(
        err,
        0,
        "output_processors",
        "0x0000000000011111",
        "consecutive processors of the same quadrant",
        "0x000000000001000f",
    )


def test_chw_input_needs_one_processor_per_memory_instance() -> None:
    layer = make_layer(0, in_channels=3, processors=0x7, data_format="CHW")
    err = only(make_net(layer))
    assert_names(err, 0, "processors", "processors 0-3", "CHW", "0x0000000000000111")
    second = make_layer(1, data_format="CHW")
    err = next(e for e in violations(make_net(make_layer(0), second)) if e.layer == 1)
    assert_names(err, 1, "data_format", "only the first layer")


def test_quadrant_zero_must_be_used() -> None:
    layer = make_layer(0, processors=0xF << 16, output_processors=0xF << 16)
    err = only(make_net(layer))
    assert_names(err, 0, "processors", "quadrant 0")


def test_bias_group_must_name_a_used_quadrant() -> None:
    layer = make_layer(0, bias_group=2)
    err = only(make_net(layer))
    assert_names(err, 0, "bias_group", "quadrant 2", "[0]")
    assert violations(make_net(make_layer(0, bias_group=2)), ignore_bias_groups=True) == []


# ------------------------------------------------------------------------------------------------
# Operators


@pytest.mark.parametrize("device", [MAX78000, MAX78002])
def test_dilation_is_for_conv1d_only(device: Device) -> None:
    err = only(make_net(make_layer(0, dilation=(2, 2)), device=device), device)
    assert_names(err, 0, "dilation", "2 on Conv2d", "Conv1d only", "`dilation: 1`")


def test_conv1d_dilation_limits() -> None:
    def conv1d(**values) -> Layer:
        base = dict(
            operation="conv1d",
            kernel_size=(3, 1),
            pad=(0, 0),
            in_dim=(100, 1),
            pooled_dim=(100, 1),
            out_dim=(90, 1),
            out_offset=0x100,
        )
        base.update(values)
        return make_layer(0, **base)

    assert violations(make_net(conv1d(dilation=(4, 1)))) == []  # span 9 -> 3x3 hardware
    err = only(make_net(conv1d(kernel_size=(5, 1), dilation=(3, 1))))
    assert_names(
        err, 0, "dilation", "kernel length 5", "spans 13 samples", "kernel length of at most 3"
    )
    err = only(make_net(conv1d(dilation=(5, 1), pad=(1, 0))))
    assert_names(err, 0, "pad", "must be 0", "dilation 5")
    err = only(make_net(conv1d(dilation=(5, 1), out_offset=0)))
    assert_names(err, 0, "out_offset", "at least 0x0014")
    err = only(make_net(conv1d(kernel_size=(1, 1), dilation=(2, 1))))
    assert_names(err, 0, "dilation", "length of 2 or more")


def test_groups() -> None:
    dw = make_layer(0, groups=4)
    err = only(make_net(dw))
    assert_names(err, 0, "groups", "4: grouped and depthwise", "not supported on the MAX78000")
    assert violations(make_net(make_layer(0, groups=4), device=MAX78002), MAX78002) == []
    err = only(make_net(make_layer(0, groups=2), device=MAX78002), MAX78002)
    assert_names(err, 0, "groups", "groups = input channels = output channels")
    err = only(make_net(make_layer(0, groups=3), device=MAX78002), MAX78002)
    assert_names(err, 0, "groups", "does not divide the 4 input channels")


@pytest.mark.parametrize(
    ("values", "parts"),
    [
        (dict(kernel_size=(2, 2)), ("2x2 is not a Conv2d kernel size", "1x1 or 3x3")),
        (
            dict(
                operation="conv1d",
                kernel_size=(10, 1),
                pad=(0, 0),
                in_dim=(20, 1),
                pooled_dim=(20, 1),
                out_dim=(11, 1),
            ),
            ("10 is not a Conv1d", "1 to 9"),
        ),
        (
            dict(
                operation="convtranspose2d",
                kernel_size=(1, 1),
                pad=(0, 0),
                stride=(2, 2),
                output_padding=(1, 1),
            ),
            ("ConvTranspose2d", "3x3"),
        ),
    ],
)
def test_kernel_sizes(values: dict, parts: tuple[str, ...]) -> None:
    err = only(make_net(make_layer(0, **values)))
    assert_names(err, 0, "kernel_size", *parts)


def test_padding() -> None:
    err = only(make_net(make_layer(0, pad=(3, 3), out_dim=(12, 12))))
    assert_names(err, 0, "pad", "3 is more padding", "0 to 2")
    err = only(make_net(make_layer(0, kernel_size=(1, 1), pad=(1, 1), out_dim=(10, 10))))
    assert_names(err, 0, "pad", "not smaller than the 1x1 kernel", "`pad: 0`")
    err = only(make_net(make_layer(0, operation="none", kernel_size=(1, 1), pad=(1, 1))))
    assert_names(err, 0, "pad", "cannot pad")


def test_transposed_convolution() -> None:
    good = dict(operation="convtranspose2d", stride=(2, 2), output_padding=(1, 1), out_dim=(16, 16))
    assert violations(make_net(make_layer(0, **good))) == []
    err = only(make_net(make_layer(0, **{**good, "output_padding": (0, 0)})))
    assert_names(err, 0, "output_padding", "fixed to 1")
    err = only(make_net(make_layer(0, output_padding=(1, 1))))
    assert_names(err, 0, "output_padding", "only for ConvTranspose2d")


def test_stride() -> None:
    err = only(make_net(make_layer(0, stride=(2, 2), out_dim=(4, 4))))
    assert_names(err, 0, "stride", "stride 1 only", "`pool_stride`")


def test_pooling_limits() -> None:
    big = make_layer(
        0,
        pool=(17, 17),
        pool_stride=(1, 1),
        pool_type="avg",
        in_dim=(20, 20),
        pooled_dim=(4, 4),
        out_dim=(4, 4),
    )
    err = only(make_net(big))
    assert_names(err, 0, "avg_pool", "17x17", "at most 16")
    stride = make_layer(
        0,
        pool=(2, 2),
        pool_stride=(17, 17),
        pool_type="max",
        in_dim=(40, 40),
        pooled_dim=(2, 2),
        out_dim=(2, 2),
    )
    err = only(make_net(stride))
    assert_names(err, 0, "pool_stride", "1 to 16")
    dilated = make_layer(
        0,
        pool=(2, 2),
        pool_stride=(2, 2),
        pool_dilation=(2, 2),
        pool_type="max",
        pooled_dim=(3, 3),
        out_dim=(3, 3),
    )
    err = only(make_net(dilated))
    assert_names(err, 0, "pool_dilation", "pools without dilation", "needs the MAX78002")
    assert violations(make_net(dilated, device=MAX78002), MAX78002) == []
    unpooled = make_layer(0, pool_dilation=(2, 2))
    err = only(make_net(unpooled, device=MAX78002), MAX78002)
    assert_names(err, 0, "pool_dilation", "needs pooling")


def test_pooling_many_channels_needs_a_convolution_on_max78000() -> None:
    layer = make_layer(
        0,
        operation="none",
        kernel_size=(1, 1),
        pad=(0, 0),
        in_channels=128,
        out_channels=128,
        processors=(1 << 64) - 1,
        pool=(2, 2),
        pool_stride=(2, 2),
        pool_type="max",
        pooled_dim=(4, 4),
        out_dim=(4, 4),
    )
    err = only(make_net(layer))
    assert_names(err, 0, "max_pool", "128 channels (2 passes)", "MAX78000")
    assert violations(make_net(layer, device=MAX78002), MAX78002) == []


def test_flatten() -> None:
    layer = make_layer(
        0,
        operation="linear",
        kernel_size=(1, 1),
        pad=(0, 0),
        flatten=True,
        in_channels=4,
        in_dim=(17, 17),
        pooled_dim=(17, 17),
        out_dim=(1, 1),
        out_channels=10,
        output_processors=0x3FF,
    )
    err = only(make_net(layer))
    assert_names(err, 0, "flatten", "17x17 = 289 pixels", "at most 256")
    pooled = make_layer(
        0,
        operation="linear",
        kernel_size=(1, 1),
        pad=(0, 0),
        flatten=True,
        pool=(2, 2),
        pool_stride=(2, 2),
        pool_type="avg",
        pooled_dim=(4, 4),
        out_dim=(1, 1),
        out_channels=10,
        output_processors=0x3FF,
    )
    err = only(make_net(pooled))
    assert_names(err, 0, "flatten", "pooling")


@pytest.mark.parametrize(("channels", "wrong"), [(64, False), (65, True), (72, False), (100, True)])
def test_a_flattened_layer_needs_full_passes(channels: int, wrong: bool) -> None:
    """65 channels are read in passes of 36 and 36 - 7 (the vendor rounds a pass up to whole
    memory instances); the vendor's tool splits a flattened layer's weights in equal passes."""
    per_pass = channels if channels <= 64 else 4 * -(-channels // 8)
    layer = make_layer(
        0,
        operation="linear",
        kernel_size=(1, 1),
        pad=(0, 0),
        flatten=True,
        in_channels=channels,
        in_dim=(2, 2),
        pooled_dim=(2, 2),
        out_dim=(1, 1),
        out_channels=10,
        processors=(1 << per_pass) - 1,
        output_processors=0x3FF,
    )
    if not wrong:
        assert violations(make_net(layer)) == []
        return
    err = only(make_net(layer))
    assert_names(err, 0, "flatten", f"{channels} input channels in 2 passes of {per_pass}")
    assert "a multiple of 8 channels" in err.message and f"e.g. {2 * per_pass}" in err.message


def test_passthrough_restrictions() -> None:
    base = dict(operation="none", kernel_size=(1, 1), pad=(0, 0))
    err = only(make_net(make_layer(0, activation="relu", **base)))
    assert_names(err, 0, "activation", "relu", "cannot apply an activation")
    err = only(make_net(make_layer(0, output_shift=2, **base)))
    assert_names(err, 0, "output_shift", "cannot shift")


def test_output_width_32_has_no_activation_on_the_final_layer() -> None:
    err = only(make_net(make_layer(0, output_width=32, activation="relu", out_channels=4)))
    assert_names(err, 0, "output_width", "raw accumulator", "`activation: None`")
    ok = make_net(make_layer(0, output_width=32, activation=None))
    assert violations(ok) == []


def test_output_shift_range_depends_on_weight_bits() -> None:
    err = only(make_net(make_layer(0, output_shift=16)))
    assert_names(err, 0, "output_shift", "16", "[-15, +15]", "8-bit")
    err = only(make_net(make_layer(0, quantization=2, output_shift=-16)))
    assert_names(err, 0, "output_shift", "-22", "[-21, +9]", "2-bit weights already add 6")


def test_binary_weights_only_on_max78002() -> None:
    layer = make_layer(0, quantization=1, binary=True)
    err = only(make_net(layer))
    assert_names(err, 0, "quantization", "binary", "MAX78000")
    assert violations(make_net(layer, device=MAX78002), MAX78002) == []


def test_channel_limits() -> None:
    layer = make_layer(0, in_channels=1100, processors=(1 << 64) - 1, out_channels=4)
    found = violations(make_net(layer))
    err = next(e for e in found if e.key == "in_channels")
    assert_names(err, 0, "in_channels", "1,100 input channels", "at most 1,024")


# ------------------------------------------------------------------------------------------------
# Element-wise


def test_pool_after_eltwise() -> None:
    base = dict(operation="none", kernel_size=(1, 1), pad=(0, 0), eltwise="add", pool_first=False)
    err = only(make_net(make_layer(0, operands=2, **base)))
    assert_names(err, 0, "pool_first", "needs both pooling and an element-wise operation")
    pooled = dict(
        base, pool=(2, 2), pool_stride=(2, 2), pool_type="max", pooled_dim=(4, 4), out_dim=(4, 4)
    )
    err = only(make_net(make_layer(0, operands=3, **pooled)))
    assert_names(err, 0, "operands", "at most 2 inputs")
    assert violations(make_net(make_layer(0, operands=2, **pooled))) == []


def test_eltwise_with_conv1d() -> None:
    layer = make_layer(
        0,
        operation="conv1d",
        kernel_size=(3, 1),
        pad=(1, 0),
        eltwise="add",
        operands=2,
        in_dim=(16, 1),
        pooled_dim=(16, 1),
        out_dim=(16, 1),
    )
    err = only(make_net(layer))
    assert_names(err, 0, "eltwise", "Conv1d")


def test_multipass_eltwise_cannot_convolve_on_max78000() -> None:
    layer = make_layer(
        0,
        eltwise="add",
        operands=3,
        in_channels=128,
        out_channels=4,
        processors=(1 << 64) - 1,
        kernel_size=(1, 1),
        pad=(0, 0),
    )
    err = only(make_net(layer))
    assert_names(err, 0, "operation", "3-input element-wise", "128 channels (2 passes)")


def test_eltwise_conv_with_bias_on_max78002() -> None:
    layer = make_layer(0, eltwise="add", operands=2, bias=np.ones(4, dtype=np.int64))
    err = only(make_net(layer, device=MAX78002), MAX78002)
    assert_names(err, 0, "eltwise", "bias", "passthrough layer")
    assert (
        violations(
            make_net(make_layer(0, eltwise="add", operands=2, bias=np.ones(4, dtype=np.int64)))
        )
        == []
    )


def test_eltwise_inputs_must_share_the_output_map() -> None:
    a = make_layer(0, out_channels=4, output_processors=0xF)
    b = make_layer(1, out_channels=4, output_processors=0xF0, processors=0xF)
    c = make_layer(
        2,
        operation="none",
        kernel_size=(1, 1),
        pad=(0, 0),
        eltwise="add",
        operands=2,
        processors=0xF,
        in_sequences=[0, 1],
    )
    err = only(make_net(a, b, c))
    assert_names(err, 2, "in_sequences", "same output processors", "layer 1: 0x00000000000000f0")


# ------------------------------------------------------------------------------------------------
# Sequence, layer count, device features


def test_padded_multipass_conv1d_on_max78002() -> None:
    layer = make_layer(
        0,
        operation="conv1d",
        kernel_size=(3, 1),
        pad=(1, 0),
        in_channels=128,
        processors=(1 << 64) - 1,
        in_dim=(32, 1),
        pooled_dim=(32, 1),
        out_dim=(32, 1),
    )
    err = only(make_net(layer, device=MAX78002), MAX78002)
    assert_names(
        err, 0, "pad", "more than 64 input channels", "128 channels = 2 passes", "`pad: 0`"
    )
    assert violations(make_net(layer)) == []  # fine on MAX78000
    assert violations(make_net(layer, device=MAX78002), MAX78002, ignore_hw_limits=True) == []


def test_layer_count_on_max78000() -> None:
    layers = [make_layer(i) for i in range(33)]
    found = violations(make_net(*layers))
    assert len(found) == 1
    assert_names(found[0], 32, None, "33 layers", "at most 32")


def test_hidden_layers_count_on_max78002() -> None:
    """An average pool right after an element-wise layer costs a hidden hardware layer."""
    layers = [make_layer(i) for i in range(128)]
    for eltwise_at in (10, 20):
        layers[eltwise_at] = make_layer(
            eltwise_at, operation="none", kernel_size=(1, 1), pad=(0, 0), eltwise="add", operands=2
        )
        layers[eltwise_at + 1] = make_layer(
            eltwise_at + 1,
            operation="none",
            kernel_size=(1, 1),
            pad=(0, 0),
            pool=(2, 2),
            pool_stride=(2, 2),
            pool_type="avg",
            pooled_dim=(4, 4),
            out_dim=(4, 4),
        )
    err = only(make_net(*layers, device=MAX78002), MAX78002)
    assert_names(
        err, 127, None, "plus 2 hidden layer(s)", "needs 129 hardware layers", "MAX78002 has 128"
    )


def test_next_sequence_jumps_need_the_max78002() -> None:
    layers = [make_layer(0, next_sequence=2), make_layer(1), make_layer(2)]
    found = violations(make_net(*layers))
    err = next(e for e in found if e.key == "next_sequence")
    assert_names(err, 0, "next_sequence", "jumps to layer 2", "in order only")
    assert not any(
        e.key == "next_sequence"
        for e in violations(
            make_net(make_layer(0, next_sequence=2), make_layer(1), make_layer(2), device=MAX78002),
            MAX78002,
        )
    )


def test_calcx4_readahead_snoop_need_the_max78002() -> None:
    layer = make_layer(0, spec={"calcx4": True})
    err = only(make_net(layer))
    assert_names(err, 0, "calcx4", "not supported on the MAX78000")
    err = only(make_net(make_layer(0)), rd_ahead=True)
    assert err.layer is None and "`--read-ahead`" in err.message
    err = only(make_net(make_layer(0), snoop=[0] * 32))
    assert err.key == "snoop" and err.line == 2
    assert (
        violations(make_net(make_layer(0, spec={"calcx4": True}), device=MAX78002), MAX78002) == []
    )


def test_a_snoop_link_without_a_gating_unit_is_always_taken() -> None:
    """`snoop_sequence` sets the layer's link; only a unit with C1 bit 2 makes it conditional.
    Without one the accelerator always jumps, so the known answer must jump too."""

    def net(snoop: list[int] | None, sim_order: list[int] | None = None) -> Network:
        layers = [make_layer(i) for i in range(4)]
        layers[0].spec.snoop_sequence = 3
        n = make_net(*layers, device=MAX78002, **({"snoop": snoop} if snoop else {}))
        n.sim_order = sim_order or []
        return n

    err = only(net(None), MAX78002)
    assert_names(err, 0, "snoop_sequence", "always takes the link", "continues with layer 1")
    stopping = [0x200000, 0, 0, 0, 0, 0, 1 | 0x2 | 0x2 << 12, 0, *[0] * 24]  # stops, no gate
    assert_names(only(net(stopping), MAX78002), 0, "snoop_sequence", "no snoop unit gates")
    gating = [0x200000, 0, 0, 0, 0, 0, 1 | 0x4 | 0x2 << 12, 0, *[0] * 24]
    assert violations(net(gating), MAX78002) == []
    assert violations(net(None, [0, 3]), MAX78002) == []  # the known answer jumps too


def test_options_the_device_lacks() -> None:
    net = make_net(make_layer(0))
    for option, expected in (
        (dict(start_layer=1), "`--start-layer` is not supported"),
        (dict(link_layer=True), "`--link-layer`"),
        (dict(fifo_go=True), "`--fifo-go`"),
        (dict(one_shot=True), "`--one-shot`"),
        (dict(pll=True), "`--pll`"),
    ):
        messages = [
            e.message for e in rules.option_violations(net, MAX78000, RuleOptions(**option))
        ]
        assert any(expected in m for m in messages), (option, messages)
    assert rules.option_violations(net, MAX78002, RuleOptions(start_layer=1)) == []


# ------------------------------------------------------------------------------------------------
# FIFOs and streaming


def test_fifo_input_limits() -> None:
    many = make_layer(0, in_channels=17, processors=(1 << 17) - 1)
    found = violations(make_net(many), fifo=True)
    assert any(e.key == "in_channels" and "at most 4 (CHW) or 16 (HWC)" in e.message for e in found)
    assert any(e.key == "processors" and "0-3, 16-19, 32-35 and 48-51" in e.message for e in found)
    fast = make_layer(0, in_channels=8, processors=0x000F000F)
    found = violations(make_net(fast), fast_fifo=True, riscv=True)
    assert [e.key for e in found] == ["in_channels"]
    assert "fast FIFO takes 4 input channels (HWC)" in found[0].message
    found = violations(make_net(make_layer(0)), fast_fifo=True)
    assert [e.message for e in found] == ["`--fast-fifo` requires `--riscv`."]


def _streaming_cifar(device: Device) -> Network:
    """The vendor's streaming CIFAR test: layer 2 reuses layer 0's buffer in memory instance 0."""

    def conv(
        index: int,
        processors: int,
        in_ch: int,
        out_ch: int,
        dim: int,
        pool: int,
        out_offset: int,
        **values,
    ) -> Layer:
        pooled = dim // pool
        return make_layer(
            index,
            in_channels=in_ch,
            out_channels=out_ch,
            processors=processors,
            in_dim=(dim, dim),
            pooled_dim=(pooled, pooled),
            out_dim=(pooled, pooled),
            pool=(pool, pool),
            pool_stride=(pool, pool),
            pool_type="max" if pool > 1 else None,
            out_offset=out_offset,
            streaming=True,
            activation="relu",
            **values,
        )

    return make_net(
        conv(0, 0x7, 3, 60, 32, 1, 0x2000),
        conv(1, 0xFFFFFFFFFFFFFFF0, 60, 60, 32, 2, 0),
        conv(2, 0xFFFEFFFEFFFEFFFE, 60, 56, 16, 2, 0x2000),
        conv(3, 0x7FFE7FFE7FFE7FFE, 56, 12, 8, 2, 0, output_processors=0xFFF),
        device=device,
    )


@pytest.mark.parametrize(("device", "end"), [(MAX78000, 0x138), (MAX78002, 0xF4)])
def test_streaming_buffers_must_not_overlap(device: Device, end: int) -> None:
    net = _streaming_cifar(device)
    ctx = rules.Context(net, device, RuleOptions(fifo=True))
    buffers = rules.stream_buffers(ctx)
    assert (buffers[0].start, buffers[0].end) == (0, 8)
    assert (buffers[2].start, buffers[2].end) == (0, end)
    found = violations(net, device, fifo=True)
    first = found[0]
    assert_names(
        first,
        2,
        "in_offset",
        f"0x0000-0x{end:04x}",
        "0xfffefffefffefffe",
        "streaming layer 0 (0x0000-0x0008",
        "shared memory instance",
    )
    assert violations(net, device, fifo=True, overwrite_ok=True) == []


def test_streaming_sequence_rules() -> None:
    first = make_layer(0, in_channels=3, processors=0x7, out_offset=0x2000)
    second = make_layer(1, streaming=True, processors=0xF, out_offset=0)
    err = only(make_net(first, second), fifo=True)
    assert_names(err, 1, "streaming", "does not stream")
    # the final streaming layer must pad on MAX78000 (3x3 kernels)
    last = make_layer(
        0,
        in_channels=3,
        processors=0x7,
        streaming=True,
        pad=(0, 0),
        out_dim=(6, 6),
        out_offset=0x2000,
    )
    err = only(make_net(last), fifo=True)
    assert_names(err, 0, "pad", "last streaming layer must pad")
    assert violations(make_net(last, device=MAX78002), MAX78002, fifo=True) == []


def test_only_the_first_eight_layers_stream() -> None:
    layers = [
        make_layer(
            i,
            streaming=True,
            out_offset=0x4000 * (1 - i % 2),
            processors=0x7 if i == 0 else 0xF,
            in_channels=3 if i == 0 else 4,
        )
        for i in range(9)
    ]
    found = violations(make_net(*layers, device=MAX78002), MAX78002, fifo=True)
    err = next(e for e in found if e.key == "streaming")
    assert_names(err, 8, "streaming", "only the first 8 layers (0 to 7) can stream")


def test_streamed_1x1_convolutions_run_as_padded_3x3() -> None:
    layer = make_layer(
        0,
        in_channels=3,
        processors=0x7,
        streaming=True,
        kernel_size=(1, 1),
        pad=(0, 0),
        out_offset=0x2000,
    )
    assert violations(make_net(layer), fifo=True) == []
    ctx = rules.Context(make_net(layer), MAX78000, RuleOptions(fifo=True))
    assert rules.hw_kernel(ctx, layer) == (3, 3)
    assert rules.hw_padding(ctx, layer) == (1, 1)


def test_streaming_passthrough_on_max78002() -> None:
    first = make_layer(0, in_channels=3, processors=0x7, streaming=True, out_offset=0x2000)
    second = make_layer(
        1,
        operation="none",
        kernel_size=(1, 1),
        pad=(0, 0),
        streaming=True,
        processors=0xF,
        out_offset=0x4000,
    )
    found = violations(make_net(first, second, device=MAX78002), MAX78002, fifo=True)
    assert any(e.layer == 1 and "cannot stream" in e.message for e in found)


# ------------------------------------------------------------------------------------------------
# Kernel and bias memory


def test_kernel_memory_must_hold_every_layer() -> None:
    # 1,024 input channels = 16 passes x 64 kernels of 3x3: 1,024 kernel words per processor
    layer = make_layer(
        0,
        in_channels=1024,
        processors=(1 << 64) - 1,
        out_channels=64,
        output_processors=(1 << 64) - 1,
    )
    err = only(make_net(layer))
    assert_names(
        err, 0, "processors", "holds 768 kernel words", "need at least 1,024", "63 more processors"
    )
    assert violations(make_net(layer, device=MAX78002), MAX78002) == []
    # 4-bit weights halve the space
    layer.quantization = 4
    assert violations(make_net(layer)) == []


def test_kernel_memory_adds_up_over_layers() -> None:
    layers = [
        make_layer(
            i,
            in_channels=64,
            out_channels=64,
            processors=(1 << 64) - 1,
            output_processors=(1 << 64) - 1,
            out_offset=0x1000 * (i % 2),
        )
        for i in range(13)
    ]
    err = only(make_net(*layers))
    assert_names(err, 12, "processors", "need at least 832")


def test_bias_memory() -> None:
    layer = make_layer(
        0,
        in_channels=4,
        out_channels=600,
        output_processors=(1 << 64) - 1,
        out_dim=(1, 1),
        bias=np.ones(600, dtype=np.int64),
    )
    found = violations(make_net(layer))
    err = next(e for e in found if e.key == "out_channels")
    assert_names(err, 0, "out_channels", "600 bias values", "512 bytes")
    assert not any(
        e.key == "out_channels" for e in violations(make_net(layer, device=MAX78002), MAX78002)
    )


# ------------------------------------------------------------------------------------------------
# The reference corpus: every vendor case, built by the network builder


CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "cases"
CASES = sorted(p.parent for p in CORPUS.glob("*/*/case.json"))

# How a vendor refusal reads, and which YAML key and words our error for the same reason has.
REASONS = (
    ("Unsupported value for `out_offset`", "out_offset", "outside"),
    ("is supported for Conv1d only", "dilation", "Conv1d only"),
    ("Convolution groups", "groups", "not supported"),
    ("exceeds data memory instance size", "out_offset", "data-memory instance"),
    ("input channels using", "processors", "need exactly"),
    ("processor output map", "processors", "need exactly"),
    ("pass-through layer must be a packed", "output_processors", "consecutive processors"),
    ("padded Conv1d", "pad", "cannot pad a Conv1d"),
    ("Streaming buffer", "in_offset", "streaming input buffer"),
    ("`calcx4` is not supported", "calcx4", "not supported"),
)
NOT_DEVICE_RULES = ("do not match the weights file",)


def _case_id(case: Path) -> str:
    return f"{case.parent.name}/{case.name}"


def _corpus_violations(case: Path) -> tuple[dict, list[EdgesynthError]]:
    from edgesynth.targets.max7800x.commands.izer import core_options, job_from_options
    from edgesynth.targets.max7800x.commands.izer_args import parse_izer_args
    from edgesynth.targets.max7800x.description.yamlcfg import load_spec
    from edgesynth.targets.max7800x.pipeline import load_network

    info = json.loads((case / "case.json").read_text())
    opts = parse_izer_args([*info["args"], "--test-dir", "out", "--prefix", "p"])
    device = opts.device_spec
    cwd = os.getcwd()
    os.chdir(case)
    try:
        found = rules.spec_violations(load_spec(opts.config_file), device)
        if not found:
            net, _ = load_network(job_from_options(opts, case))
            found = rules.find_violations(net, device, core_options(opts).rules)
    finally:
        os.chdir(cwd)
    return info, found


def _refused_by_device_rule_or_ok(case: Path) -> bool:
    """Cases the vendor refuses for their weights file are the builder's, not the rules'."""
    info = json.loads((case / "case.json").read_text())
    return not any(s in info["vendor_error"] for s in NOT_DEVICE_RULES)


@pytest.mark.parametrize(
    "case", [c for c in CASES if _refused_by_device_rule_or_ok(c)], ids=_case_id
)
def test_corpus_case(case: Path) -> None:
    vendor = json.loads((case / "case.json").read_text())["vendor_error"]
    info, found = _corpus_violations(case)
    rendered = "\n".join(e.render() for e in found)
    if info["expect"] == "ok":
        assert found == [], rendered
        return
    reason = next((r for r in REASONS if r[0] in vendor), None)
    assert reason is not None, f"no known reason for the vendor's refusal: {vendor}"
    _, key, words = reason
    assert any(e.key == key and words in e.message for e in found), (
        f"vendor: {vendor}\nours:\n{rendered}"
    )


@pytest.mark.parametrize(
    ("device", "channels", "gap", "refused"),
    [
        (MAX78000, 4, 15, False),  # one pass: the step is the gap itself
        (MAX78000, 4, 16, True),
        (MAX78000, 256, 3, False),  # 4 passes x (3 + 1) - 1 = 15
        (MAX78000, 256, 4, True),  # 4 x 5 - 1 = 19
        (MAX78002, 256, 7, False),  # 31 fits 8 bits (the vendor's test-widegap)
        (MAX78002, 256, 64, True),  # 4 x 65 - 1 = 259
    ],
)
def test_write_gap_must_fit_the_write_pointer_step(
    device: Device, channels: int, gap: int, refused: bool
) -> None:
    out_map = (1 << min(channels, 64)) - 1
    layer = make_layer(0, out_channels=channels, write_gap=gap, output_processors=out_map)
    found = [e for e in violations(make_net(layer, device=device), device) if e.key == "write_gap"]
    assert bool(found) == refused, [e.render() for e in found]
    if refused:
        assert_names(
            found[0], 0, "write_gap", f"{gap}:", f"at most {2**device.write_ptr_increment_bits - 1}"
        )
