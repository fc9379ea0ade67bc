"""xDNN hardware layers: one per engine command (XNConv, XNMaxPool, XNAvgPool, XNEltwise)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Shape = tuple[int, int, int]


@dataclass
class XLayer:
    op: str  # XNConv | XNMaxPool | XNAvgPool | XNEltwise
    name: str  # the ONNX node (or graph operator) that opened the layer
    inputs: list[str]  # stored tensors read (two for XNEltwise)
    output: str  # the stored tensor written
    in_shape: Shape
    out_shape: Shape
    kernel: tuple[int, int] = (1, 1)  # (h, w)
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)  # (h, w): top and left; bottom/right follow from out_shape
    dilation: tuple[int, int] = (1, 1)
    relu: bool = False
    fc_mode: bool = False
    weight: np.ndarray | None = None  # int64 (O, I, kh, kw)
    pre: np.ndarray | None = None  # per output channel
    scale: np.ndarray | None = None
    post: np.ndarray | None = None
    bias: np.ndarray | None = None
    has_bias: bool = False
    sources: list[str] = field(default_factory=list)  # every graph operator fused into it
    fc: bool = False  # a fully-connected layer run as a convolution over the whole input

    @property
    def describe(self) -> str:
        shape = "x".join(map(str, self.in_shape)) + " -> " + "x".join(map(str, self.out_shape))
        return f"{self.op} {self.name} {shape}"
