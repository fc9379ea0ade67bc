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

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.ir.unionfind import UnionFind
from edgesynth.sim.graph import run
from edgesynth.targets.base import HostDense
from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.layers import XLayer
from edgesynth.targets.xdnn.quantfile import QuantFile, QuantLayer, edgesynth_policy, solve, step

HOST_TAILS = (g.Softmax,)
VIEW_OPS = (g.Flatten, g.Reshape)


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
    values = run(graph, calib)
    low = _quantize(graph, fused, values, bits, keep_shape=bool(host))
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
    nodes = list(graph.nodes)
    consumers: dict[str, list[g.Node]] = {}
    for n in nodes:
        for t in n.inputs:
            consumers.setdefault(t, []).append(n)
    alias: dict[str, str] = {}
    done: set[str] = set()
    out: list[_Fused] = []
    errors: list[EdgesynthError] = []
    host_tail: str | None = None
    final = graph.outputs[0]

    def real(t: str) -> str:
        while t in alias:
            t = alias[t]
        return t

    def only_next(t: str, kind: type[g.Node]) -> g.Node | None:
        cs = consumers.get(t, [])
        if len(cs) == 1 and isinstance(cs[0], kind) and t not in graph.outputs:
            return cs[0]
        return None

    def relu_after(t: str) -> g.Node | None:
        n = only_next(t, g.Activation)
        return n if n is not None and n.kind == "relu" else None  # type: ignore[attr-defined]

    for node in nodes:
        if node.name in done:
            continue
        done.add(node.name)
        if isinstance(node, g.Conv):
            if node.rank != 2 or node.transposed or node.groups != 1:
                errors.append(_err(node, "only plain 2-D convolutions run on xDNN"))
                continue
            w = node.weight.astype(np.float64)
            b = (
                node.bias.astype(np.float64)
                if node.bias is not None
                else np.zeros(w.shape[0], np.float64)
            )
            srcs = [node.name]
            t = node.output
            bn = only_next(t, g.BatchNorm)
            if bn is not None:
                w, b = _fold_bn(w, b, bn)  # type: ignore[arg-type]
                done.add(bn.name)
                srcs.append(bn.name)
                t = bn.output
            r = relu_after(t)
            if r is not None:
                done.add(r.name)
                srcs.append(r.name)
                t = r.output
            out.append(_Fused("conv", node, [real(node.inputs[0])], t, w, b, r is not None, srcs))
        elif isinstance(node, g.Linear):
            w = node.weight.astype(np.float64)
            b = (
                node.bias.astype(np.float64)
                if node.bias is not None
                else np.zeros(w.shape[0], np.float64)
            )
            srcs = [node.name]
            t = node.output
            r = relu_after(t)
            if r is not None:
                done.add(r.name)
                srcs.append(r.name)
                t = r.output
            out.append(_Fused("fc", node, [real(node.inputs[0])], t, w, b, r is not None, srcs))
        elif isinstance(node, g.Pool):
            kind = "maxpool" if node.kind == "max" else "avgpool"
            srcs, t = [node.name], node.output
            r = relu_after(t)
            if r is not None and kind == "maxpool":
                done.add(r.name)  # checked below: the pool's input must be non-negative
                srcs.append(r.name)
                t = r.output
            out.append(
                _Fused(kind, node, [real(node.inputs[0])], t, relu=r is not None, sources=srcs)
            )
        elif isinstance(node, g.GlobalPool):
            if node.kind != "avg":
                errors.append(_err(node, "global max pooling does not run on xDNN"))
                continue
            out.append(
                _Fused("avgpool", node, [real(node.inputs[0])], node.output, sources=[node.name])
            )
        elif isinstance(node, g.Eltwise):
            if node.kind != "add" or len(node.inputs) != 2:
                errors.append(
                    _err(
                        node,
                        f"element-wise `{node.kind}` of {len(node.inputs)} "
                        "inputs does not run on xDNN (two-input Add does)",
                    )
                )
                continue
            srcs, t = [node.name], node.output
            r = relu_after(t)
            if r is not None:
                done.add(r.name)
                srcs.append(r.name)
                t = r.output
            out.append(
                _Fused(
                    "add", node, [real(i) for i in node.inputs], t, relu=r is not None, sources=srcs
                )
            )
        elif isinstance(node, g.Concat):
            out.append(
                _Fused(
                    "concat", node, [real(i) for i in node.inputs], node.output, sources=[node.name]
                )
            )
        elif isinstance(node, VIEW_OPS):
            alias[node.output] = node.inputs[0]
        elif isinstance(node, g.Activation) and node.kind == "relu":
            errors.append(
                _err(
                    node,
                    "a Relu must follow a Conv, Gemm, MaxPool or Add to run on "
                    "xDNN (it is fused into that command)",
                )
            )
        elif isinstance(node, HOST_TAILS) and node.output == final:
            host_tail = "logsoftmax" if node.log else "softmax"  # type: ignore[attr-defined]
            final = node.inputs[0]
        else:
            errors.append(_err(node, f"operator `{node.op}` does not run on xDNN"))
    if errors:
        raise MultipleErrors(errors)
    return out, alias, host_tail, real(final)


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
    values: dict[str, np.ndarray],
    bits: int,
    keep_shape: bool = False,
) -> Lowered:
    fused, _alias, host_tail, final = fused_info
    x_name = graph.inputs[0]
    top = (1 << (bits - 1)) - 1
    lo, hi = -top - 1, top
    sets = UnionFind()
    sets.find(x_name)
    per_branch = _per_branch_concats(fused, final)
    for f in fused:
        sets.find(f.output)
        if f.kind in ("maxpool", "add") or (f.kind == "concat" and f.output not in per_branch):
            sets.union(f.output, *f.inputs)  # an average pool rescales
    stored = [x_name] + [f.output for f in fused]
    th: dict[str, float] = {}
    for t in stored:
        r = sets.find(t)
        th[r] = max(th.get(r, 0.0), float(np.abs(values[t]).max(initial=0.0)))
    warnings: list[str] = []
    for r, v in list(th.items()):
        if v == 0.0:
            v = 1.0
            warnings.append(f"tensor group of `{r}` is zero on the whole calibration batch")
        # 16-bit: one bit of headroom, so (acc >> pre) never saturates (see quantfile.py)
        th[r] = 2 * v if bits == 16 else v

    def sf(t: str) -> float:
        return float(step(th[sets.find(t)], bits))

    def shape3(t: str) -> tuple[int, int, int]:
        s = graph.tensors[t].shape
        return tuple(s) if len(s) == 3 else (int(np.prod(s)), 1, 1)  # type: ignore[return-value]

    # A concatenation read only by convolutions (through max pools) keeps each branch's own
    # step: the readers fold the per-channel steps into their weights (see _per_branch_concats).
    branch_steps: dict[str, np.ndarray] = {}
    for f in fused:
        if f.output in per_branch:
            steps = [np.full(shape3(m)[0], sf(m)) for m in f.inputs]
            branch_steps[sets.find(f.output)] = np.concatenate(steps)

    def in_channel_factor(t: str) -> np.ndarray | None:
        """Per input channel: its step over the tensor's (largest) step; None when uniform."""
        steps = branch_steps.get(sets.find(t))
        return None if steps is None else steps / sf(t)

    ig = g.Graph(graph.name, source=graph.source)
    ig.add_input(x_name, shape3(x_name), g.QType(bits, True, sf(x_name)))
    layers: list[XLayer] = []
    qlayers: list[QuantLayer] = []
    concats: dict[str, list[str]] = {}
    policy = edgesynth_policy(bits)
    nonneg: set[str] = set()
    errors: list[EdgesynthError] = []

    def qt(t: str) -> g.QType:
        return g.QType(bits, True, sf(t))

    for f in fused:
        node = f.head
        src = f.inputs[0]
        in_shape = shape3(src)
        out_t = f.output
        out_shape = shape3(out_t)
        if f.kind in ("conv", "fc"):
            w = f.weight
            assert w is not None and f.bias is not None
            if f.kind == "fc":
                c, h, wd = in_shape
                if w.shape[1] != c * h * wd:
                    errors.append(_err(node, f"a {w.shape[1]}-input layer reads {in_shape}"))
                    continue
                w = w.reshape(w.shape[0], c, h, wd)
                stride, pads, dil = (1, 1), (0, 0, 0, 0), (1, 1)
            else:
                assert isinstance(node, g.Conv)
                stride, pads, dil = node.stride, node.pads, node.dilation
                if pads[0] != pads[2] or pads[1] != pads[3]:
                    errors.append(
                        _err(
                            node,
                            f"asymmetric padding {pads} does not run on xDNN "
                            "(one padding per axis)",
                        )
                    )
                    continue
            factor = in_channel_factor(src)
            if factor is not None:  # branches of a concatenation at their own steps
                w = w * factor.reshape(1, -1, 1, 1)
            th_w = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
            sf_w = np.where(th_w > 0, th_w / top, 1.0)
            wq = np.clip(np.floor(w / sf_w.reshape(-1, 1, 1, 1) + 0.5), lo, hi).astype(np.int64)
            mult = sf(src) * sf_w / sf(out_t)
            trip = solve(mult, policy)
            if not np.all(trip.ok):
                c = int(np.nonzero(~trip.ok)[0][0])
                errors.append(
                    _err(
                        node,
                        f"output channel {c}'s requantization multiplier "
                        f"{mult[c]:.4g} is too large for the 8-bit scale and "
                        "shifts (the output range is much narrower than the "
                        "input's)",
                    )
                )
                continue
            # The shifts truncate: on average half a step low. The bias takes that half step
            # back (rounded to the integer nearest b / sf + 1/2).
            braw = f.bias / sf(out_t)
            bq = np.clip(np.floor(braw + 1.0), dev.BIAS_MIN, dev.BIAS_MAX).astype(np.int64)
            if np.any(np.abs(braw) > dev.BIAS_MAX + 0.5):
                warnings.append(f"`{node.name}`: a bias exceeds the 16-bit bias field; saturated")
            conv_out = ig.unique_name(f"{out_t}.acc")
            ig.add(
                g.Conv(
                    name=node.name,
                    inputs=[src],
                    outputs=[conv_out],
                    weight=wq,
                    stride=tuple(stride),
                    pads=tuple(pads),
                    dilation=tuple(dil),
                    source=node.source,
                ),
                (out_shape[0], out_shape[1], out_shape[2]),
                g.QType(dev.ACC_BITS),
            )
            req_out = ig.unique_name(f"{out_t}.q") if f.relu else out_t
            ig.add(
                g.ShiftScaleBias(
                    name=f"{node.name}.requantize",
                    inputs=[conv_out],
                    outputs=[req_out],
                    pre=trip.pre,
                    scale=trip.scale,
                    post=trip.post,
                    bias=bq,
                    bits=dev.DATA_BITS,
                    acc_bits=dev.ACC_BITS,
                    lo=lo,
                    hi=hi,
                ),
                out_shape,
                qt(out_t),
            )
            if f.relu:
                ig.add(
                    g.Activation(
                        name=f"{node.name}.relu", inputs=[req_out], outputs=[out_t], kind="relu"
                    ),
                    out_shape,
                    qt(out_t),
                )
                nonneg.add(out_t)
            kh, kw = int(w.shape[2]), int(w.shape[3])
            layers.append(
                XLayer(
                    "XNConv",
                    node.name,
                    [src],
                    out_t,
                    in_shape,
                    out_shape,
                    (kh, kw),
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
            )
            qlayers.append(
                QuantLayer(
                    node.name,
                    bits,
                    bits,
                    bits,
                    th[sets.find(src)],
                    th[sets.find(out_t)],
                    th_w,
                    sf(src),
                    sf(out_t),
                    sf_w,
                    trip.pre,
                    trip.scale,
                    trip.post,
                )
            )
        elif f.kind == "maxpool":
            assert isinstance(node, g.Pool)
            if f.relu and src not in nonneg:
                errors.append(
                    _err(
                        node,
                        "a Relu after a MaxPool runs on xDNN only when the "
                        "pool reads a Relu's output",
                    )
                )
                continue
            lay = _pool_layer("XNMaxPool", node, src, out_t, in_shape, out_shape, errors)
            if lay is None:
                continue
            layers.append(lay)
            ig.add(
                g.Pool(
                    name=node.name,
                    inputs=[src],
                    outputs=[out_t],
                    kind="max",
                    kernel=lay.kernel,
                    stride=lay.stride,
                    pads=_pads(lay),
                    source=node.source,
                ),
                out_shape,
                qt(out_t),
            )
            if src in nonneg:
                nonneg.add(out_t)
        elif f.kind == "avgpool":
            if isinstance(node, g.GlobalPool):
                kernel, stride = (in_shape[1], in_shape[2]), (1, 1)
                lay = XLayer(
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
            else:
                assert isinstance(node, g.Pool)
                if any(node.pads) or node.ceil:
                    errors.append(
                        _err(
                            node,
                            "average pooling with padding does not run on "
                            "xDNN (the engine divides by the window size)",
                        )
                    )
                    continue
                lay = _pool_layer("XNAvgPool", node, src, out_t, in_shape, out_shape, errors)
                if lay is None:
                    continue
                lay.fc_mode = out_shape[1:] == (1, 1) and lay.kernel == in_shape[1:]
            m, s = dev.avgpool_multiplier(lay.kernel[0] * lay.kernel[1], sf(src) / sf(out_t))
            lay.scale, lay.post = np.array([m]), np.array([s])
            layers.append(lay)
            c = in_shape[0]
            sums = ig.unique_name(f"{out_t}.sum")
            ig.add(
                g.Conv(
                    name=node.name,
                    inputs=[src],
                    outputs=[sums],
                    weight=np.ones((c, 1, *lay.kernel), np.int64),
                    stride=lay.stride,
                    pads=_pads(lay),
                    groups=c,
                    source=node.source,
                ),
                out_shape,
                g.QType(dev.ACC_BITS),
            )
            ig.add(
                g.Requantize(
                    name=f"{node.name}.average",
                    inputs=[sums],
                    outputs=[out_t],
                    mul=m,
                    div=1 << s,
                    rounding="floor",
                    lo=lo,
                    hi=hi,
                ),
                out_shape,
                qt(out_t),
            )
            if src in nonneg:
                nonneg.add(out_t)
        elif f.kind == "add":
            a, b = f.inputs
            if shape3(a) != shape3(b):
                errors.append(
                    _err(node, f"Add of {shape3(a)} and {shape3(b)}: xDNN adds equal shapes")
                )
                continue
            s_out = ig.unique_name(f"{out_t}.sum")
            ig.add(
                g.Eltwise(name=node.name, inputs=[a, b], outputs=[s_out], kind="add"),
                out_shape,
                g.QType(dev.DATA_BITS + 1),
            )
            clip_out = ig.unique_name(f"{out_t}.q") if f.relu else out_t
            ig.add(
                g.Clip(
                    name=f"{node.name}.saturate", inputs=[s_out], outputs=[clip_out], lo=lo, hi=hi
                ),
                out_shape,
                qt(out_t),
            )
            if f.relu:
                ig.add(
                    g.Activation(
                        name=f"{node.name}.relu", inputs=[clip_out], outputs=[out_t], kind="relu"
                    ),
                    out_shape,
                    qt(out_t),
                )
                nonneg.add(out_t)
            layers.append(
                XLayer(
                    "XNEltwise",
                    node.name,
                    [a, b],
                    out_t,
                    in_shape,
                    out_shape,
                    relu=f.relu,
                    sources=f.sources,
                )
            )
        elif f.kind == "concat":
            members = list(f.inputs)
            for m_ in members[:-1]:
                if shape3(m_)[0] % 2:
                    errors.append(
                        _err(
                            node,
                            f"branch `{m_}` has {shape3(m_)[0]} channels: xDNN "
                            "places branches side by side in channel pairs, so "
                            "every branch but the last needs an even count",
                        )
                    )
            if len({shape3(m_)[1:] for m_ in members}) != 1:
                errors.append(_err(node, "concatenated branches must share height and width"))
            concats[out_t] = members
            ig.add(g.Concat(name=node.name, inputs=members, outputs=[out_t]), out_shape, qt(out_t))
            if all(m_ in nonneg for m_ in members):
                nonneg.add(out_t)
    if errors:
        raise MultipleErrors(errors)
    out_shape_float = graph.tensors[graph.outputs[0]].shape
    if host_tail is not None or keep_shape:  # the host computes the rest
        out_shape_float = graph.tensors[final].shape
    ig.outputs = [final]
    policy_file = QuantFile(qlayers, policy)
    return Lowered(
        ig,
        layers,
        concats,
        x_name,
        final,
        tuple(out_shape_float),
        sf(x_name),
        sf(final),
        policy_file,
        host_tail,
        warnings,
    )


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
