"""Float graph -> the xDNN program: fusion into engine commands, calibration, quantization,
and the integer graph the engine computes.

What the engine runs (one command each):
- Conv (+ a BatchNormalization folded into it) (+ Relu): XNConv, weights and activations in
  `bits` (8 or 16) with per-output-channel (pre-shift, scale, post-shift) and a 16-bit bias
  added after the post-shift (seed), on a 48-bit accumulator;
- Gemm/MatMul after a flatten (+ Relu): XNConv whose kernel covers the whole input, so the
  fully-connected layer runs on the engine;
- MaxPool (+ a Relu on non-negative data, which changes nothing): XNMaxPool;
- AveragePool without padding, GlobalAveragePool: XNAvgPool (fully-connected mode when the
  window is the whole image, as the seed requires for GoogLeNet's last pool);
- Add of two tensors (+ Relu): XNEltwise (saturating 16-bit add);
- Concat: no command; the branches write side by side in IMEM (see imem.py).
A trailing Softmax/LogSoftmax runs on the host.

Scales: tensors joined by an Add, a max pool or a reshape share one scale (union-find over the
graph), the maximum of their calibration ranges; the threshold of a tensor is its largest
magnitude over the calibration batch, its step th / (2**(bits - 1) - 1) (ml-suite's sf). The
branches of a Concat keep their own steps when only convolutions and fully-connected layers
read it (directly or through max pools): the readers fold each input channel's step into their
weights. Other concatenations share one step with their branches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgesynth.cores import side_by_side_threads
from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Matcher, Pattern, pattern
from edgesynth.ir.intrange import int_range
from edgesynth.ir.numformat import threshold
from edgesynth.ir.ties import group_maxabs, tie
from edgesynth.ir.unionfind import UnionFind
from edgesynth.sim.observe import maxabs, observe
from edgesynth.targets.base import HostDense
from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.layers import XLayer
from edgesynth.targets.xdnn.quantfile import (
    QuantFile,
    QuantLayer,
    Triples,
    edgesynth_policy,
    solve,
    step,
)

HOST_TAILS = (g.Softmax,)
# The calibration run's threads where a core is idle: independent branches (GoogLeNet's
# inception modules) computed side by side, each product the same BLAS call as in one thread
# (the same ranges).
CALIBRATION_THREADS = 2
VIEW_OPS = (g.Flatten, g.Reshape)

# What one engine command runs (`ir.fusion`), by the command's kind.
FUSION_PATTERNS: dict[str, Pattern] = {
    p.name: p
    for p in (
        pattern("conv", "conv [batchnorm] [activation:relu]"),
        pattern("fc", "linear [activation:relu]"),
        pattern("maxpool", "pool:max [activation:relu]"),
        pattern("avgpool", "pool:avg"),
        pattern("global_avgpool", "global_pool:avg"),
        pattern("add", "eltwise:add [activation:relu]"),
        pattern("concat", "concat"),
    )
}


@dataclass
class Lowered:
    graph: g.Graph  # the integer graph
    layers: list[XLayer]
    concats: dict[str, list[str]]  # concatenated tensor -> its branches, in channel order
    input_name: str
    output_name: str  # the stored tensor the engine uploads
    output_shape: tuple[int, ...]  # as the float model returns it
    input_step: float
    output_step: float
    quant: QuantFile
    host_tail: str | None = None  # softmax | logsoftmax
    warnings: list[str] = field(default_factory=list)
    host_layers: list[HostDense] = field(default_factory=list)  # trailing FCs, on the host


def _err(node: g.Node, message: str) -> EdgesynthError:
    where = f" ({node.source})" if node.source else ""
    return EdgesynthError(f"node `{node.name}`{where}: {message}")


def _fold_bn(weight: np.ndarray, bias: np.ndarray, bn: g.BatchNorm) -> tuple[np.ndarray, ...]:
    k = bn.gamma / np.sqrt(bn.var + bn.eps)
    w = weight * k.reshape(-1, *([1] * (weight.ndim - 1)))
    return w, (bias - bn.mean) * k + bn.beta


def lower(
    graph: g.Graph, calibration: np.ndarray, bits: int = 8, fc_on_host: bool = False
) -> Lowered:
    """Fuse, calibrate and quantize a float graph for the engine. With `fc_on_host`, the
    trailing fully-connected layers run on the host in float, as ml-suite's deployment runs
    them ("run fully connected layers on the CPU"), on the engine's dequantized output."""
    if bits not in dev.BITS:
        raise EdgesynthError(f"--bits must be 8 or 16, not {bits}", key="--bits")
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise EdgesynthError(
            f"{graph.name}: xDNN programs take one input and give one output "
            f"({len(graph.inputs)} inputs, {len(graph.outputs)} outputs)"
        )
    graph.validate()
    x_name = graph.inputs[0]
    in_shape = graph.tensors[x_name].shape
    if len(in_shape) != 3:
        raise EdgesynthError(f"{graph.name}: the input must be an image (C, H, W), not {in_shape}")
    calib = np.asarray(calibration, dtype=np.float64)
    if calib.ndim != 4 or tuple(calib.shape[1:]) != in_shape:
        raise EdgesynthError(
            f"the calibration data must be N x {'x'.join(map(str, in_shape))}, not "
            f"{'x'.join(map(str, calib.shape))}",
            key="--calibration",
        )
    fused = _fuse(graph)
    host: list[HostDense] = []
    if fc_on_host:
        fused, host = _host_tail_layers(graph, fused)
    chunk = dev.NUMBER_FORMAT.calibration_chunk
    threads = side_by_side_threads(CALIBRATION_THREADS)
    ranges = maxabs(observe(graph, calib, chunk, threads=threads))
    low = _quantize(graph, fused, ranges, bits, keep_shape=bool(host))
    low.host_layers = host
    return low


