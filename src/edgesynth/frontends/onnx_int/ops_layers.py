"""Handlers of the ONNX operators that become graph layers: convolution, linear (Gemm/MatMul),
pooling (max, average as a window sum), the zero `Pad` folded into them, and the shape
operators around them (Flatten, Reshape, Squeeze/Unsqueeze, Concat of constants or along the
channels of activations)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edgesynth.frontends.onnx_int import symbolic as sy
from edgesynth.frontends.onnx_int.builder import Builder
from edgesynth.frontends.onnx_int.reader import OnnxNode
from edgesynth.ir import graph as g
from edgesynth.ir.intrange import accumulator_range


def _spatial_attrs(b: Builder, node: OnnxNode, rank: int) -> dict[str, tuple[int, ...]]:
    a = node.attrs
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", ""):
        raise b.fail(node, f"auto_pad={auto_pad} is not supported; export with explicit pads")
    kernel = tuple(int(k) for k in a["kernel_shape"]) if "kernel_shape" in a else ()
    return {
        "kernel": kernel,
        "strides": tuple(int(s) for s in a.get("strides", [1] * rank)),
        "pads": tuple(int(p) for p in a.get("pads", [0] * (2 * rank))),
        "dilations": tuple(int(d) for d in a.get("dilations", [1] * rank)),
    }


def _merge_pads(own: tuple[int, ...], pending: tuple[int, ...] | None) -> tuple[int, ...]:
    if pending is None:
        return own
    return tuple(a + b for a, b in zip(own, pending, strict=True))


def _out_size(size: int, lo: int, hi: int, kernel: int, stride: int, dilation: int, ceil=False):
    span = dilation * (kernel - 1) + 1
    room = size + lo + hi - span
    if room < 0:
        return 0
    return (-(-room // stride) if ceil else room // stride) + 1


def conv(b: Builder, node: OnnxNode) -> None:
    x, xs = b.tensor_of(node, 0)
    weight = b.integers(node, b.const(node, 1), "the weight")
    bias = b.integers(node, b.const(node, 2), "the bias") if len(node.inputs) > 2 else None
    rank = weight.ndim - 2
    if rank not in (1, 2) or len(xs.shape) != rank + 1:
        raise b.fail(node, f"{rank}-D convolution of {xs.shape} activations is not supported")
    at = _spatial_attrs(b, node, rank)
    groups = int(node.attrs.get("group", 1))
    if at["kernel"] and at["kernel"] != weight.shape[2:]:
        raise b.fail(node, f"kernel_shape {at['kernel']} disagrees with weights {weight.shape}")
    pads = _merge_pads(at["pads"], xs.pads)
    cin = xs.shape[0]
    if weight.shape[1] * groups != cin or weight.shape[0] % groups:
        raise b.fail(node, f"weights {weight.shape} with group={groups} do not fit {cin} channels")
    out_spatial = tuple(
        _out_size(
            xs.shape[1 + i],
            pads[i],
            pads[rank + i],
            weight.shape[2 + i],
            at["strides"][i],
            at["dilations"][i],
        )
        for i in range(rank)
    )
    if min(out_spatial) <= 0:
        raise b.fail(node, f"the kernel does not fit the {xs.shape[1:]} input")
    if bias is not None:
        bias = bias.reshape(-1)
    lo, hi = b.ranges[x]
    rlo, rhi = accumulator_range(weight, bias, lo, hi, padded=any(pads))
    name = b.graph.unique_name(node.outputs[0])
    op = g.Conv(
        name=node.name,
        inputs=[x],
        outputs=[name],
        source=node.name,
        weight=weight,
        bias=bias,
        stride=at["strides"],
        pads=pads,
        dilation=at["dilations"],
        groups=groups,
    )
    out = b.add_node(op, (weight.shape[0], *out_spatial), rlo, rhi)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, (weight.shape[0], *out_spatial), False, node.outputs[0]))


def _linear(b: Builder, node: OnnxNode, weight: np.ndarray, bias: np.ndarray | None) -> None:
    x, xs = b.tensor_of(node, 0)
    if xs.pads is not None:
        raise b.fail(node, "a padded value cannot feed a linear layer")
    if len(xs.shape) != 1:
        raise b.fail(node, f"expects flattened activations, got per-sample shape {xs.shape}")
    if weight.shape[1] != xs.shape[0]:
        raise b.fail(node, f"weights {weight.shape[::-1]} do not fit {xs.shape[0]} inputs")
    lo, hi = b.ranges[x]
    rlo, rhi = accumulator_range(weight, bias, lo, hi, padded=False)
    name = b.graph.unique_name(node.outputs[0])
    op = g.Linear(
        name=node.name, inputs=[x], outputs=[name], source=node.name, weight=weight, bias=bias
    )
    out = b.add_node(op, (weight.shape[0],), rlo, rhi)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, (weight.shape[0],), False, node.outputs[0]))


def matmul(b: Builder, node: OnnxNode) -> None:
    weight = b.integers(node, b.const(node, 1), "the weight")
    if weight.ndim != 2:
        raise b.fail(node, f"weights of shape {weight.shape}: expected a matrix")
    _linear(b, node, weight.T.copy(), None)


def gemm(b: Builder, node: OnnxNode) -> None:
    a = node.attrs
    if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
        raise b.fail(node, "alpha and beta must be 1 in an integer graph")
    if int(a.get("transA", 0)):
        raise b.fail(node, "transA=1 is not supported")
    weight = b.integers(node, b.const(node, 1), "the weight")
    if not int(a.get("transB", 0)):
        weight = weight.T.copy()
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        bias = b.integers(node, b.const(node, 2), "the bias").reshape(-1)
        if bias.size == 1:
            bias = np.full(weight.shape[0], int(bias[0]), dtype=np.int64)
    _linear(b, node, weight, bias)


def _pool(b: Builder, node: OnnxNode, kind: str, global_: bool = False) -> None:
    x, xs = b.tensor_of(node, 0)
    rank = len(xs.shape) - 1
    if rank not in (1, 2):
        raise b.fail(node, f"pooling of per-sample shape {xs.shape} is not supported")
    if global_:
        at = {
            "kernel": tuple(xs.shape[1:]),
            "strides": (1,) * rank,
            "pads": (0,) * (2 * rank),
            "dilations": (1,) * rank,
        }
    else:
        at = _spatial_attrs(b, node, rank)
    ceil = bool(node.attrs.get("ceil_mode", 0))
    lo, hi = b.ranges[x]
    if xs.pads is not None and kind == "max" and lo < 0:
        raise b.fail(
            node,
            "a zero `Pad` before max pooling of signed values is not supported (the pooling "
            "would see the zeros)",
        )
    pads = _merge_pads(at["pads"], xs.pads)
    out_spatial = tuple(
        _out_size(
            xs.shape[1 + i],
            pads[i],
            pads[rank + i],
            at["kernel"][i],
            at["strides"][i],
            at["dilations"][i],
            ceil,
        )
        for i in range(rank)
    )
    if min(out_spatial) <= 0:
        raise b.fail(node, f"the window does not fit the {xs.shape[1:]} input")
    count = int(np.prod(at["kernel"]))
    if kind == "sum":
        exact = tuple(
            _out_size(
                xs.shape[1 + i],
                pads[i],
                pads[rank + i],
                at["kernel"][i],
                at["strides"][i],
                at["dilations"][i],
            )
            for i in range(rank)
        )
        own_pads = any(at["pads"])
        include = int(node.attrs.get("count_include_pad", 0))
        if exact != out_spatial:
            raise b.fail(node, "ceil_mode average pooling (a varying divisor) is not supported")
        if own_pads and not include:
            raise b.fail(
                node,
                "padded average pooling with count_include_pad=0 divides by a varying "
                "count; not supported",
            )
        padded = any(pads)
        rlo = count * (min(lo, 0) if padded else lo)
        rhi = count * (max(hi, 0) if padded else hi)
    else:
        rlo, rhi = lo, hi
    name = b.graph.unique_name(node.outputs[0])
    op = g.Pool(
        name=node.name,
        inputs=[x],
        outputs=[name],
        source=node.name,
        kind=kind,
        kernel=at["kernel"],
        stride=at["strides"],
        dilation=at["dilations"],
        pads=pads,
        ceil=ceil,
        method="floor",
    )
    shape = (xs.shape[0], *out_spatial)
    out = b.add_node(op, shape, rlo, rhi)
    result = sy.bare(out, shape, xs.integer_domain, node.outputs[0])
    if kind == "sum":  # the ONNX average is the sum divided by the window size, exactly
        result = replace(result, div=count, integer_domain=False, nodes=[node.name])
    else:
        b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, result)


def maxpool(b: Builder, node: OnnxNode) -> None:
    if int(node.attrs.get("storage_order", 0)) or (len(node.outputs) > 1 and node.outputs[1]):
        raise b.fail(node, "MaxPool indices are not supported")
    _pool(b, node, "max")


def averagepool(b: Builder, node: OnnxNode) -> None:
    _pool(b, node, "sum")


def global_averagepool(b: Builder, node: OnnxNode) -> None:
    _pool(b, node, "sum", global_=True)


def global_maxpool(b: Builder, node: OnnxNode) -> None:
    _pool(b, node, "max", global_=True)


def pad(b: Builder, node: OnnxNode) -> None:
    s = b.sym(node, 0)
    a = node.attrs
    if a.get("mode", "constant") != "constant":
        raise b.fail(node, f"mode={a.get('mode')} padding is not supported (only zeros)")
    if "pads" in a:
        pads = [int(p) for p in a["pads"]]
        value = float(a.get("value", 0.0))
    else:
        pads = [int(p) for p in b.const(node, 1).reshape(-1)]
        has_value = len(node.inputs) > 2 and node.inputs[2]
        value = float(b.const(node, 2).reshape(-1)[0]) if has_value else 0.0
    if value != 0.0:
        raise b.fail(node, f"padding with {value} is not supported (only zeros)")
    rank = len(s.shape) + 1
    if len(pads) != 2 * rank:
        raise b.fail(node, f"pads {pads} do not match rank {rank}")
    before, after = pads[:rank], pads[rank:]
    if before[0] or after[0] or before[1] or after[1]:
        raise b.fail(node, "padding the batch or channel axis is not supported")
    if any(p < 0 for p in pads):
        raise b.fail(node, "negative pads (cropping) are not supported")
    spatial = tuple(before[2:]) + tuple(after[2:])
    tensor = b.materialize(replace(s, pads=None), node)
    base = sy.bare(tensor, s.shape, s.integer_domain, node.outputs[0])
    total = _merge_pads(spatial, s.pads) if s.pads is not None else spatial
    b.set(node, replace(base, pads=total if any(total) else None))


def flatten(b: Builder, node: OnnxNode) -> None:
    if int(node.attrs.get("axis", 1)) != 1:
        raise b.fail(node, "only Flatten(axis=1) is supported")
    _flatten(b, node)


def _flatten(b: Builder, node: OnnxNode) -> None:
    s = b.sym(node, 0)
    if len(s.shape) == 1 and s.pads is None:
        b.set(node, replace(s, onnx_name=node.outputs[0]))
        return
    x = b.materialize(s, node)
    size = int(np.prod(s.shape))
    name = b.graph.unique_name(node.outputs[0])
    op = g.Flatten(name=node.name, inputs=[x], outputs=[name], source=node.name)
    lo, hi = b.ranges[x]
    out = b.add_node(op, (size,), lo, hi, b.graph.tensors[x].qtype)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, (size,), s.integer_domain, node.outputs[0]))


def reshape(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    target = [int(t) for t in b.const(node, 1).reshape(-1)]
    if isinstance(v, np.ndarray):
        b.set(node, v.reshape(target))
        return
    s = v
    size = int(np.prod(s.shape))
    rest = target[1:]
    if target[0] not in (-1, 1, 0) and not (len(target) == 2 and target[1] in (-1, size)):
        raise b.fail(node, f"reshape to {target} changes the batch axis")
    if len(target) == 2 and target[0] in (-1, 1) and target[1] in (-1, size):
        _flatten(b, node)
        return
    if -1 in rest:
        known = int(np.prod([r for r in rest if r != -1]))
        rest[rest.index(-1)] = size // known
    shape = tuple(s.shape[i] if r == 0 else r for i, r in enumerate(rest))
    if int(np.prod(shape)) != size:
        raise b.fail(node, f"cannot reshape {s.shape} to {shape}")
    if shape == s.shape:
        b.set(node, replace(s, onnx_name=node.outputs[0]))
        return
    if len(shape) == 1:
        _flatten(b, node)
        return
    x = b.materialize(s, node)
    name = b.graph.unique_name(node.outputs[0])
    op = g.Reshape(name=node.name, inputs=[x], outputs=[name], source=node.name, shape=shape)
    lo, hi = b.ranges[x]
    out = b.add_node(op, shape, lo, hi, b.graph.tensors[x].qtype)
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, shape, s.integer_domain, node.outputs[0]))


def squeeze_unsqueeze(b: Builder, node: OnnxNode) -> None:
    v = b.value(node, 0)
    if isinstance(v, np.ndarray):
        axes = node.attrs.get("axes")
        if axes is None and len(node.inputs) > 1:
            axes = [int(a) for a in b.const(node, 1).reshape(-1)]
        if node.op == "Unsqueeze":
            out = v
            for axis in sorted(axes or []):
                out = np.expand_dims(out, axis)
        else:
            out = np.squeeze(v, axis=tuple(axes) if axes else None)
        b.set(node, out)
        return
    raise b.fail(node, f"{node.op} of activations inside the integer network is not supported")


def concat(b: Builder, node: OnnxNode) -> None:
    values = [b.value(node, k) for k in range(len(node.inputs))]
    if all(isinstance(v, np.ndarray) for v in values):
        b.set(node, np.concatenate(values, axis=int(node.attrs.get("axis", 0))))
        return
    if any(isinstance(v, np.ndarray) for v in values):
        raise b.fail(node, "concatenation of a constant with activations is not supported")
    _channel_concat(b, node)


def _channel_concat(b: Builder, node: OnnxNode) -> None:
    """Activations joined along the channel axis (ONNX axis 1): the codes side by side, so the
    inputs must share one scale (the exporter's responsibility, as for any integer operator)."""
    parts = [b.tensor_of(node, k) for k in range(len(node.inputs))]
    shapes = [s.shape for _, s in parts]
    rank = len(shapes[0]) + 1
    axis = int(node.attrs.get("axis", 1))
    if (axis + rank if axis < 0 else axis) != 1:
        raise b.fail(node, f"concatenation along axis {axis} (only channels, axis 1, are joined)")
    if any(len(s) != len(shapes[0]) or s[1:] != shapes[0][1:] for s in shapes):
        raise b.fail(node, f"joins tensors of shapes {shapes}; all but the channels must agree")
    tensors = [x for x, _ in parts]
    types = [b.graph.tensors[x].qtype for x in tensors]
    lo = min(b.ranges[x][0] for x in tensors)
    hi = max(b.ranges[x][1] for x in tensors)
    qlo = min(t.lo if t else b.ranges[x][0] for t, x in zip(types, tensors, strict=True))
    qhi = max(t.hi if t else b.ranges[x][1] for t, x in zip(types, tensors, strict=True))
    name = b.graph.unique_name(node.outputs[0])
    op = g.Concat(name=node.name, inputs=tensors, outputs=[name], source=node.name)
    shape = (sum(s[0] for s in shapes), *shapes[0][1:])
    out = b.add_node(op, shape, lo, hi, sy.qtype_for(qlo, qhi, node.name))
    b.onnx_to_graph[node.outputs[0]] = out
    b.set(node, sy.bare(out, shape, parts[0][1].integer_domain, node.outputs[0]))
