"""The device setting the training-side layers follow: which chip, simulated or not, and how
average pooling rounds.

Limits come from `edgesynth.targets.max7800x.device` (the same facts the synthesizer checks);
this module only remembers which device is selected. Layers check their parameters against the
setting that is current when they are built, and read `simulate`/`avg_pool_rounding` each time
they run, so one model can be trained in float and then evaluated in 8-bit mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from edgesynth.targets.max7800x.device import Device, get_device


@dataclass(frozen=True)
class DeviceSetting:
    device: Device
    simulate: bool = False  # 8-bit mode: every layer computes the chip's integers
    avg_pool_rounding: bool = False  # average pooling rounds (half away from zero) not truncates

    @property
    def name(self) -> str:
        return self.device.name


_current = DeviceSetting(get_device("MAX78000"))


def current() -> DeviceSetting:
    """The setting layers use right now."""
    return _current


def set_device(
    device: str | Device = "MAX78000",
    *,
    simulate: bool = False,
    avg_pool_rounding: bool = False,
) -> DeviceSetting:
    """Select the device (name as `--device` takes it), 8-bit simulation and pool rounding."""
    global _current
    dev = device if isinstance(device, Device) else get_device(device)
    _current = DeviceSetting(dev, simulate=simulate, avg_pool_rounding=avg_pool_rounding)
    return _current


@contextmanager
def use(
    device: str | Device | None = None,
    *,
    simulate: bool | None = None,
    avg_pool_rounding: bool | None = None,
) -> Iterator[DeviceSetting]:
    """Temporarily change the setting; arguments left None keep their current value."""
    global _current
    saved = _current
    changes: dict[str, object] = {}
    if device is not None:
        changes["device"] = device if isinstance(device, Device) else get_device(device)
    if simulate is not None:
        changes["simulate"] = simulate
    if avg_pool_rounding is not None:
        changes["avg_pool_rounding"] = avg_pool_rounding
    _current = replace(saved, **changes)  # type: ignore[arg-type]
    try:
        yield _current
    finally:
        _current = saved