def _host_tail_layers(
    graph: g.Graph, fused_info: tuple[list[_Fused], dict[str, str], str | None, str]
) -> tuple[tuple[list[_Fused], dict[str, str], str | None, str], list[HostDense]]:
    """The fully-connected layers that end the network, taken off the engine's list."""
    fused, alias, host_tail, final = fused_info
    fused = list(fused)
    host: list[HostDense] = []
    while fused and fused[-1].kind == "fc" and fused[-1].output == final:
        f = fused.pop()
        assert f.weight is not None and f.bias is not None
        host.insert(0, HostDense(f.weight, f.bias, f.relu))
        final = f.inputs[0]
    if not fused:
        raise EdgesynthError(
            f"{graph.name}: with the fully-connected layers on the host nothing is left for "
            "the engine"
        )
    return (fused, alias, host_tail, final), host


# -- fusion ---------------------------------------------------------------------------------
@dataclass
class _Fused:
    kind: str  # conv | fc | maxpool | avgpool | add | concat | view
    head: g.Node
    inputs: list[str]  # float tensors read (after views are resolved)
    output: str  # the float tensor that is stored (after fused activation)
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    relu: bool = False
    sources: list[str] = field(default_factory=list)


def _fuse(graph: g.Graph) -> tuple[list[_Fused], dict[str, str], str | None, str]:
    """Engine commands over float tensors; `alias` maps view tensors to what they view."""
    fuser = _Fuser(graph)
    for node in graph.nodes:
        if node.name not in fuser.done:
            fuser.done.add(node.name)
            fuser.node(node)
    if fuser.errors:
        raise MultipleErrors(fuser.errors)
    return fuser.out, fuser.alias, fuser.host_tail, fuser.real(fuser.final)


