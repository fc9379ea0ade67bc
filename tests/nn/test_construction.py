"""Layers the device cannot run are refused when built, with one clear message."""

from __future__ import annotations

import pytest
import torch

import edgesynth.nn as enn
from edgesynth.errors import EdgesynthError

VENDOR_MODULES = [
    "Conv2d",
    "FusedConv2dReLU",
    "FusedConv2dAbs",
    "MaxPool2d",
    "FusedMaxPoolConv2d",
    "FusedMaxPoolConv2dReLU",
    "FusedMaxPoolConv2dAbs",
    "AvgPool2d",
    "FusedAvgPoolConv2d",
    "FusedAvgPoolConv2dReLU",
    "FusedAvgPoolConv2dAbs",
    "ConvTranspose2d",
    "FusedConvTranspose2dReLU",
    "FusedConvTranspose2dAbs",
    "FusedMaxPoolConvTranspose2d",
    "FusedMaxPoolConvTranspose2dReLU",
    "FusedMaxPoolConvTranspose2dAbs",
    "FusedAvgPoolConvTranspose2d",
    "FusedAvgPoolConvTranspose2dReLU",
    "FusedAvgPoolConvTranspose2dAbs",
    "Linear",
    "FusedLinearReLU",
    "FusedLinearAbs",
    "Conv1d",
    "FusedConv1dReLU",
    "FusedConv1dAbs",
    "MaxPool1d",
    "FusedMaxPoolConv1d",
    "FusedMaxPoolConv1dReLU",
    "FusedMaxPoolConv1dAbs",
    "AvgPool1d",
    "FusedAvgPoolConv1d",
    "FusedAvgPoolConv1dReLU",
    "FusedAvgPoolConv1dAbs",
    "Add",
    "Sub",
    "Or",
    "Xor",
    "FusedConv2dBNReLU",
    "FusedMaxPoolConv2dBNReLU",
    "FusedAvgPoolConv2dBNReLU",
    "FusedConv1dBNReLU",
    "FusedMaxPoolConv1dBNReLU",
]


@pytest.mark.parametrize("name", VENDOR_MODULES)
def test_every_predefined_module_exists(name: str) -> None:
    assert isinstance(getattr(enn, name), type)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: enn.Conv2d(3, 8, 5), "`kernel_size`=5 must be one of 1, 3"),
        (lambda: enn.Conv2d(3, 8, 3, padding=3), "`padding`=3 must be 0..2"),
        (lambda: enn.Conv2d(3, 8, 3, stride=2), "`stride`=2 must be 1..1"),
        (lambda: enn.Conv2d(3, 8, 3, dilation=2), "`dilation`=2 must be 1..1"),
        (lambda: enn.Conv2d(3, 8, 3, groups=3), "depthwise convolution is not supported"),
        (lambda: enn.Conv2d(3, 2000, 3), "`out_channels`=2000 must be 1..1024"),
        (lambda: enn.FusedMaxPoolConv2d(3, 8, 3, pool_size=17), "`pool_size`=17 must be 1..16"),
        (lambda: enn.Conv1d(3, 8, 10), "`kernel_size`=10 must be 1..9"),
        (lambda: enn.Conv1d(3, 8, 4, dilation=3), "`dilation`=3 needs `kernel_size` <= 3"),
        (lambda: enn.Conv1d(3, 8, 3, dilation=5, padding=1), "`dilation`=5 needs `padding` <= 0"),
        (lambda: enn.ConvTranspose2d(3, 8, 3, stride=1), "`stride`=1 must be one of 2"),
        (lambda: enn.ConvTranspose2d(3, 8, 1), "`kernel_size`=1 must be one of 3"),
        (lambda: enn.Linear(1025, 10), "`in_features`=1025 must be 1..1024"),
        (lambda: enn.Linear(10, 10, wide=True, activation="ReLU"), "`wide`=True output"),
        (lambda: enn.Conv2d(3, 8, 3, weight_bits=3), "`weight_bits`=3 must be one of 1, 2, 4, 8"),
        (lambda: enn.FusedConv2dBNReLU(3, 8, 3, bias=False), "`batchnorm` needs `bias`=True"),
        (lambda: enn.MaxPool2d(2, dilation=2), "`pool_dilation`=2 must be 1..1"),
        (lambda: enn.FusedConv2dReLU(3, 8, 3, activation="abs"), "fixes `activation`"),
        (lambda: enn.Conv2d(3, 8, 3, activation="gelu"), "`activation`='gelu' must be one of"),
        (lambda: enn.Add(operands=17), "`operands`=17 must be 2..16"),
    ],
)
def test_refused_at_construction(build, message: str) -> None:
    with pytest.raises(EdgesynthError) as err:
        build()
    assert message in str(err.value)
    assert (
        "cannot run on MAX78000" in str(err.value)
        or "must be one of" in str(err.value)
        or "fixes" in str(err.value)
    )


def test_max78002_allows_what_max78000_refuses() -> None:
    with enn.use("MAX78002"):
        enn.Conv2d(8, 8, 3, groups=8)
        enn.MaxPool2d(2, dilation=2)
        enn.Conv1d(8, 8, 3, dilation=2000)
    with pytest.raises(EdgesynthError, match=r"`dilation`=2000 must be 1\.\.1023"):
        enn.Conv1d(8, 8, 3, dilation=2000)


def test_padded_conv1d_with_many_channels_only_on_max78000() -> None:
    enn.Conv1d(100, 8, 3, padding=1)
    with enn.use("MAX78002"), pytest.raises(EdgesynthError, match="`padding` must be 0"):
        enn.Conv1d(100, 8, 3, padding=1)


def test_device_setting_is_restored() -> None:
    before = enn.current()
    with enn.use("MAX78002", simulate=True, avg_pool_rounding=True) as s:
        assert (s.name, s.simulate, s.avg_pool_rounding) == ("MAX78002", True, True)
    assert enn.current() == before
    with pytest.raises(EdgesynthError, match="unknown device"):
        enn.set_device("MAX78001")


def test_state_buffers_use_the_vendor_names() -> None:
    layer = enn.FusedMaxPoolConv2dBNReLU(3, 8, 3, batchnorm="NoAffine")
    keys = list(layer.state_dict())
    assert keys[:6] == [
        "output_shift",
        "weight_bits",
        "bias_bits",
        "quantize_activation",
        "adjust_output_shift",
        "shift_quantile",
    ]
    assert "op.weight" in keys and "op.bias" in keys and "bn.running_mean" in keys


def test_float_mode_clamps_like_the_chip() -> None:
    layer = enn.FusedConv2dReLU(1, 1, 1, bias=False)
    layer.op.weight.data.fill_(4.0)
    x = torch.tensor([[[[0.5, -0.5, 0.1]]]])
    y = layer(x)
    torch.testing.assert_close(y, torch.tensor([[[[127 / 128, 0.0, 0.4]]]]))


def test_8bit_mode_needs_quantized_weights() -> None:
    layer = enn.Conv2d(1, 1, 1)
    with enn.use(simulate=True), pytest.raises(EdgesynthError, match="float weights"):
        layer(torch.zeros(1, 1, 2, 2, dtype=torch.float64))
