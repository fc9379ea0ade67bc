"""Element-wise layers: Add, Sub, BitwiseOr, BitwiseXor of 2 to 16 equally shaped inputs.

The chip combines the 8-bit operands in wide integers and clips the result to [-128, 127]
with no shift. In training the same happens on the 1/128 grid; the bitwise operations work on
the two's complement bytes and pass no gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn import device as device_setting
from edgesynth.nn import functional as hw
from edgesynth.nn import limits


class Eltwise(nn.Module):
    """Base: fold `combine` over the operands, then clip to 8 bits."""

    bitwise = False

    def __init__(self, operands: int | None = None, wide: bool = False) -> None:
        super().__init__()
        self.operands = operands
        self.wide = wide  # keep the wide result (a 32-bit passthrough output), no clipping
        if operands is not None:
            dev = device_setting.current().device
            chk = limits.LayerCheck(type(self).__name__, dev)
            chk.within("operands", operands, 2, dev.max_operands)
            chk.done()

    @staticmethod
    def combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        if len(xs) == 1 and isinstance(xs[0], list | tuple):
            xs = tuple(xs[0])
        dev = device_setting.current()
        most = dev.device.max_operands
        if not 2 <= len(xs) <= most:
            raise EdgesynthError(f"{type(self).__name__} takes 2..{most} operands, got {len(xs)}.")
        if self.operands is not None and len(xs) != self.operands:
            raise EdgesynthError(
                f"{type(self).__name__} was built for {self.operands} operands, got {len(xs)}."
            )
        if dev.simulate:
            return self._reduce([x.double() for x in xs], self.combine, unit=1.0)
        if self.bitwise:
            ints = [torch.round(x.detach() * hw.ACT_SCALE) for x in xs]
            y = self._reduce(ints, self.combine, unit=1.0) / hw.ACT_SCALE
            return y.to(xs[0].dtype)
        return self._reduce(list(xs), self.combine, unit=1.0 / hw.ACT_SCALE)

    def _reduce(
        self,
        xs: list[torch.Tensor],
        combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        unit: float,
    ) -> torch.Tensor:
        y = xs[0]
        for x in xs[1:]:
            y = combine(y, x)
        return y if self.wide else torch.clamp(y, hw.ACT_MIN * unit, hw.ACT_MAX * unit)


class Add(Eltwise):
    """Element-wise sum, clipped to 8 bits."""

    @staticmethod
    def combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class Sub(Eltwise):
    """First operand minus the others, clipped to 8 bits."""

    @staticmethod
    def combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b


def _bytes(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.int64)


class BitwiseOr(Eltwise):
    """Bitwise OR of the two's complement bytes."""

    bitwise = True

    @staticmethod
    def combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bitwise_or(_bytes(a), _bytes(b)).to(a.dtype)


class BitwiseXor(Eltwise):
    """Bitwise XOR of the two's complement bytes."""

    bitwise = True

    @staticmethod
    def combine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bitwise_xor(_bytes(a), _bytes(b)).to(a.dtype)


Or = BitwiseOr  # the vendor's names
Xor = BitwiseXor