class _Fuser:
    """Walks the float graph in order, folding each node's BatchNormalization and Relu into its
    engine command (`FUSION_PATTERNS`); the nodes taken so are marked `done`."""

    def __init__(self, graph: g.Graph) -> None:
        self.graph = graph
        self.matcher = Matcher(graph)
        self.alias: dict[str, str] = {}
        self.done: set[str] = set()
        self.out: list[_Fused] = []
        self.errors: list[EdgesynthError] = []
        self.host_tail: str | None = None
        self.final = graph.outputs[0]

    def real(self, t: str) -> str:
        """The stored tensor that `t` views."""
        while t in self.alias:
            t = self.alias[t]
        return t

    def chain(self, head: g.Node, kind: str) -> list[g.Node]:
        """The operators the command of `kind` headed by `head` takes after it (its pattern),
        marked `done`."""
        rest = self.matcher.follow(head, FUSION_PATTERNS[kind], self.done)[1:]
        self.done.update(n.name for n in rest)
        return rest

    def node(self, node: g.Node) -> None:
        if isinstance(node, g.Conv):
            self.conv(node)
        elif isinstance(node, g.Linear):
            self.linear(node)
        elif isinstance(node, g.Pool):
            self.pool(node)
        elif isinstance(node, g.GlobalPool):
            self.global_pool(node)
        elif isinstance(node, g.Eltwise):
            self.eltwise(node)
        elif isinstance(node, g.Concat):
            self.append("concat", node, self.chain(node, "concat"))
        elif isinstance(node, VIEW_OPS):
            self.alias[node.output] = node.inputs[0]
        elif isinstance(node, g.Activation) and node.kind == "relu":
            self.errors.append(
                _err(
                    node,
                    "a Relu must follow a Conv, Gemm, MaxPool or Add to run on "
                    "xDNN (it is fused into that command)",
                )
            )
        elif isinstance(node, HOST_TAILS) and node.output == self.final:
            self.host_tail = "logsoftmax" if node.log else "softmax"  # type: ignore[attr-defined]
            self.final = node.inputs[0]
        else:
            self.errors.append(_err(node, f"operator `{node.op}` does not run on xDNN"))

    def conv(self, node: g.Conv) -> None:
        """Conv (+ BatchNormalization, folded into its weights) (+ Relu)."""
        if node.rank != 2 or node.transposed or node.groups != 1:
            self.errors.append(_err(node, "only plain 2-D convolutions run on xDNN"))
            return
        w, b = _float_weights(node)
        rest = self.chain(node, "conv")
        for bn in rest:
            if isinstance(bn, g.BatchNorm):
                w, b = _fold_bn(w, b, bn)
        self.append("conv", node, rest, w, b)

    def linear(self, node: g.Linear) -> None:
        """Gemm/MatMul (+ Relu)."""
        w, b = _float_weights(node)
        self.append("fc", node, self.chain(node, "fc"), w, b)

    def pool(self, node: g.Pool) -> None:
        """MaxPool (+ Relu) or AveragePool."""
        kind = "maxpool" if node.kind == "max" else "avgpool"
        # a Relu after a max pool is checked later: the pool's input must be non-negative
        self.append(kind, node, self.chain(node, kind))

    def global_pool(self, node: g.GlobalPool) -> None:
        if node.kind != "avg":
            self.errors.append(_err(node, "global max pooling does not run on xDNN"))
            return
        self.append("avgpool", node, self.chain(node, "global_avgpool"))

    def eltwise(self, node: g.Eltwise) -> None:
        """A two-input Add (+ Relu)."""
        if node.kind != "add" or len(node.inputs) != 2:
            self.errors.append(
                _err(
                    node,
                    f"element-wise `{node.kind}` of {len(node.inputs)} "
                    "inputs does not run on xDNN (two-input Add does)",
                )
            )
            return
        self.append("add", node, self.chain(node, "add"))

    def append(
        self,
        kind: str,
        head: g.Node,
        rest: list[g.Node],
        weight: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> None:
        """One engine command: `head` and the operators it fused (`rest`)."""
        relu = any(isinstance(n, g.Activation) for n in rest)
        out = rest[-1].output if rest else head.output
        inputs = [self.real(i) for i in head.inputs]
        srcs = [head.name] + [n.name for n in rest]
        self.out.append(_Fused(kind, head, inputs, out, weight, bias, relu, srcs))


def _float_weights(node: g.Conv | g.Linear) -> tuple[np.ndarray, np.ndarray]:
    """The weights and the bias (zeros when there is none) in float64 (the node's own arrays
    where they are float64 already: read, never written)."""
    w = np.asarray(node.weight, dtype=np.float64)
    b = np.asarray(node.bias, dtype=np.float64) if node.bias is not None else np.zeros(len(w))
    return w, b


# -- quantization ---------------------------------------------------------------------------
def _per_branch_concats(fused: list[_Fused], final: str) -> set[str]:
    """Concatenations whose branches may keep their own steps.

    A branch with a narrow range stored at the step of the widest branch loses most of its
    levels. When every reader of the concatenated tensor (directly, or through max pools, which
    act channel by channel) is a convolution or a fully-connected layer, each input channel's
    step can be folded into the reader's weights: `w[o, c] * step[c] / step_max` is an exact
    rewrite of the float layer, quantized per output channel as usual. Anything else (an Add,
    an average pool, another concatenation, the network output) needs one step."""
    readers: dict[str, list[_Fused]] = {}
    for f in fused:
        for t in f.inputs:
            readers.setdefault(t, []).append(f)

    def folds(t: str) -> bool:
        if t == final or not readers.get(t):
            return False
        for r in readers[t]:
            if r.kind == "maxpool":
                if not folds(r.output):
                    return False
            elif r.kind not in ("conv", "fc"):
                return False
        return True

    return {f.output for f in fused if f.kind == "concat" and folds(f.output)}


def _quantize(
    graph: g.Graph,
    fused_info: tuple[list[_Fused], dict[str, str], str | None, str],
    ranges: dict[str, float],
    bits: int,
    keep_shape: bool = False,
) -> Lowered:
    fused, _alias, host_tail, final = fused_info
    x_name = graph.inputs[0]
    warnings: list[str] = []
    steps = _steps(graph, fused, final, ranges, bits, warnings)
    low = _Lowering(graph, steps, bits, warnings)
    for f in fused:
        low.command(f)
    if low.errors:
        raise MultipleErrors(low.errors)
    out_shape_float = graph.tensors[graph.outputs[0]].shape
    if host_tail is not None or keep_shape:  # the host computes the rest
        out_shape_float = graph.tensors[final].shape
    low.ig.outputs = [final]
    return Lowered(
        low.ig,
        low.layers,
        low.concats,
        x_name,
        final,
        tuple(out_shape_float),
        steps.sf(x_name),
        steps.sf(final),
        QuantFile(low.qlayers, low.policy),
        host_tail,
        warnings,
    )


def _shape3(graph: g.Graph, t: str) -> tuple[int, int, int]:
    """A tensor as the engine stores it: (C, H, W), a vector as (N, 1, 1)."""
    s = graph.tensors[t].shape
    return tuple(s) if len(s) == 3 else (int(np.prod(s)), 1, 1)  # type: ignore[return-value]


@dataclass
class _Steps:
    """The quantization step of every stored tensor: tensors in one group share a threshold."""

    bits: int
    groups: UnionFind
    thresholds: dict[str, float]  # group representative -> threshold
    branch_steps: dict[str, np.ndarray]  # group of a per-branch concatenation -> channel steps

    def threshold(self, t: str) -> float:
        return self.thresholds[self.groups.find(t)]

    def sf(self, t: str) -> float:
        return float(step(self.threshold(t), self.bits))

    def qtype(self, t: str) -> g.QType:
        return g.QType(self.bits, True, self.sf(t))

    def in_channel_factor(self, t: str) -> np.ndarray | None:
        """Per input channel: its step over the tensor's (largest) step; None when uniform."""
        steps = self.branch_steps.get(self.groups.find(t))
        return None if steps is None else steps / self.sf(t)


def _steps(
    graph: g.Graph,
    fused: list[_Fused],
    final: str,
    ranges: dict[str, float],
    bits: int,
    warnings: list[str],
) -> _Steps:
    """Group the stored tensors, calibrate each group's threshold, and give each concatenation
    read only by convolutions (through max pools) its branches' own steps: the readers fold the
    per-channel steps into their weights (see _per_branch_concats)."""
    x_name = graph.inputs[0]
    per_branch = _per_branch_concats(fused, final)
    groups = _step_groups(x_name, fused, per_branch)
    stored = [x_name] + [f.output for f in fused]
    thresholds = _group_thresholds(groups, stored, ranges, bits, warnings)
    steps = _Steps(bits, groups, thresholds, {})
    for f in fused:
        if f.output in per_branch:
            branch = [np.full(_shape3(graph, m)[0], steps.sf(m)) for m in f.inputs]
            steps.branch_steps[groups.find(f.output)] = np.concatenate(branch)
    return steps


def _step_groups(x_name: str, fused: list[_Fused], per_branch: set[str]) -> UnionFind:
    """Tensors joined by an Add, a max pool or a shared-step concatenation (the format's
    `ties`): one group each. An average pool rescales."""
    links = [
        (f.output, f.inputs)
        for f in fused
        if f.kind in dev.NUMBER_FORMAT.ties and f.output not in per_branch
    ]
    return tie(links, [x_name] + [f.output for f in fused])


def _group_thresholds(
    groups: UnionFind,
    stored: list[str],
    ranges: dict[str, float],
    bits: int,
    warnings: list[str],
) -> dict[str, float]:
    """Each group's threshold: the largest magnitude of its tensors over the calibration batch
    (1 for an all-zero group, with a warning); doubled for 16 bits (the format's headroom, so
    (acc >> pre) never saturates: see quantfile.py)."""
    th = group_maxabs(groups, ranges, stored)
    for r, v in th.items():
        if v == 0.0:
            warnings.append(f"tensor group of `{r}` is zero on the whole calibration batch")
        th[r] = threshold(v, dev.NUMBER_FORMAT, bits)
    return th


class _Lowering:
    """The engine commands and the integer graph, built one fused command at a time; problems
    are collected in `errors` (the command that has one is left out)."""

    def __init__(self, graph: g.Graph, steps: _Steps, bits: int, warnings: list[str]) -> None:
        self.graph = graph
        self.steps = steps
        self.bits = bits
        self.lo, self.hi = int_range(bits, True)
        self.top = self.hi
        x_name = graph.inputs[0]
        self.ig = g.Graph(graph.name, source=graph.source)
        self.ig.add_input(x_name, _shape3(graph, x_name), steps.qtype(x_name))
        self.layers: list[XLayer] = []
        self.qlayers: list[QuantLayer] = []
        self.concats: dict[str, list[str]] = {}
        self.policy = edgesynth_policy(bits)
        self.nonneg: set[str] = set()  # tensors known to be >= 0
        self.errors: list[EdgesynthError] = []
        self.warnings = warnings

    def shape3(self, t: str) -> tuple[int, int, int]:
        return _shape3(self.graph, t)

    def command(self, f: _Fused) -> None:
        if f.kind in ("conv", "fc"):
            self.weighted(f)
        elif f.kind == "maxpool":
            self.maxpool(f)
        elif f.kind == "avgpool":
            self.avgpool(f)
        elif f.kind == "add":
            self.add(f)
        elif f.kind == "concat":
            self.concat(f)

    # -- convolutions and fully-connected layers ----------------------------------------------
    def weighted(self, f: _Fused) -> None:
        node, src, out_t = f.head, f.inputs[0], f.output
        assert f.weight is not None and f.bias is not None
        geometry = self._kernel_geometry(f)
        if geometry is None:
            return
        w, stride, pads, dil = geometry
        factor = self.steps.in_channel_factor(src)
        if factor is not None:  # branches of a concatenation at their own steps
            w = w * factor.reshape(1, -1, 1, 1)
        wq, th_w, sf_w = self._quantized_weights(w)
        trip = self._requantizer(node, src, out_t, sf_w)
        if trip is None:
            return
        bq = self._bias(node, f.bias, out_t)
        out_shape = self.shape3(out_t)
        conv_out = self.ig.unique_name(f"{out_t}.acc")
        conv = g.Conv(
            name=node.name,
            inputs=[src],
            outputs=[conv_out],
            weight=wq,
            stride=tuple(stride),
            pads=tuple(pads),
            dilation=tuple(dil),
            source=node.source,
        )
        self.ig.add(conv, (out_shape[0], out_shape[1], out_shape[2]), g.QType(dev.ACC_BITS))
        req_out = self.ig.unique_name(f"{out_t}.q") if f.relu else out_t
        requantize = g.ShiftScaleBias(
            name=f"{node.name}.requantize",
            inputs=[conv_out],
            outputs=[req_out],
            pre=trip.pre,
            scale=trip.scale,
            post=trip.post,
            bias=bq,
            bits=dev.DATA_BITS,
            acc_bits=dev.ACC_BITS,
            lo=self.lo,
            hi=self.hi,
        )
        self.ig.add(requantize, out_shape, self.steps.qtype(out_t))
        if f.relu:
            self._relu(node, req_out, out_t)
        self.layers.append(self._conv_layer(f, wq, stride, pads, dil, trip, bq))
        self.qlayers.append(self._quant_layer(node.name, src, out_t, th_w, sf_w, trip))

    def _kernel_geometry(
        self, f: _Fused
    ) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
        """The 4-D kernel with its stride, pads and dilation (a fully-connected layer's kernel
        covers its whole input); None (with an error) where xDNN cannot run it."""
        node, w = f.head, f.weight
        assert w is not None
        if f.kind == "fc":
            in_shape = self.shape3(f.inputs[0])
            c, h, wd = in_shape
            if w.shape[1] != c * h * wd:
                self.errors.append(_err(node, f"a {w.shape[1]}-input layer reads {in_shape}"))
                return None
            return w.reshape(w.shape[0], c, h, wd), (1, 1), (0, 0, 0, 0), (1, 1)
        assert isinstance(node, g.Conv)
        pads = node.pads
        if pads[0] != pads[2] or pads[1] != pads[3]:
            self.errors.append(
                _err(node, f"asymmetric padding {pads} does not run on xDNN (one padding per axis)")
            )
            return None
        return w, node.stride, pads, node.dilation

    def _quantized_weights(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(integer weights, threshold, step) with one step per output channel: floor(w / step
        + 1/2), clipped (computed in one array)."""
        th_w = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
        sf_w = np.where(th_w > 0, th_w / self.top, 1.0)
        wq = w / sf_w.reshape(-1, 1, 1, 1)
        np.add(wq, 0.5, out=wq)
        np.floor(wq, out=wq)
        np.clip(wq, self.lo, self.hi, out=wq)
        return wq.astype(np.int64), th_w, sf_w

    def _requantizer(self, node: g.Node, src: str, out_t: str, sf_w: np.ndarray) -> Triples | None:
        """The (pre, scale, post) triples taking the accumulator to the output's step; None
        (with an error) when a channel's multiplier is out of their reach."""
        mult = self.steps.sf(src) * sf_w / self.steps.sf(out_t)
        trip = solve(mult, self.policy)
        if np.all(trip.ok):
            return trip
        c = int(np.nonzero(~trip.ok)[0][0])
        self.errors.append(
            _err(
                node,
                f"output channel {c}'s requantization multiplier {mult[c]:.4g} is too large "
                "for the 8-bit scale and shifts (the output range is much narrower than the "
                "input's)",
            )
        )
        return None

    def _bias(self, node: g.Node, bias: np.ndarray, out_t: str) -> np.ndarray:
        """The 16-bit bias at the output's step. The shifts truncate: on average half a step
        low. The bias takes that half step back (rounded to the integer nearest b / sf + 1/2)."""
        braw = bias / self.steps.sf(out_t)
        bq = np.clip(np.floor(braw + 1.0), dev.BIAS_MIN, dev.BIAS_MAX).astype(np.int64)
        if np.any(np.abs(braw) > dev.BIAS_MAX + 0.5):
            self.warnings.append(f"`{node.name}`: a bias exceeds the 16-bit bias field; saturated")
        return bq

    def _relu(self, node: g.Node, inp: str, out_t: str) -> None:
        """The fused Relu of `node`, from `inp` to the stored `out_t`."""
        relu = g.Activation(name=f"{node.name}.relu", inputs=[inp], outputs=[out_t], kind="relu")
        self.ig.add(relu, self.shape3(out_t), self.steps.qtype(out_t))
        self.nonneg.add(out_t)

    def _conv_layer(
        self,
        f: _Fused,
        wq: np.ndarray,
        stride: tuple[int, ...],
        pads: tuple[int, ...],
        dil: tuple[int, ...],
        trip: Triples,
        bq: np.ndarray,
    ) -> XLayer:
        src, out_t = f.inputs[0], f.output
        return XLayer(
            "XNConv",
            f.head.name,
            [src],
            out_t,
            self.shape3(src),
            self.shape3(out_t),
            (int(wq.shape[2]), int(wq.shape[3])),
            tuple(stride),
            (pads[0], pads[1]),
            tuple(dil),
            relu=f.relu,
            weight=wq,
            pre=trip.pre,
            scale=trip.scale,
            post=trip.post,
            bias=bq,
            has_bias=True,
            sources=f.sources,
            fc=f.kind == "fc",
        )

    def _quant_layer(
        self, name: str, src: str, out_t: str, th_w: np.ndarray, sf_w: np.ndarray, trip: Triples
    ) -> QuantLayer:
        bits, steps = self.bits, self.steps
        return QuantLayer(
            name,
            bits,
            bits,
            bits,
            steps.threshold(src),
            steps.threshold(out_t),
            th_w,
            steps.sf(src),
            steps.sf(out_t),
            sf_w,
            trip.pre,
            trip.scale,
            trip.post,
        )

    # -- pools ----------------------------------------------------------------------------------
    def maxpool(self, f: _Fused) -> None:
        node, src, out_t = f.head, f.inputs[0], f.output
        assert isinstance(node, g.Pool)
        if f.relu and src not in self.nonneg:
            self.errors.append(
                _err(
                    node,
                    "a Relu after a MaxPool runs on xDNN only when the pool reads a Relu's output",
                )
            )
            return
        in_shape, out_shape = self.shape3(src), self.shape3(out_t)
        lay = _pool_layer("XNMaxPool", node, src, out_t, in_shape, out_shape, self.errors)
        if lay is None:
            return
        self.layers.append(lay)
        pool = g.Pool(
            name=node.name,
            inputs=[src],
            outputs=[out_t],
            kind="max",
            kernel=lay.kernel,
            stride=lay.stride,
            pads=_pads(lay),
            source=node.source,
        )
        self.ig.add(pool, out_shape, self.steps.qtype(out_t))
        if src in self.nonneg:
            self.nonneg.add(out_t)

    def avgpool(self, f: _Fused) -> None:
        node, src, out_t = f.head, f.inputs[0], f.output
        lay = self._avgpool_layer(f)
        if lay is None:
            return
        m, s = dev.avgpool_multiplier(
            lay.kernel[0] * lay.kernel[1], self.steps.sf(src) / self.steps.sf(out_t)
        )
        lay.scale, lay.post = np.array([m]), np.array([s])
        self.layers.append(lay)
        out_shape = self.shape3(out_t)
        c = self.shape3(src)[0]
        sums = self.ig.unique_name(f"{out_t}.sum")
        window_sum = g.Conv(
            name=node.name,
            inputs=[src],
            outputs=[sums],
            weight=np.ones((c, 1, *lay.kernel), np.int64),
            stride=lay.stride,
            pads=_pads(lay),
            groups=c,
            source=node.source,
        )
        self.ig.add(window_sum, out_shape, g.QType(dev.ACC_BITS))
        average = g.Requantize(
            name=f"{node.name}.average",
            inputs=[sums],
            outputs=[out_t],
            mul=m,
            div=1 << s,
            rounding="floor",
            lo=self.lo,
            hi=self.hi,
        )
        self.ig.add(average, out_shape, self.steps.qtype(out_t))
        if src in self.nonneg:
            self.nonneg.add(out_t)

    def _avgpool_layer(self, f: _Fused) -> XLayer | None:
        """The XNAvgPool command without its multiplier (fully-connected mode when the window
        is the whole image); None (with an error) where xDNN cannot run it."""
        node, src, out_t = f.head, f.inputs[0], f.output
        in_shape, out_shape = self.shape3(src), self.shape3(out_t)
        if isinstance(node, g.GlobalPool):
            kernel, stride = (in_shape[1], in_shape[2]), (1, 1)
            return XLayer(
                "XNAvgPool",
                node.name,
                [src],
                out_t,
                in_shape,
                out_shape,
                kernel,
                stride,
                fc_mode=True,
                sources=f.sources,
            )
        assert isinstance(node, g.Pool)
        if any(node.pads) or node.ceil:
            self.errors.append(
                _err(
                    node,
                    "average pooling with padding does not run on xDNN (the engine divides by "
                    "the window size)",
                )
            )
            return None
        lay = _pool_layer("XNAvgPool", node, src, out_t, in_shape, out_shape, self.errors)
        if lay is not None:
            lay.fc_mode = out_shape[1:] == (1, 1) and lay.kernel == in_shape[1:]
        return lay

    # -- Add and Concat -------------------------------------------------------------------------
    def add(self, f: _Fused) -> None:
        node, out_t = f.head, f.output
        a, b = f.inputs
        if self.shape3(a) != self.shape3(b):
            self.errors.append(
                _err(node, f"Add of {self.shape3(a)} and {self.shape3(b)}: xDNN adds equal shapes")
            )
            return
        out_shape = self.shape3(out_t)
        s_out = self.ig.unique_name(f"{out_t}.sum")
        total = g.Eltwise(name=node.name, inputs=[a, b], outputs=[s_out], kind="add")
        self.ig.add(total, out_shape, g.QType(dev.DATA_BITS + 1))
        clip_out = self.ig.unique_name(f"{out_t}.q") if f.relu else out_t
        saturate = g.Clip(
            name=f"{node.name}.saturate", inputs=[s_out], outputs=[clip_out], lo=self.lo, hi=self.hi
        )
        self.ig.add(saturate, out_shape, self.steps.qtype(out_t))
        if f.relu:
            self._relu(node, clip_out, out_t)
        self.layers.append(
            XLayer(
                "XNEltwise",
                node.name,
                [a, b],
                out_t,
                self.shape3(a),
                out_shape,
                relu=f.relu,
                sources=f.sources,
            )
        )

    def concat(self, f: _Fused) -> None:
        node, out_t = f.head, f.output
        members = list(f.inputs)
        for m_ in members[:-1]:
            if self.shape3(m_)[0] % 2:
                self.errors.append(
                    _err(
                        node,
                        f"branch `{m_}` has {self.shape3(m_)[0]} channels: xDNN places branches "
                        "side by side in channel pairs, so every branch but the last needs an "
                        "even count",
                    )
                )
        if len({self.shape3(m_)[1:] for m_ in members}) != 1:
            self.errors.append(_err(node, "concatenated branches must share height and width"))
        self.concats[out_t] = members
        cat = g.Concat(name=node.name, inputs=members, outputs=[out_t])
        self.ig.add(cat, self.shape3(out_t), self.steps.qtype(out_t))
        if all(m_ in self.nonneg for m_ in members):
            self.nonneg.add(out_t)


def _pads(lay: XLayer) -> tuple[int, int, int, int]:
    """(top, left, bottom, right): the bottom/right padding the output size implies."""
    (kh, kw), (sh, sw), (ph, pw) = lay.kernel, lay.stride, lay.pad
    _, h, w = lay.in_shape
    _, oh, ow = lay.out_shape
    bottom = max(0, (oh - 1) * sh + kh - h - ph)
    right = max(0, (ow - 1) * sw + kw - w - pw)
    return (ph, pw, bottom, right)


def _pool_layer(
    op: str,
    node: g.Pool,
    src: str,
    out_t: str,
    in_shape: tuple[int, int, int],
    out_shape: tuple[int, int, int],
    errors: list[EdgesynthError],
) -> XLayer | None:
    if len(node.kernel) != 2 or any(d != 1 for d in node.dilation):
        errors.append(_err(node, "only 2-D pooling without dilation runs on xDNN"))
        return None
    return XLayer(
        op,
        node.name,
        [src],
        out_t,
        in_shape,
        out_shape,
        tuple(node.kernel),
        tuple(node.stride),
        (node.pads[0], node.pads[1]),
        sources=[node.name],
    )
