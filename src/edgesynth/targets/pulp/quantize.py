"""A float model for gap8: calibrate, quantize to the RequantShift dialect (`quant.requant_onnx`),
and read the result back through the integer ONNX front end, so the graph the target tiles is
the one `edgesynth pulp compile` makes of the exported file, byte for byte."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.graph import Graph

# `--option` keys of the quantizer, and how each value is read.
PTQ_KEYS = ("activations", "percentile", "weights", "weight_bits", "output_bits", "network_name")


def ptq_options(options: dict[str, Any]) -> Any:
    from edgesynth.quant.requant_shift import PtqOptions

    opts = PtqOptions()
    for key in ("activations", "weights"):
        if key in options:
            setattr(opts, key, str(options[key]))
    for key in ("weight_bits", "output_bits"):
        if key in options:
            setattr(opts, key, _number(options[key], key, int))
    if "percentile" in options:
        opts.percentile = _number(options["percentile"], "percentile", float)
        if "activations" not in options:
            opts.activations = "percentile"
    opts.check()
    return opts


def _number(value: object, key: str, kind: type) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise EdgesynthError(
            f"{key}={value}: expected {'an integer' if kind is int else 'a number'}",
            key=f"--option {key}",
        ) from None


def network_name(graph: Graph, options: dict[str, Any]) -> str:
    """The integer network's name: `network_name`, else the float model file's name."""
    name = options.get("network_name") or Path(str(graph.meta.get("path", graph.name))).stem
    return str(name)


def quantize(graph: Graph, calibration: np.ndarray, options: dict[str, Any]) -> tuple[Graph, bytes]:
    """The integer graph of float `graph` calibrated on `calibration`, and the bytes of its
    RequantShift ONNX file."""
    from edgesynth.frontends.onnx_int import load_integer_onnx
    from edgesynth.quant.calibrate import check_calibration, tensor_ranges
    from edgesynth.quant.requant_onnx import quantize_graph

    opts = ptq_options(options)
    x = check_calibration(graph, calibration)
    ranges = tensor_ranges(graph, x, opts.activations, opts.percentile)
    name = network_name(graph, options)
    data = quantize_graph(graph, ranges, opts, name).onnx
    with tempfile.TemporaryDirectory(prefix="edgesynth-ptq-") as tmp:
        path = Path(tmp) / f"{name}.onnx"
        path.write_bytes(data)
        net = load_integer_onnx(path)
    net.graph.source = f"{graph.source or graph.name} (quantized, {net.dialect})"
    return net.graph, data
