"""The fused layers of the vendor's "List of Predefined Modules", by their vendor names.

Each is its base layer with pooling, activation and (for the BN variants) batchnorm fixed;
`MaxPool2d`/`AvgPool2d`/`MaxPool1d`/`AvgPool1d` pool without a convolution.
"""

from __future__ import annotations

from typing import Any, ClassVar

from edgesynth.nn.layers import Conv1d, Conv2d, ConvTranspose2d, Linear


class FusedConv2dReLU(Conv2d):
    """Conv2d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "relu"}


class FusedConv2dAbs(Conv2d):
    """Conv2d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "abs"}


class FusedConv2dBN(Conv2d):
    """Conv2d -> batchnorm."""

    _defaults: ClassVar[dict[str, Any]] = {"batchnorm": "affine"}


class FusedConv2dBNReLU(Conv2d):
    """Conv2d -> batchnorm -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "relu", "batchnorm": "affine"}


class FusedConv2dBNAbs(Conv2d):
    """Conv2d -> batchnorm -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "abs", "batchnorm": "affine"}


class FusedMaxPoolConv2d(Conv2d):
    """Max pool -> Conv2d."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}


class FusedMaxPoolConv2dReLU(Conv2d):
    """Max pool -> Conv2d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "activation": "relu"}


class FusedMaxPoolConv2dAbs(Conv2d):
    """Max pool -> Conv2d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "activation": "abs"}


class FusedMaxPoolConv2dBN(Conv2d):
    """Max pool -> Conv2d -> batchnorm."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "batchnorm": "affine"}


class FusedMaxPoolConv2dBNReLU(Conv2d):
    """Max pool -> Conv2d -> batchnorm -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "max",
        "activation": "relu",
        "batchnorm": "affine",
    }


class FusedMaxPoolConv2dBNAbs(Conv2d):
    """Max pool -> Conv2d -> batchnorm -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "max",
        "activation": "abs",
        "batchnorm": "affine",
    }


class FusedAvgPoolConv2d(Conv2d):
    """Avg pool -> Conv2d."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}


class FusedAvgPoolConv2dReLU(Conv2d):
    """Avg pool -> Conv2d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "activation": "relu"}


class FusedAvgPoolConv2dAbs(Conv2d):
    """Avg pool -> Conv2d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "activation": "abs"}


class FusedAvgPoolConv2dBN(Conv2d):
    """Avg pool -> Conv2d -> batchnorm."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "batchnorm": "affine"}


class FusedAvgPoolConv2dBNReLU(Conv2d):
    """Avg pool -> Conv2d -> batchnorm -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "avg",
        "activation": "relu",
        "batchnorm": "affine",
    }


class FusedAvgPoolConv2dBNAbs(Conv2d):
    """Avg pool -> Conv2d -> batchnorm -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "avg",
        "activation": "abs",
        "batchnorm": "affine",
    }


class FusedConvTranspose2dReLU(ConvTranspose2d):
    """ConvTranspose2d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "relu"}


class FusedConvTranspose2dAbs(ConvTranspose2d):
    """ConvTranspose2d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "abs"}


class FusedMaxPoolConvTranspose2d(ConvTranspose2d):
    """Max pool -> ConvTranspose2d."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}


class FusedMaxPoolConvTranspose2dReLU(ConvTranspose2d):
    """Max pool -> ConvTranspose2d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "activation": "relu"}


class FusedMaxPoolConvTranspose2dAbs(ConvTranspose2d):
    """Max pool -> ConvTranspose2d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "activation": "abs"}


class FusedAvgPoolConvTranspose2d(ConvTranspose2d):
    """Avg pool -> ConvTranspose2d."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}


class FusedAvgPoolConvTranspose2dReLU(ConvTranspose2d):
    """Avg pool -> ConvTranspose2d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "activation": "relu"}


class FusedAvgPoolConvTranspose2dAbs(ConvTranspose2d):
    """Avg pool -> ConvTranspose2d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "activation": "abs"}


class FusedConv1dReLU(Conv1d):
    """Conv1d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "relu"}


class FusedConv1dAbs(Conv1d):
    """Conv1d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "abs"}


class FusedConv1dBN(Conv1d):
    """Conv1d -> batchnorm."""

    _defaults: ClassVar[dict[str, Any]] = {"batchnorm": "affine"}


class FusedConv1dBNReLU(Conv1d):
    """Conv1d -> batchnorm -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "relu", "batchnorm": "affine"}


class FusedConv1dBNAbs(Conv1d):
    """Conv1d -> batchnorm -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "abs", "batchnorm": "affine"}


class FusedMaxPoolConv1d(Conv1d):
    """Max pool -> Conv1d."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}


class FusedMaxPoolConv1dReLU(Conv1d):
    """Max pool -> Conv1d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "activation": "relu"}


class FusedMaxPoolConv1dAbs(Conv1d):
    """Max pool -> Conv1d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "activation": "abs"}


class FusedMaxPoolConv1dBN(Conv1d):
    """Max pool -> Conv1d -> batchnorm."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max", "batchnorm": "affine"}


