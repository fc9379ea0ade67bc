"""What every part of the planner needs to know about the network and the options
(`PlanSettings`), in a module of its own so that the parts (`inputs`, `kat`, `latency`,
`registers`, `streaming`) read it without importing the plan that calls them."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.spec import NetworkSpec
from edgesynth.targets.max7800x.plan.bias import BiasMemory
from edgesynth.targets.max7800x.plan.chip import Chip
from edgesynth.targets.max7800x.plan.hwlayers import HwLayer
from edgesynth.targets.max7800x.plan.kernels import KernelMemory

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.options import Max7800xOptions


@dataclass
class StreamRegs:
    """One layer's streaming registers (computed in `streaming`)."""

    start: int = 0
    delta1: int = 0
    delta2: int = 0
    invol: int = 0
    rollover: int | None = None  # FMAX, written for streaming layers fed by the FIFOs
    start_hwc: int = 0  # the MAX78002 start value before CHW rounding (for the rollover)
    row_inc: int = 1
    col_inc: int = 1


@dataclass
class PlanSettings:
    """What every part of the planner needs to know about the network and the options."""

    chip: Chip
    opts: Max7800xOptions
    net_spec: NetworkSpec
    hw: list[HwLayer]
    first: int
    final: int
    terminating: int
    layer_count: int  # layers 0..final as the vendor counts them
    groups_used: list[int]
    processor_map_0: int  # the first layer's processors as configured
    pipeline: bool
    any_bias: bool
    binary: bool
    fifo_group: bool
    kernels: KernelMemory = field(default_factory=lambda: KernelMemory(np.zeros(0), np.zeros(0)))
    bias: BiasMemory = field(default_factory=lambda: BiasMemory([]))
    streams: dict[int, StreamRegs] = field(default_factory=dict)

    @property
    def by_index(self) -> dict[int, HwLayer]:
        return {h.index: h for h in self.hw}

    @property
    def hidden_layers(self) -> int:
        return self.hw[-1].hw_add if self.hw else 0

    def hw_add(self, index: int) -> int:
        h = self.by_index.get(index)
        return h.hw_add if h else 0

    @property
    def first_hw_layer(self) -> int:
        return self.first + self.hw_add(self.first)
