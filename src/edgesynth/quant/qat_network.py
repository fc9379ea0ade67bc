"""The gap8 QAT network: the input's quantizer and the user's layers (`quant.qat_gap8`), the
modes they run in, the start of QAT (clips calibrated on a few batches), and the integer
translation: the RequantShift ONNX the post-training quantizer writes, from which the 8-bit mode
takes its numbers (one golden model: the exported file and the 8-bit mode share every integer)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.quant.qat_gap8 import FLOAT, INTEGER, MODES, QAT, Add, AvgPool2d, Input, Layer
from edgesynth.quant.qat_graph import float_graph, link, trace
from edgesynth.quant.requant_onnx import QuantizedNetwork, quantize_graph
from edgesynth.quant.requant_shift import PtqOptions


class Network(nn.Module):
    """`body` (a network of `quant.qat_gap8` layers) behind the input's quantizer."""

    qat: torch.Tensor

    def __init__(
        self, body: nn.Module, weight_bits: int = 8, weights: str = "channel",
        output_bits: int = 16,
    ) -> None:  # fmt: skip
        super().__init__()
        self.input = Input()
        self.body = body
        self.options = PtqOptions(weights=weights, weight_bits=weight_bits, output_bits=output_bits)
        self.options.check()
        self.register_buffer("qat", torch.zeros(()))  # 1 once QAT has started (checkpoints)
        self.fx = trace(body)
        self.layers = link(body, self.fx, self.input, output_bits)
        if not self.layers:
            raise EdgesynthError(f"{type(body).__name__} has no edgesynth.quant.qat_gap8 layer")
        for layer in self.layers:
            layer.options = self.options
        self.mode = FLOAT

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.input(x))

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise EdgesynthError(f"mode {mode!r}: choose {', '.join(MODES)}")
        self.mode = mode
        for m in (self.input, *self.layers):
            m.mode = mode
        if mode == INTEGER:
            self.eval()  # dropout off: the integer network has none

    def restore_mode(self) -> None:
        """After loading a checkpoint: QAT if it was in QAT, else float."""
        self.set_mode(QAT if float(self.qat) else FLOAT)

    def load_state_dict(self, state: Any, strict: bool = True, assign: bool = False) -> Any:
        """A QAT checkpoint holds the layers with their batch norms folded: fold ours first."""
        if float(state.get("qat", 0)):
            for layer in self.layers:
                if isinstance(layer, Layer):
                    layer.fold_batchnorm()
        return super().load_state_dict(state, strict, assign)

    @torch.no_grad()
    def calibrate(self, batches: Iterable[torch.Tensor]) -> None:
        """The input range (min, max) and every clip (the largest output) over `batches`, in
        float mode (batch norms on their running statistics)."""
        mode, training = self.mode, self.training
        self.eval()
        self.set_mode(FLOAT)
        self.input.lo.zero_()
        self.input.hi.zero_()
        parts = (self.input, *self.layers)
        for layer in self.layers:
            layer.alpha.data.fill_(0.0)
        for m in parts:
            m.calibrating = True
        try:
            for x in batches:
                self(x)
        finally:
            for m in parts:
                m.calibrating = False
            self.train(training)
        self.set_mode(mode)

    def start_qat(self, batches: Iterable[torch.Tensor]) -> None:
        """Calibrate on `batches` (batch norms folded first), then train with fake
        quantization. A folded batch norm may give a layer a new bias parameter: build the
        optimizer again."""
        for layer in self.layers:
            if isinstance(layer, Layer):
                layer.fold_batchnorm()
        self.calibrate(batches)
        self.qat.fill_(1.0)
        self.set_mode(QAT)

    def sample_shape(self, shape: tuple[int, ...]) -> torch.Tensor:
        device = next(self.parameters()).device
        return torch.zeros((1, *shape), device=device)


def integer_mode(net: Network, shape: tuple[int, ...], name: str = "network") -> QuantizedNetwork:
    """The integer network of `net` (one input of `shape`) as RequantShift ONNX, and `net` in
    8-bit mode computing it: codes in (`net.input` quantizes floats), codes out."""
    if not float(net.qat):
        raise EdgesynthError("the network has not started QAT (no calibrated clips)")
    net.set_mode(FLOAT)
    lo, hi = float(net.input.lo), float(net.input.hi)
    with torch.no_grad():
        graph, ranges, finals = float_graph(net.body, net.fx, net.sample_shape(shape), (lo, hi))
    graph.name = name
    quantized = quantize_graph(graph, ranges, net.options, name)
    for result in net.layers:
        out = quantized.tensors[finals[result.qualname]]
        if isinstance(result, Add):
            result.integer = (result.operands(), out)
        elif isinstance(result, AvgPool2d):
            result.integer = (result.multiplier(), out)
        else:
            result.integer = (quantized.layers[result.qualname], out)
    net.set_mode(INTEGER)
    return quantized
