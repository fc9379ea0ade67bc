"""Gati layers before quantization: a chain of megablocks (CONV or FC) each with its tail.

`lower.fuse` builds a `LayerChain` from a float network graph; `lower_integer` from an integer
one. Each `FusedLayer` is one Gati layer: the megablock's weights and bias, then the tail's
activation and pooling. Layer and tensor names are the graph's (for ONNX models, the ONNX node
and tensor names), so messages, `--dispatch` and the report speak the user's language.

Layers run in list order; each reads its operands from earlier layers (`FusedLayer.sources`,
layer indices, -1 for the graph input; an operand made of several layers is their channel
concatenation). A plain chain leaves `sources` empty: each layer reads the one before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PoolSpec:
    type: str  # max | avg | global_avg
    kernel: tuple[int, int]  # (kh, kw)
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]  # top, left, bottom, right
    ceil: bool
    count_include_pad: bool
    node: str
    in_hw: tuple[int, int] = (0, 0)
    out_hw: tuple[int, int] = (0, 0)


@dataclass
class FusedLayer:
    name: str  # the graph node that opened the layer (Conv/Linear, or the lone tail operator)
    kind: str  # conv | linear | none | eltwise
    in_shape: tuple[int, ...]  # (C, H, W) or (F,)
    nodes: list[str] = field(default_factory=list)  # every graph/ONNX node fused into the layer
    weight: np.ndarray | None = None  # (O, I, kh, kw) or (O, I); float64, or int64 (integer)
    bias: np.ndarray | None = None  # (O,)
    strides: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    dilations: tuple[int, int] = (1, 1)
    group: int = 1
    activation: str | None = None  # relu | sigmoid | tanh
    # a float Clip(0, hi) taken as the ReLU: the activation's range, which quantization maps
    # to 127 so the tail block's saturation is the clip
    act_bound: float | None = None
    activation_node: str | None = None
    pool: PoolSpec | None = None
    flatten: bool = False  # a linear layer reading a (C, H, W) tensor
    in_map: tuple[int, ...] = ()  # for flatten: the (C, H, W) shape that was flattened
    conv_shape: tuple[int, ...] = ()  # after the megablock, before pooling
    out_shape: tuple[int, ...] = ()
    output: str = ""  # graph tensor the layer's output stands for
    stage: int = 0  # 0: megablock (+bias); 1: activation set; 2: pooling set
    # per operand (one; two for eltwise), the layers whose outputs, concatenated along the
    # channels, form it (-1: the graph input); empty: the previous layer (a plain chain)
    sources: list[list[int]] = field(default_factory=list)
    eltwise: str | None = None  # add | sub | mul: the element-wise block's operation

    @property
    def out_channels(self) -> int:
        return self.conv_shape[0]

    @property
    def operation(self) -> str:
        """The report's name for the megablock."""
        if self.kind == "eltwise":
            assert self.eltwise is not None
            return self.eltwise
        return {"conv": "conv2d", "linear": "linear", "none": "none"}[self.kind]


@dataclass
class LayerChain:
    path: str  # the model file (messages, report)
    input_name: str
    input_shape: tuple[int, ...]  # without the batch dimension: (C, H, W) or (F,)
    output_name: str
    layers: list[FusedLayer]
    host_post: str | None = None  # softmax | logsoftmax, applied by the host on the outputs
    host_post_node: str | None = None
    opset: int = 0  # the ONNX opset (0 for other sources)
    output_shape: tuple[int, ...] = ()  # the graph output without the batch dimension

    def sources_of(self, index: int) -> list[list[int]]:
        """Layer `index`'s operands as producer lists (-1: the graph input)."""
        return self.layers[index].sources or [[index - 1]]

    @property
    def is_chain(self) -> bool:
        """Every layer reads the one before it alone (no branch, no concatenation)."""
        return all(self.sources_of(i) == [[i - 1]] for i in range(len(self.layers)))

    def label(self, node: str) -> str:
        """How messages name a node: as an ONNX node for ONNX models."""
        return f"ONNX node `{node}`" if self.opset else f"operator `{node}`"
