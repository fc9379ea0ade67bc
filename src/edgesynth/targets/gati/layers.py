"""Gati's hardware layers: the quantized network handed from `quantize` (or `lower_integer`)
to the plan step (`plan.py`).

`GatiModel.chain` holds the fused layers (shapes, kernel, stride, pooling, activation, names);
each `GatiLayer` beside it holds what quantization decided: the integer weights and bias, the
tail block's requantization (QuantScale/QuantShift), the padded sides, and the scales the host
needs to quantize inputs and dequantize outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgesynth.targets.gati.chain import FusedLayer, LayerChain


@dataclass
class GatiLayer:
    onnx_nodes: list[str]
    in_scale: float  # float value of one LSB of the layer's input
    weight_scale: float
    acc_scale: float  # in_scale * weight_scale: one accumulator LSB
    out_scale: float  # one LSB of the layer's output (after activation and pooling)
    quant_en: bool  # False: the output keeps the 32-bit accumulator values
    weights: np.ndarray | None = None  # int64 (KN, IC, KH, KW) or (M, N); None: identity layer
    bias: np.ndarray | None = None  # int64, accumulator units
    quant_scale: int = 1  # TailBlock.QuantScale
    quant_shift: int = 0  # TailBlock.QuantShift
    bias_width: int = 32  # 8 or 32
    act_param: int = 0  # sigmoid/tanh: the input LSB is 2**-act_param
    pad: int = 0  # CONV.Pad, applied on the sides in pad_sides
    pad_sides: int = 0  # CONV.PadSides bit vector (isa.PAD_*)
    pool_pad: int = 0
    pool_pad_sides: int = 0
    pool_ceil: bool = False
    pool_global: bool = False
    flat_map: tuple[int, ...] = ()  # a flattening FC: the (C, H, W) map it reads
    # eltwise: each operand's multiply and shift to the common scale (ELTWISE.AScale/AShift,
    # BScale/BShift): (x * scale + 2**(shift - 1)) >> shift
    operand_scales: tuple[int, int] = (1, 1)
    operand_shifts: tuple[int, int] = (0, 0)
    warnings: list[str] = field(default_factory=list)

    @property
    def out_bytes(self) -> int:
        """Bytes per output element in DRAM: 1 after quantization, 4 without."""
        return 1 if self.quant_en else 4


@dataclass
class GatiModel:
    chain: LayerChain  # the fused layers; chain.layers[i] goes with layers[i]
    layers: list[GatiLayer]
    input_scale: float  # float value of one LSB of the int8 input
    input_layout: str  # "map" (C, H, W in NHW8C8 blocks) or "vector"

    def pairs(self) -> list[tuple[FusedLayer, GatiLayer]]:
        return list(zip(self.chain.layers, self.layers, strict=True))

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.chain.input_shape)
