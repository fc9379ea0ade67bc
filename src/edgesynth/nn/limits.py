"""Construction-time checks: a layer the device cannot run is refused with a clear message.

Every number comes from the device description (`targets/max7800x/device.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.device import Device


def fact(device: Device, name: str) -> Any:
    """A device fact by field name, from the device description."""
    return getattr(device, name)


_checking = True


@contextmanager
def unchecked() -> Iterator[None]:
    """Build layers without the device checks (for descriptions the rule checker passed)."""
    global _checking
    saved, _checking = _checking, False
    try:
        yield
    finally:
        _checking = saved


class LayerCheck:
    """Collects what is wrong with one layer's parameters and raises once, naming all of it."""

    def __init__(self, layer: str, device: Device) -> None:
        self.layer = layer
        self.device = device
        self.problems: list[str] = []

    def require(self, ok: bool, message: str) -> None:
        if not ok and message not in self.problems:
            self.problems.append(message)

    def within(self, key: str, value: int, low: int, high: int) -> None:
        self.require(low <= value <= high, f"`{key}`={value} must be {low}..{high}")

    def one_of(self, key: str, value: object, allowed: Iterable[object]) -> None:
        allowed = tuple(allowed)
        choices = ", ".join(str(a) for a in allowed)
        self.require(value in allowed, f"`{key}`={value} must be one of {choices}")

    def done(self) -> None:
        if self.problems and _checking:
            detail = "; ".join(self.problems)
            raise EdgesynthError(f"{self.layer} cannot run on {self.device.name}: {detail}.")


def check_pool(
    chk: LayerCheck,
    pooling: str | None,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
) -> None:
    if pooling is None:
        return
    dev = chk.device
    for v in size:
        chk.within("pool_size", v, 1, dev.max_pool)
    for v in stride:
        chk.within("pool_stride", v, 1, dev.max_pool_stride)
    chk.require(len(set(stride)) == 1, f"`pool_stride`={stride} must be equal in both dimensions")
    for v in dilation:
        chk.within("pool_dilation", v, 1, dev.max_pool_dilation)
    if any(d > 1 for d in dilation):
        chk.require(pooling == "max", "`pool_dilation` > 1 needs max pooling")
        chk.require(len(size) == 2, "`pool_dilation` > 1 needs 2D pooling")


def check_channels(chk: LayerCheck, in_channels: int, out_channels: int) -> None:
    chk.within("in_channels", in_channels, 1, chk.device.max_channels)
    chk.within("out_channels", out_channels, 1, chk.device.max_channels)


BINARY_NAMES = ("binary", -1)  # how a layer asks for +/-1 weights (MAX78002)


def check_weight_bits(chk: LayerCheck, weight_bits: int | str | None) -> None:
    if weight_bits in BINARY_NAMES:
        chk.require(
            chk.device.supports_binary_weights,
            f"`weight_bits`={weight_bits!r}: binary (+/-1) weights need the MAX78002",
        )
    elif weight_bits is not None:
        chk.one_of("weight_bits", weight_bits, (*chk.device.weight_bits, *binary_choice(chk)))


def check_groups(chk: LayerCheck, groups: int, in_channels: int, out_channels: int) -> None:
    if groups == 1:
        return
    chk.require(
        chk.device.supports_depthwise,
        f"`groups`={groups}: depthwise convolution is not supported (groups must be 1)",
    )
    chk.require(
        groups == in_channels == out_channels,
        f"`groups`={groups} must be 1 or equal to in_channels and out_channels (depthwise)",
    )


def binary_choice(chk: LayerCheck) -> tuple[str, ...]:
    """'binary' among the allowed weight widths where the device has binary weights."""
    return ("binary",) if chk.device.supports_binary_weights else ()
