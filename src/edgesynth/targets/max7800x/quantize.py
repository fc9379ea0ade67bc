"""Post-training quantization of a float graph to what MAX7800x computes.

The chip's number format (the hardware documentation; ARITHMETIC.md):
- data: signed 8-bit, one scale per tensor (real value = code x scale). Operators that pass codes
  through unchanged (pooling, flatten, reshape, concatenation, element-wise add/sub, ReLU) need
  their inputs and outputs on one scale: those tensors share the largest calibrated range.
- weights: signed 8-bit; per layer, the output is clip(round_half_up(acc x 2**(shift-7))), so the
  weight scale is s_w = 2**(shift-7) x s_out / s_in. The shift is the smallest that keeps every
  weight within 127 codes (the most weight resolution), limited to the device's shift range.
- bias: signed 8-bit added as bias x 128 accumulator units (`bias_div`).
- a layer whose accumulator is a graph output keeps it 32 bits wide (no shift, no rounding): its
  weights use the full 8 bits and the output's scale is s_in x s_w.
- average pooling truncates toward zero.
Calibration runs the float graph's own reference (`sim.graph`) on the given batch; the ranges
are the largest magnitudes seen.
"""

from __future__ import annotations

import math

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.ir.unionfind import UnionFind
from edgesynth.sim.graph import evaluate
from edgesynth.targets.max7800x.device import Device

QMAX = 127
_SHARE_SCALE = (g.Pool, g.GlobalPool, g.Flatten, g.Reshape, g.Concat, g.Slice, g.Activation, g.Clip)


def calibrate(graph: g.Graph, data: np.ndarray, chunk: int = 64) -> dict[str, float]:
    """The largest |value| of every tensor over the calibration batch (run in chunks)."""
    maxabs: dict[str, float] = {}
    name = graph.inputs[0]
    for start in range(0, len(data), chunk):
        values = {name: np.asarray(data[start : start + chunk], dtype=np.float64)}
        for node in graph.nodes:
            values[node.output] = evaluate(node, *(values[t] for t in node.inputs))
        for t, v in values.items():
            m = float(np.max(np.abs(v))) if v.size else 0.0
            maxabs[t] = max(maxabs.get(t, 0.0), m)
    return maxabs


def _check_calibration(graph: g.Graph, data: np.ndarray) -> np.ndarray:
    x = np.asarray(data)
    shape = graph.tensors[graph.inputs[0]].shape
    if x.dtype.kind not in "fiu":
        raise EdgesynthError(
            f"calibration data must be numbers, not {x.dtype}", key="--calibration"
        )
    if x.dtype.kind != "f":
        raise EdgesynthError(
            f"calibration data holds integers ({x.dtype}); pass the float inputs the model was "
            "trained on (the same scaling as in training)",
            key="--calibration",
        )
    if x.ndim != len(shape) + 1 or tuple(x.shape[1:]) != shape:
        raise EdgesynthError(
            f"calibration data has shape {x.shape}; the model takes (N, "
            f"{', '.join(map(str, shape))})",
            key="--calibration",
        )
    if len(x) == 0:
        raise EdgesynthError("calibration data holds no samples", key="--calibration")
    if not np.isfinite(x).all():
        raise EdgesynthError("calibration data holds NaN or infinite values", key="--calibration")
    return x.astype(np.float64)


def _shift_for(w_max: float, s_in: float, s_out: float, device: Device) -> int:
    if w_max == 0:
        return -device.max_output_shift
    shift = math.ceil(math.log2(w_max / QMAX * s_in / s_out)) + 7
    return int(min(max(shift, -device.max_output_shift + 1), device.max_output_shift))