class FusedMaxPoolConv1dBNReLU(Conv1d):
    """Max pool -> Conv1d -> batchnorm -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "max",
        "activation": "relu",
        "batchnorm": "affine",
    }


class FusedMaxPoolConv1dBNAbs(Conv1d):
    """Max pool -> Conv1d -> batchnorm -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "max",
        "activation": "abs",
        "batchnorm": "affine",
    }


class FusedAvgPoolConv1d(Conv1d):
    """Avg pool -> Conv1d."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}


class FusedAvgPoolConv1dReLU(Conv1d):
    """Avg pool -> Conv1d -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "activation": "relu"}


class FusedAvgPoolConv1dAbs(Conv1d):
    """Avg pool -> Conv1d -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "activation": "abs"}


class FusedAvgPoolConv1dBN(Conv1d):
    """Avg pool -> Conv1d -> batchnorm."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg", "batchnorm": "affine"}


class FusedAvgPoolConv1dBNReLU(Conv1d):
    """Avg pool -> Conv1d -> batchnorm -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "avg",
        "activation": "relu",
        "batchnorm": "affine",
    }


class FusedAvgPoolConv1dBNAbs(Conv1d):
    """Avg pool -> Conv1d -> batchnorm -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {
        "pooling": "avg",
        "activation": "abs",
        "batchnorm": "affine",
    }


class FusedLinearReLU(Linear):
    """Linear -> ReLU."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "relu"}


class FusedLinearAbs(Linear):
    """Linear -> Abs."""

    _defaults: ClassVar[dict[str, Any]] = {"activation": "abs"}


class MaxPool2d(Conv2d):
    """Max pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}

    def __init__(
        self, kernel_size: Any, stride: Any = None, dilation: Any = 1, **kwargs: Any
    ) -> None:
        super().__init__(
            0, 0, None, pool_size=kernel_size, pool_stride=stride, pool_dilation=dilation, **kwargs
        )


class AvgPool2d(Conv2d):
    """Avg pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}

    def __init__(
        self, kernel_size: Any, stride: Any = None, dilation: Any = 1, **kwargs: Any
    ) -> None:
        super().__init__(
            0, 0, None, pool_size=kernel_size, pool_stride=stride, pool_dilation=dilation, **kwargs
        )


class MaxPool1d(Conv1d):
    """Max pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}

    def __init__(
        self, kernel_size: Any, stride: Any = None, dilation: Any = 1, **kwargs: Any
    ) -> None:
        super().__init__(
            0, 0, None, pool_size=kernel_size, pool_stride=stride, pool_dilation=dilation, **kwargs
        )


class AvgPool1d(Conv1d):
    """Avg pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}

    def __init__(
        self, kernel_size: Any, stride: Any = None, dilation: Any = 1, **kwargs: Any
    ) -> None:
        super().__init__(
            0, 0, None, pool_size=kernel_size, pool_stride=stride, pool_dilation=dilation, **kwargs
        )


FUSED_NAMES = (
    "FusedConv2dReLU",
    "FusedConv2dAbs",
    "FusedConv2dBN",
    "FusedConv2dBNReLU",
    "FusedConv2dBNAbs",
    "FusedMaxPoolConv2d",
    "FusedMaxPoolConv2dReLU",
    "FusedMaxPoolConv2dAbs",
    "FusedMaxPoolConv2dBN",
    "FusedMaxPoolConv2dBNReLU",
    "FusedMaxPoolConv2dBNAbs",
    "FusedAvgPoolConv2d",
    "FusedAvgPoolConv2dReLU",
    "FusedAvgPoolConv2dAbs",
    "FusedAvgPoolConv2dBN",
    "FusedAvgPoolConv2dBNReLU",
    "FusedAvgPoolConv2dBNAbs",
    "FusedConvTranspose2dReLU",
    "FusedConvTranspose2dAbs",
    "FusedMaxPoolConvTranspose2d",
    "FusedMaxPoolConvTranspose2dReLU",
    "FusedMaxPoolConvTranspose2dAbs",
    "FusedAvgPoolConvTranspose2d",
    "FusedAvgPoolConvTranspose2dReLU",
    "FusedAvgPoolConvTranspose2dAbs",
    "FusedConv1dReLU",
    "FusedConv1dAbs",
    "FusedConv1dBN",
    "FusedConv1dBNReLU",
    "FusedConv1dBNAbs",
    "FusedMaxPoolConv1d",
    "FusedMaxPoolConv1dReLU",
    "FusedMaxPoolConv1dAbs",
    "FusedMaxPoolConv1dBN",
    "FusedMaxPoolConv1dBNReLU",
    "FusedMaxPoolConv1dBNAbs",
    "FusedAvgPoolConv1d",
    "FusedAvgPoolConv1dReLU",
    "FusedAvgPoolConv1dAbs",
    "FusedAvgPoolConv1dBN",
    "FusedAvgPoolConv1dBNReLU",
    "FusedAvgPoolConv1dBNAbs",
    "FusedLinearReLU",
    "FusedLinearAbs",
    "MaxPool2d",
    "AvgPool2d",
    "MaxPool1d",
    "AvgPool1d",
)
