"""The target-independent network IR: layers with resolved shapes and integer weights.

A `Network` is what every later stage works on: device rules check it, planners place it,
the simulator runs it, code generators emit it. Nothing in here is optional in the YAML sense:
every field holds the value the hardware will use, defaults already applied.
"""

from __future__ import annotations

from dataclasses import field

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.spec import LayerSpec, NetworkSpec

Pair = tuple[int, int]

NETWORK_INPUT = -1  # an `in_sequences` entry that names the network's input data


@dataclass
class Layer:
    """One layer of a network, its description's values with the device's defaults filled in."""

    index: int
    spec: LayerSpec  # where the layer came from (YAML lines for error messages)
    operation: str  # conv1d | conv2d | convtranspose2d | linear | none
    eltwise: str | None = None  # add | sub | xor | or
    operands: int = 1
    pool_first: bool = True
    pool_type: str | None = None  # max | avg
    pool: Pair = (1, 1)
    pool_stride: Pair = (1, 1)
    pool_dilation: Pair = (1, 1)
    kernel_size: Pair = (1, 1)  # conv1d: (k, 1)
    stride: Pair = (1, 1)
    pad: Pair = (0, 0)
    dilation: Pair = (1, 1)
    output_padding: Pair = (0, 0)
    groups: int = 1
    activation: str | None = None  # relu | abs
    quantization: int = 8  # weight bits: 1, 2, 4 or 8
    binary: bool = False  # MAX78002 +/-1 weights
    output_shift: int = 0  # total shift applied to the accumulator (checkpoint/YAML + 8 - bits)
    output_width: int = 8
    flatten: bool = False
    in_sequences: list[int] = field(default_factory=list)  # resolved producers; -1 = input
    in_crop: Pair = (0, 0)
    in_channels: int = 0  # channels entering the layer, per element-wise operand
    in_dim: Pair = (1, 1)  # H, W entering the layer (after in_dim reshape/in_crop)
    pooled_dim: Pair = (1, 1)
    out_channels: int = 0
    out_dim: Pair = (1, 1)
    weights: np.ndarray | None = None  # int64 (out, in/groups, kh, kw); conv1d (out, in/g, k)
    bias: np.ndarray | None = None  # int64 per output channel, in bias units (x128 in acc)
    weight_source: int | None = None  # layer whose weights are reused
    # Placement, as configured (planners fill what is left None).
    processors: int | None = None
    output_processors: int | None = None
    in_offset: int | None = None
    out_offset: int | None = None
    data_format: str = "HWC"
    streaming: bool = False
    write_gap: int = 0
    read_gap: int = 0
    bias_group: int | str | None = None
    output: bool = False  # an explicit `output: true` layer
    next_sequence: int | None = None  # resolved; -1 stops the network
    buffer_shift: int = 0
    buffer_insert: int = 0

    @property
    def name(self) -> str:
        return self.spec.name or f"layer {self.index}"

    @property
    def is_1d(self) -> bool:
        return self.operation == "conv1d"

    @property
    def has_weights(self) -> bool:
        return self.operation != "none"

    def error(
        self, message: str, *, key: str | None = None, file: str | None = None
    ) -> EdgesynthError:
        """An error about this layer: its YAML line (the key's own line when given), index,
        name and key."""
        line = self.spec.lines.get(key, self.spec.line) if key else self.spec.line
        return EdgesynthError(
            message, file=file, line=line, layer=self.index, layer_name=self.spec.name, key=key
        )


@dataclass
class Network:
    """A network on a device: its layers, the order they run in and the input it takes."""

    spec: NetworkSpec
    device: str  # e.g. "MAX78000"
    layers: list[Layer]
    input_shape: tuple[int, ...]  # C, H, W (or C, L) of the sample the network takes
    order: list[int] = field(default_factory=list)  # layer sequence (next_sequence chain)
    # The order the known-answer simulation runs (differs only with `simulated_sequence`).
    sim_order: list[int] = field(default_factory=list)
    output_layer: int = -1  # the layer whose output the known-answer test checks
