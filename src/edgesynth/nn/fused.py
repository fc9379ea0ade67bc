"""The fused layers of the vendor's "List of Predefined Modules", by their vendor names.

Each is its base layer with pooling, activation and (for the BN variants) batchnorm fixed;
`MaxPool2d`/`AvgPool2d`/`MaxPool1d`/`AvgPool1d` pool without a convolution.

The fused classes are made from one table by `_fused`, which derives each class's name and
docstring from its settings (`Fused` + pooling + base + `BN` + activation, as the vendor names
them); the check at the end keeps every table name equal to its class's name, which pickling
relies on.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from edgesynth.nn.layers import Conv1d, Conv2d, ConvTranspose2d, Linear

_Base = TypeVar("_Base", Conv1d, Conv2d, ConvTranspose2d, Linear)

_POOL_NAMES = {"max": ("MaxPool", "Max pool"), "avg": ("AvgPool", "Avg pool")}
_ACTIVATION_NAMES = {"relu": "ReLU", "abs": "Abs"}


def _fused(
    base: type[_Base], *, pool: str | None = None, bn: bool = False, act: str | None = None
) -> type[_Base]:
    """`base` with `pool` ("max"/"avg"), affine batchnorm (`bn`) and `act` ("relu"/"abs") fixed."""
    name, steps = ["Fused"], []
    defaults: dict[str, Any] = {}
    if pool is not None:
        name.append(_POOL_NAMES[pool][0])
        steps.append(_POOL_NAMES[pool][1])
        defaults["pooling"] = pool
    name.append(base.__name__)
    steps.append(base.__name__)
    if act is not None:
        defaults["activation"] = act
    if bn:
        name.append("BN")
        steps.append("batchnorm")
        defaults["batchnorm"] = "affine"
    if act is not None:
        name.append(_ACTIVATION_NAMES[act])
        steps.append(_ACTIVATION_NAMES[act])
    namespace = {
        "__doc__": " -> ".join(steps) + ".",
        "__module__": __name__,
        "_defaults": defaults,
    }
    return type("".join(name), (base,), namespace)


FusedConv2dReLU = _fused(Conv2d, act="relu")
FusedConv2dAbs = _fused(Conv2d, act="abs")
FusedConv2dBN = _fused(Conv2d, bn=True)
FusedConv2dBNReLU = _fused(Conv2d, bn=True, act="relu")
FusedConv2dBNAbs = _fused(Conv2d, bn=True, act="abs")
FusedMaxPoolConv2d = _fused(Conv2d, pool="max")
FusedMaxPoolConv2dReLU = _fused(Conv2d, pool="max", act="relu")
FusedMaxPoolConv2dAbs = _fused(Conv2d, pool="max", act="abs")
FusedMaxPoolConv2dBN = _fused(Conv2d, pool="max", bn=True)
FusedMaxPoolConv2dBNReLU = _fused(Conv2d, pool="max", bn=True, act="relu")
FusedMaxPoolConv2dBNAbs = _fused(Conv2d, pool="max", bn=True, act="abs")
FusedAvgPoolConv2d = _fused(Conv2d, pool="avg")
FusedAvgPoolConv2dReLU = _fused(Conv2d, pool="avg", act="relu")
FusedAvgPoolConv2dAbs = _fused(Conv2d, pool="avg", act="abs")
FusedAvgPoolConv2dBN = _fused(Conv2d, pool="avg", bn=True)
FusedAvgPoolConv2dBNReLU = _fused(Conv2d, pool="avg", bn=True, act="relu")
FusedAvgPoolConv2dBNAbs = _fused(Conv2d, pool="avg", bn=True, act="abs")

FusedConvTranspose2dReLU = _fused(ConvTranspose2d, act="relu")
FusedConvTranspose2dAbs = _fused(ConvTranspose2d, act="abs")
FusedMaxPoolConvTranspose2d = _fused(ConvTranspose2d, pool="max")
FusedMaxPoolConvTranspose2dReLU = _fused(ConvTranspose2d, pool="max", act="relu")
FusedMaxPoolConvTranspose2dAbs = _fused(ConvTranspose2d, pool="max", act="abs")
FusedAvgPoolConvTranspose2d = _fused(ConvTranspose2d, pool="avg")
FusedAvgPoolConvTranspose2dReLU = _fused(ConvTranspose2d, pool="avg", act="relu")
FusedAvgPoolConvTranspose2dAbs = _fused(ConvTranspose2d, pool="avg", act="abs")

FusedConv1dReLU = _fused(Conv1d, act="relu")
FusedConv1dAbs = _fused(Conv1d, act="abs")
FusedConv1dBN = _fused(Conv1d, bn=True)
FusedConv1dBNReLU = _fused(Conv1d, bn=True, act="relu")
FusedConv1dBNAbs = _fused(Conv1d, bn=True, act="abs")
FusedMaxPoolConv1d = _fused(Conv1d, pool="max")
FusedMaxPoolConv1dReLU = _fused(Conv1d, pool="max", act="relu")
FusedMaxPoolConv1dAbs = _fused(Conv1d, pool="max", act="abs")
FusedMaxPoolConv1dBN = _fused(Conv1d, pool="max", bn=True)
FusedMaxPoolConv1dBNReLU = _fused(Conv1d, pool="max", bn=True, act="relu")
FusedMaxPoolConv1dBNAbs = _fused(Conv1d, pool="max", bn=True, act="abs")
FusedAvgPoolConv1d = _fused(Conv1d, pool="avg")
FusedAvgPoolConv1dReLU = _fused(Conv1d, pool="avg", act="relu")
FusedAvgPoolConv1dAbs = _fused(Conv1d, pool="avg", act="abs")
FusedAvgPoolConv1dBN = _fused(Conv1d, pool="avg", bn=True)
FusedAvgPoolConv1dBNReLU = _fused(Conv1d, pool="avg", bn=True, act="relu")
FusedAvgPoolConv1dBNAbs = _fused(Conv1d, pool="avg", bn=True, act="abs")

FusedLinearReLU = _fused(Linear, act="relu")
FusedLinearAbs = _fused(Linear, act="abs")


class _PoolingOnly:
    """Pooling without convolution (no padding): a layer with no weights."""

    def __init__(
        self, kernel_size: Any, stride: Any = None, dilation: Any = 1, **kwargs: Any
    ) -> None:
        super().__init__(  # type: ignore[call-arg]
            0, 0, None, pool_size=kernel_size, pool_stride=stride, pool_dilation=dilation, **kwargs
        )


class MaxPool2d(_PoolingOnly, Conv2d):
    """Max pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}


class AvgPool2d(_PoolingOnly, Conv2d):
    """Avg pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}


class MaxPool1d(_PoolingOnly, Conv1d):
    """Max pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "max"}


class AvgPool1d(_PoolingOnly, Conv1d):
    """Avg pooling without convolution (no padding)."""

    _defaults: ClassVar[dict[str, Any]] = {"pooling": "avg"}


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

for _name in FUSED_NAMES:  # a class is pickled by its name, so each must be bound under it
    if globals()[_name].__name__ != _name:
        raise RuntimeError(f"{_name} is bound to a class named {globals()[_name].__name__}")
del _name
