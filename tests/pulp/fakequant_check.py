"""The integer network of a quantized float graph against its fake-quantized float network
(`quant.fakequant`): the codes of every tensor the integer network stores, compared."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from edgesynth.frontends.onnx_int import load_integer_onnx
from edgesynth.ir import graph as g
from edgesynth.quant.calibrate import check_calibration, tensor_ranges
from edgesynth.quant.fakequant import CODES, fake_quantized
from edgesynth.quant.requant_onnx import QuantizedNetwork, quantize_graph
from edgesynth.quant.requant_shift import PtqOptions
from edgesynth.sim.graph import run


def quantized(graph: g.Graph, calibration: np.ndarray) -> tuple[QuantizedNetwork, g.Graph]:
    """The quantization and the integer graph the front end reads from its ONNX."""
    x = check_calibration(graph, calibration)
    net = quantize_graph(graph, tensor_ranges(graph, x), PtqOptions(), "net")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.onnx"
        path.write_bytes(net.onnx)
        return net, load_integer_onnx(path).graph


def differences(graph: g.Graph, calibration: np.ndarray, x: np.ndarray) -> dict[str, np.ndarray]:
    """Per float tensor the integer network stores: the positions (a boolean mask) where its
    codes differ from the fake-quantized network's on `x`; also `_values` (both sides)."""
    net, integer = quantized(graph, calibration)
    fake = run(fake_quantized(graph, net), x.astype(np.float64))
    q_in = net.tensors[graph.inputs[0]]
    codes = np.clip(np.floor(x / q_in.scale + 0.5), q_in.lo, q_in.hi).astype(np.int64)
    ints = run(integer, codes)
    out: dict[str, np.ndarray] = {}
    for tensor, q in net.tensors.items():
        assert q.name in ints, f"the integer graph has no tensor {q.name}"
        out[tensor] = fake[tensor + CODES] != ints[q.name]
    out["_net"], out["_ints"] = net, ints  # type: ignore[assignment]
    return out


def is_tie(graph: g.Graph, diff: dict, tensor: str) -> np.ndarray:
    """Whether the requantization of the layer producing `tensor` lands exactly on .5 (where
    float64 evaluation of the fake-quantized network may round either way)."""
    net, ints = diff["_net"], diff["_ints"]
    node = graph.producer(tensor)
    layer = net.layers[node.name]
    acc = ints[f"{tensor}_acc"]
    shape = (1, -1) + (1,) * (acc.ndim - 2)
    total = acc * layer.mul.reshape(shape) + layer.add.reshape(shape)
    half = 1 << (layer.shift - 1)
    return total % (2 * half) == half