def quantize(graph: g.Graph, calibration: np.ndarray, device: Device) -> g.Graph:
    """The integer graph MAX7800x computes for the float `graph` (see the module docstring)."""
    for node in graph.nodes:
        if isinstance(node, g.BatchNorm):
            raise EdgesynthError(
                f"operator `{node.name}`: fold batch normalization into the convolution first "
                "(`ir.passes.fold_batchnorm`)"
            )
    data = _check_calibration(graph, calibration)
    maxabs = calibrate(graph, data)
    # Host-side softmax at the end: the chip returns its input.
    outputs = list(graph.outputs)
    nodes = list(graph.nodes)
    warnings: list[str] = []
    while nodes and isinstance(nodes[-1], g.Softmax) and nodes[-1].output in outputs:
        soft = nodes.pop()
        outputs[outputs.index(soft.output)] = soft.inputs[0]
        warnings.append(f"`{soft.name}` ({soft.op}) runs on the host, after the chip's output")
    for node in nodes:
        if isinstance(node, g.Softmax):
            raise EdgesynthError(
                f"{node.source or f'operator `{node.name}`'} is a softmax in the middle of the "
                f"network: the {device.name} runs softmax only on its CPU, after the last "
                "layer (the project's softmax.c); make it the network's last operation, or "
                "remove it",
                file=graph.source or None,
            )

    scales = UnionFind()  # tensors that must share one scale
    for node in nodes:
        if isinstance(node, _SHARE_SCALE) or (
            isinstance(node, g.Eltwise) and node.kind in ("add", "sub")
        ):
            for t in node.inputs:
                scales.union(node.output, t)
        elif isinstance(node, g.Activation) and node.kind != "relu":
            raise EdgesynthError(f"operator `{node.name}`: MAX7800x has no {node.kind} activation")
    group_max: dict[str, float] = {}
    for t, m in maxabs.items():
        root = scales.find(t)
        group_max[root] = max(group_max.get(root, 0.0), m)
    for node in nodes:  # a clip bounds its tensor: that range mapped to 127 codes makes the
        if isinstance(node, g.Clip) and node.lo <= 0 < node.hi:  # chip's saturation the clip
            group_max[scales.find(node.output)] = max(float(node.hi), -float(node.lo))

    def scale(t: str) -> float:
        m = group_max.get(scales.find(t), 0.0)
        return m / QMAX if m > 0 else 1.0 / QMAX

    wide = {n.output for n in nodes if isinstance(n, g.Conv | g.Linear) and n.output in outputs}
    out = g.Graph(name=graph.name, source=graph.source)
    out.warnings = warnings
    in_name = graph.inputs[0]
    out.add_input(in_name, graph.tensors[in_name].shape, g.QType(8, True, scale(in_name)))
    acc_scale: dict[str, float] = {}

    def qtype(t: str) -> g.QType:
        if t in acc_scale:
            return g.QType(32, True, acc_scale[t])
        return g.QType(8, True, scale(t))

    for node in nodes:
        shape = graph.tensors[node.output].shape
        if isinstance(node, g.Conv | g.Linear):
            s_in = qtype(node.inputs[0]).scale or 1.0
            w = np.asarray(node.weight, dtype=np.float64)
            w_max = float(np.abs(w).max(initial=0.0))
            if node.output in wide:
                s_w = w_max / QMAX if w_max > 0 else 1.0
                shift = 0
            else:
                shift = _shift_for(w_max, s_in, scale(node.output), device)
                s_w = 2.0 ** (shift - 7) * scale(node.output) / s_in
            w_q = np.clip(np.floor(w / s_w + 0.5), -128, 127).astype(np.int64)
            clipped = int(np.sum(np.abs(w / s_w) > 127.5))
            if clipped:
                warnings.append(
                    f"`{node.name}`: {clipped} weights saturate at 8 bits (the output shift "
                    f"reached its limit {shift - 7:+d})"
                )
            bias = None
            if node.bias is not None:
                unit = s_in * s_w * device.bias_div
                b = np.floor(np.asarray(node.bias, dtype=np.float64) / unit + 0.5)
                if np.any(np.abs(b) > 127.5):
                    warnings.append(f"`{node.name}`: bias values saturate at 8 bits")
                bias = np.clip(b, -128, 127).astype(np.int64) * device.bias_div
            acc_name = node.output if node.output in wide else out.unique_name(f"{node.name}/acc")
            params = {k: v for k, v in vars(node).items() if k not in ("weight", "bias", "outputs")}
            q = type(node)(**{**params, "weight": w_q, "bias": bias, "outputs": [acc_name]})
            if node.output in wide:
                acc_scale[node.output] = s_in * s_w
                out.add(q, shape, qtype(node.output))
                continue
            out.add(q, shape, g.QType(32, True, s_in * s_w))
            e = shift - 7
            mul, div = (1 << e, 1) if e >= 0 else (1, 1 << -e)
            rq = g.Requantize(
                name=out.unique_name(f"{node.name}/requantize"),
                inputs=[acc_name],
                outputs=[node.output],
                mul=mul,
                div=div,
                rounding="half_up",
                source=node.source,
            )
            out.add(rq, shape, qtype(node.output))
        elif isinstance(node, g.Pool):
            if node.kind == "avg" and node.count_include_pad is False and any(node.pads):
                raise EdgesynthError(f"operator `{node.name}`: padded average pooling")
            q = g.Pool(**{**vars(node), "method": "trunc" if node.kind == "avg" else node.method})
            out.add(q, shape, qtype(node.output))
        elif isinstance(node, g.GlobalPool):
            in_shape = graph.tensors[node.inputs[0]].shape
            q = g.Pool(
                name=node.name,
                inputs=node.inputs,
                outputs=node.outputs,
                kind=node.kind,
                kernel=tuple(in_shape[1:]),
                stride=tuple(in_shape[1:]),
                dilation=(1,) * (len(in_shape) - 1),
                pads=(0,) * (2 * (len(in_shape) - 1)),
                method="trunc",
                source=node.source,
            )
            out.add(q, shape, qtype(node.output))
        elif isinstance(node, g.Eltwise):
            if node.kind not in ("add", "sub"):
                raise EdgesynthError(f"operator `{node.name}`: MAX7800x has no float `{node.kind}`")
            raw = out.unique_name(f"{node.name}/sum")
            out.add(
                g.Eltwise(
                    name=node.name,
                    inputs=node.inputs,
                    outputs=[raw],
                    kind=node.kind,
                    source=node.source,
                ),
                shape,
                g.QType(32, True, scale(node.output)),
            )
            clip = g.Clip(
                name=out.unique_name(f"{node.name}/clip"),
                inputs=[raw],
                outputs=[node.output],
                lo=-128,
                hi=127,
            )
            out.add(clip, shape, qtype(node.output))
        elif isinstance(node, g.Activation | g.Flatten | g.Reshape | g.Concat | g.Slice):
            out.add(node, shape, qtype(node.output))
        elif isinstance(node, g.Clip) and node.lo <= 0:
            # The chip saturates every output at its 8-bit range (set to the clip's range
            # above); a clip at zero is its ReLU.
            if node.lo == 0:
                relu = g.Activation(
                    name=node.name,
                    inputs=node.inputs,
                    outputs=node.outputs,
                    kind="relu",
                    source=node.source,
                )
                out.add(relu, shape, qtype(node.output))
            else:
                out.add(
                    g.Reshape(
                        name=node.name,
                        inputs=node.inputs,
                        outputs=node.outputs,
                        shape=shape,
                        source=node.source,
                    ),
                    shape,
                    qtype(node.output),
                )
        else:
            raise EdgesynthError(
                f"operator `{node.name}` ({node.op}) has no MAX7800x equivalent"
                + (f" ({node.source})" if node.source else ""),
                file=graph.source or None,
            )
    out.outputs = outputs
    out.validate()
    return out
