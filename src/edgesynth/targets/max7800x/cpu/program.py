"""The CPU part of a split MAX7800x network: integer layers run in order on the Cortex-M4.

Each layer reads the outputs of its `sources` (-1: the accelerator's output as `cnn_unload`
leaves it: channel-major, 8-bit codes or 32-bit accumulators; k: layer k's output; none given:
the previous layer's, or the accelerator's for the first). Kinds:
- `linear`: acc = bias + sum(w x) (int8 weights, int32 bias); `wide`: the accumulator is the
  output (int32); else out = clamp((acc x mult + 2**(shift-1)) >> shift, -128, 127).
- `requantize`: a 32-bit input (the accelerator's accumulator) to int8 codes, as a linear
  layer's output is requantized.
- `rescale`: int8 codes requantized to another scale (the codes the accelerator takes back).
- `relu`: max(x, 0).
- `leaky`: x where x >= 0, else clamp((x x mult + 2**(shift-1)) >> shift) (x alpha).
- `lut`: an int8 -> int8 table (sigmoid, tanh, hardsigmoid, hardswish, swish, mish; see
  `simulate.activation_table`).
- `conv`: a 2-D convolution of a (C, H, W) tensor (zero padding, strides, dilation, groups),
  its accumulator requantized as a linear layer's (or kept, `wide`).
- `convt`: a transposed 2-D convolution, as `conv` on the input zero-stuffed by `stride`
  (stride 1 after the stuffing; the weight in convolution form, `pads` after the stuffing).
- `pool`: max, or average (the window's sum requantized by mult/shift ~ 1 / window size).
- `add`, `sub`: two int8 tensors of one size, each on its own scale: out = clamp((a x mults[0]
  +- b x mults[1] + 2**(shift-1)) >> shift) (one shift; the output's scale).
- `mul`: out = clamp((a x b x mult + 2**(shift-1)) >> shift).
- `concat`: the sources one after the other (channel-major: along the channels), each
  requantized to the output's scale by mults[i] and shifts[i].
Files (`save`, `load`): `cpu_part.json` (the layers) and `cpu_part.npz` (their arrays).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

JSON_FILE = "cpu_part.json"
ARRAYS_FILE = "cpu_part.npz"


@dataclass
class CpuLayer:
    name: str  # the graph operator it computes (messages, comments)
    kind: str  # linear | requantize | relu | leaky | lut | conv | convt | pool | add | sub | mul
    # | concat | rescale
    size: int  # output values
    out_bits: int = 8  # 8, or 32 for a wide linear output
    function: str = ""  # lut: a `sim.unary` function
    mult: int = 0  # requantize, leaky, linear not wide: the multiplier ...
    shift: int = 0  # ... and right shift (rounding half up)
    weight: np.ndarray | None = None  # linear: (out, in) int8
    bias: np.ndarray | None = None  # linear: (out,) int32
    table: np.ndarray | None = None  # lut: 256 int8, indexed by code + 128
    nodes: list[str] = field(default_factory=list)  # the graph operators it computes
    # conv, pool: the geometry ((C, H, W) in and out; pads top, left, bottom, right)
    in_shape: list[int] = field(default_factory=list)
    out_shape: list[int] = field(default_factory=list)
    kernel: list[int] = field(default_factory=list)
    stride: list[int] = field(default_factory=list)
    pads: list[int] = field(default_factory=list)
    dilation: list[int] = field(default_factory=list)
    groups: int = 1
    pool: str = ""  # max | avg
    sources: list[int] = field(default_factory=list)  # the buffers read (see the module doc)
    mults: list[int] = field(default_factory=list)  # add, sub, concat: one per source ...
    shifts: list[int] = field(default_factory=list)  # ... concat: one shift per source

    def inputs(self, index: int) -> list[int]:
        """The buffers layer `index` (this one) reads: -1 the accelerator's output, k layer k's."""
        return self.sources or [index - 1]


@dataclass
class CpuProgram:
    """The CPU part: its input (the accelerator's output), layers and output."""

    in_shape: tuple[int, ...]
    in_bits: int  # 8 or 32: how the accelerator's output is unloaded
    in_scale: float
    layers: list[CpuLayer]
    out_scale: float
    softmax: bool = False  # the project's softmax runs on the output (not part of the answer)

    @property
    def in_size(self) -> int:
        return int(np.prod(self.in_shape))

    @property
    def in_words(self) -> int:
        """32-bit words the unloaded input takes."""
        return self.in_size if self.in_bits == 32 else (self.in_size + 3) // 4

    @property
    def out_bits(self) -> int:
        return self.layers[-1].out_bits if self.layers else self.in_bits

    @property
    def out_size(self) -> int:
        return self.layers[-1].size if self.layers else self.in_size

    def save(self, folder: Path) -> list[str]:
        """`cpu_part.json` and `cpu_part.npz` in `folder`; returns their names."""
        arrays: dict[str, np.ndarray] = {}
        layers = []
        for i, layer in enumerate(self.layers):
            entry = asdict(layer)
            if entry["sources"] == [i - 1]:  # the default: the previous layer's output
                del entry["sources"]
            for key in ("mults", "shifts"):
                if not entry[key]:
                    del entry[key]
            for key in ("weight", "bias", "table"):
                value = entry.pop(key)
                if value is not None:
                    arrays[f"{i}_{key}"] = np.asarray(value)
            layers.append(entry)
        head = {k: v for k, v in asdict(self).items() if k != "layers"}
        text = json.dumps({**head, "layers": layers}, indent=1) + "\n"
        (Path(folder) / JSON_FILE).write_text(text)
        with open(Path(folder) / ARRAYS_FILE, "wb") as handle:
            np.savez(handle, **arrays)
        return [JSON_FILE, ARRAYS_FILE]

    @classmethod
    def load(cls, folder: Path) -> CpuProgram | None:
        """The CPU part `save` wrote in `folder`, or None where there is none."""
        path = Path(folder) / JSON_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        with np.load(Path(folder) / ARRAYS_FILE) as arrays:
            layers = []
            for i, entry in enumerate(data.pop("layers")):
                found = {k: arrays[f"{i}_{k}"] for k in ("weight", "bias", "table")
                         if f"{i}_{k}" in arrays}  # fmt: skip
                layers.append(CpuLayer(**entry, **found))
        data["in_shape"] = tuple(data["in_shape"])
        return cls(**data, layers=layers)
