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
are the largest magnitudes seen. The steps are the one quantization pass's (`quant.calibrate`,
`ir.ties`, `ir.numformat`) over the device's `number_format`.
"""

from __future__ import annotations

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.ir.numformat import NumberFormat, fit_shift, step
from edgesynth.ir.ties import graph_links, group_maxabs, tie
from edgesynth.ir.unionfind import UnionFind
from edgesynth.sim.observe import maxabs as range_maxabs
from edgesynth.sim.observe import observe
from edgesynth.targets.max7800x.device import Device

QMAX = 127


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
    return fit_shift(w_max / QMAX * s_in / s_out, device.number_format) + 7


def quantize(graph: g.Graph, calibration: np.ndarray, device: Device) -> g.Graph:
    """The integer graph MAX7800x computes for the float `graph` (see the module docstring)."""
    nodes, outputs, warnings = _host_softmax(graph)
    _raise_refusals(graph, nodes, device)
    data = _check_calibration(graph, calibration)
    fmt = device.number_format
    maxabs = range_maxabs(observe(graph, data, fmt.calibration_chunk))
    q = _Quantizer(graph, _shared_scales(nodes, maxabs, fmt), nodes, outputs, device, warnings)
    for node in nodes:
        q.add(node)
    q.out.outputs = outputs
    q.out.validate()
    return q.out


def _host_softmax(graph: g.Graph) -> tuple[list[g.Node], list[str], list[str]]:
    """The nodes the chip runs, the outputs it returns, and warnings: a softmax at the end runs
    on the host (the chip returns its input); one in the middle is refused (`_refusal`)."""
    outputs = list(graph.outputs)
    nodes = list(graph.nodes)
    warnings: list[str] = []
    while nodes and isinstance(nodes[-1], g.Softmax) and nodes[-1].output in outputs:
        soft = nodes.pop()
        outputs[outputs.index(soft.output)] = soft.inputs[0]
        warnings.append(f"`{soft.name}` ({soft.op}) runs on the host, after the chip's output")
    return nodes, outputs, warnings


def _raise_refusals(graph: g.Graph, nodes: list[g.Node], device: Device) -> None:
    """Every operator of `nodes` the chip cannot run, at once (the one alone as it is)."""
    refused = [e for e in (_refusal(graph, node, device) for node in nodes) if e]
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise MultipleErrors(refused)


_CHIP_NODES = (g.Conv, g.Linear, g.Pool, g.GlobalPool, g.Eltwise, g.Activation, g.Flatten)
_CHIP_NODES += (g.Reshape, g.Concat, g.Slice)


def _refusal(graph: g.Graph, node: g.Node, device: Device) -> EdgesynthError | None:
    """Why the chip cannot run `node` (None: it can; a softmax here is one in the middle)."""
    if isinstance(node, g.BatchNorm):
        return EdgesynthError(
            f"operator `{node.name}`: fold batch normalization into the convolution first "
            "(`ir.passes.fold_batchnorm`)"
        )
    if isinstance(node, g.Softmax):
        return EdgesynthError(
            f"{node.source or f'operator `{node.name}`'} is a softmax in the middle of the "
            f"network: the {device.name} runs softmax only on its CPU, after the last "
            "layer (the project's softmax.c); make it the network's last operation, or "
            "remove it",
            file=graph.source or None,
        )
    if isinstance(node, g.Activation) and node.kind != "relu":
        return EdgesynthError(f"operator `{node.name}`: MAX7800x has no {node.kind} activation")
    if (
        isinstance(node, g.Pool)
        and node.kind == "avg"
        and node.count_include_pad is False
        and any(node.pads)
    ):
        return EdgesynthError(f"operator `{node.name}`: padded average pooling")
    if isinstance(node, g.Eltwise) and node.kind not in ("add", "sub"):
        return EdgesynthError(f"operator `{node.name}`: MAX7800x has no float `{node.kind}`")
    if isinstance(node, _CHIP_NODES) or (isinstance(node, g.Clip) and node.lo <= 0):
        return None
    return EdgesynthError(
        f"operator `{node.name}` ({node.op}) has no MAX7800x equivalent"
        + (f" ({node.source})" if node.source else ""),
        file=graph.source or None,
    )


class _Scales:
    """One scale per group of tensors that must share it: the group's largest calibrated
    magnitude (or a clip's range) mapped to 127 codes."""

    def __init__(self, groups: UnionFind, group_max: dict[str, float], fmt: NumberFormat) -> None:
        self.groups = groups
        self.group_max = group_max
        self.fmt = fmt

    def __call__(self, t: str) -> float:
        m = self.group_max.get(self.groups.find(t), 0.0)
        return step(m, self.fmt, self.fmt.activation_bits[0])


def _shared_scales(nodes: list[g.Node], maxabs: dict[str, float], fmt: NumberFormat) -> _Scales:
    """Operators that pass codes through (the format's `ties`) put their inputs and output in
    one group."""
    groups = tie(graph_links(nodes, fmt.ties))  # tensors that must share one scale
    group_max = group_maxabs(groups, maxabs)
    for node in nodes:  # a clip bounds its tensor: that range mapped to 127 codes makes the
        if isinstance(node, g.Clip) and node.lo <= 0 < node.hi:  # chip's saturation the clip
            group_max[groups.find(node.output)] = max(float(node.hi), -float(node.lo))
    return _Scales(groups, group_max, fmt)


class _Quantizer:
    """Builds the integer graph node by node."""

    def __init__(
        self,
        graph: g.Graph,
        scale: _Scales,
        nodes: list[g.Node],
        outputs: list[str],
        device: Device,
        warnings: list[str],
    ) -> None:
        self.graph = graph
        self.scale = scale
        self.device = device
        self.warnings = warnings
        # a layer whose accumulator is a graph output keeps it 32 bits wide
        self.wide = {
            n.output for n in nodes if isinstance(n, g.Conv | g.Linear) and n.output in outputs
        }
        self.out = g.Graph(name=graph.name, source=graph.source)
        self.out.warnings = warnings
        in_name = graph.inputs[0]
        self.out.add_input(in_name, graph.tensors[in_name].shape, g.QType(8, True, scale(in_name)))
        self.acc_scale: dict[str, float] = {}

    def qtype(self, t: str) -> g.QType:
        if t in self.acc_scale:
            return g.QType(32, True, self.acc_scale[t])
        return g.QType(8, True, self.scale(t))

    def add(self, node: g.Node) -> None:
        shape = self.graph.tensors[node.output].shape
        if isinstance(node, g.Conv | g.Linear):
            self.weighted(node, shape)
        elif isinstance(node, g.Pool):
            q = g.Pool(**{**vars(node), "method": "trunc" if node.kind == "avg" else node.method})
            self.out.add(q, shape, self.qtype(node.output))
        elif isinstance(node, g.GlobalPool):
            self.out.add(self._global_pool(node), shape, self.qtype(node.output))
        elif isinstance(node, g.Eltwise):
            self.eltwise(node, shape)
        elif isinstance(node, g.Activation | g.Flatten | g.Reshape | g.Concat | g.Slice):
            self.out.add(node, shape, self.qtype(node.output))
        elif isinstance(node, g.Clip) and node.lo <= 0:
            self.out.add(_clip_as_saturation(node, shape), shape, self.qtype(node.output))
        else:  # `_raise_refusals` refused it
            raise AssertionError(f"operator `{node.name}` ({node.op}) was not refused")

    def weighted(self, node: g.Conv | g.Linear, shape: tuple[int, ...]) -> None:
        """A convolution or linear layer: 8-bit weights and bias, then the output shift (a
        Requantize), except where its accumulator is a graph output."""
        s_in = self.qtype(node.inputs[0]).scale or 1.0
        w = np.asarray(node.weight, dtype=np.float64)
        s_w, shift = self._weight_scale(node, w, s_in)
        w_q = np.clip(np.floor(w / s_w + 0.5), -128, 127).astype(np.int64)
        clipped = int(np.sum(np.abs(w / s_w) > 127.5))
        if clipped:
            self.warnings.append(
                f"`{node.name}`: {clipped} weights saturate at 8 bits (the output shift "
                f"reached its limit {shift - 7:+d})"
            )
        bias = self._bias(node, s_in * s_w)
        wide = node.output in self.wide
        acc_name = node.output if wide else self.out.unique_name(f"{node.name}/acc")
        params = {k: v for k, v in vars(node).items() if k not in ("weight", "bias", "outputs")}
        q = type(node)(**{**params, "weight": w_q, "bias": bias, "outputs": [acc_name]})
        if wide:
            self.acc_scale[node.output] = s_in * s_w
            self.out.add(q, shape, self.qtype(node.output))
            return
        self.out.add(q, shape, g.QType(32, True, s_in * s_w))
        e = shift - 7
        mul, div = (1 << e, 1) if e >= 0 else (1, 1 << -e)
        rq = g.Requantize(
            name=self.out.unique_name(f"{node.name}/requantize"),
            inputs=[acc_name],
            outputs=[node.output],
            mul=mul,
            div=div,
            rounding="half_up",
            source=node.source,
        )
        self.out.add(rq, shape, self.qtype(node.output))

    def _weight_scale(self, node: g.Node, w: np.ndarray, s_in: float) -> tuple[float, int]:
        """(weight scale, output shift): the full 8 bits and no shift for a wide output; else
        the smallest shift that keeps every weight within 127 codes."""
        w_max = float(np.abs(w).max(initial=0.0))
        if node.output in self.wide:
            return (w_max / QMAX if w_max > 0 else 1.0), 0
        s_out = self.scale(node.output)
        shift = _shift_for(w_max, s_in, s_out, self.device)
        return 2.0 ** (shift - 7) * s_out / s_in, shift

    def _bias(self, node: g.Conv | g.Linear, s_acc: float) -> np.ndarray | None:
        """The 8-bit bias in accumulator units (x bias_div), saturated with a warning."""
        if node.bias is None:
            return None
        unit = s_acc * self.device.bias_div
        b = np.floor(np.asarray(node.bias, dtype=np.float64) / unit + 0.5)
        if np.any(np.abs(b) > 127.5):
            self.warnings.append(f"`{node.name}`: bias values saturate at 8 bits")
        return np.clip(b, -128, 127).astype(np.int64) * self.device.bias_div

    def _global_pool(self, node: g.GlobalPool) -> g.Pool:
        """A global pool as a pool whose window is the whole input (average truncated)."""
        in_shape = self.graph.tensors[node.inputs[0]].shape
        return g.Pool(
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

    def eltwise(self, node: g.Eltwise, shape: tuple[int, ...]) -> None:
        """An addition or subtraction: the exact sum, then the chip's 8-bit saturation."""
        raw = self.out.unique_name(f"{node.name}/sum")
        total = g.Eltwise(
            name=node.name, inputs=node.inputs, outputs=[raw], kind=node.kind, source=node.source
        )
        self.out.add(total, shape, g.QType(32, True, self.scale(node.output)))
        clip = g.Clip(
            name=self.out.unique_name(f"{node.name}/clip"),
            inputs=[raw],
            outputs=[node.output],
            lo=-128,
            hi=127,
        )
        self.out.add(clip, shape, self.qtype(node.output))


def _clip_as_saturation(node: g.Clip, shape: tuple[int, ...]) -> g.Node:
    """The chip saturates every output at its 8-bit range (set to the clip's range by
    `_shared_scales`); a clip at zero is its ReLU, any other clip nothing more."""
    if node.lo == 0:
        return g.Activation(
            name=node.name,
            inputs=node.inputs,
            outputs=node.outputs,
            kind="relu",
            source=node.source,
        )
    return g.Reshape(
        name=node.name, inputs=node.inputs, outputs=node.outputs, shape=shape, source=node.source
    )
