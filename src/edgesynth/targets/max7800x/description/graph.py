"""The vendor's network description (ai8x-synthesis YAML + quantized checkpoint or synthetic
weights) as a network graph.

The YAML's meaning is defined by the MAX7800x hardware, so the description is first read and
checked by the max7800x target's builder (`load_network`); this module then states what each
hardware layer computes as graph operators, the arithmetic exactly as the chip does it:

    [Concat of in_sequences] [Slice operands] [Reshape in_dim / Slice in_crop]
    [Eltwise + Clip when pool_first is false] [Pool] [Eltwise + Clip] [Flatten]
    Conv | Linear (bias x bias_div in accumulator units) -> Requantize (output shift, half up)
    -> [Activation + Clip]

The placement the YAML gives (processors, offsets, ...) is not part of the graph: it is returned
in `Graph.hints` by node name, for the max7800x target to keep (and to complete, where the YAML
leaves some out: the target's `plan` places).
Descriptions that only the vendor's hardware-layer model can express (data buffers, jumps in the
layer sequence, the vendor's 1-D pooling and dilated-window quirks) are refused with a message.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer, Network

INPUT = "input"


def _refuse(layer: Layer, what: str) -> EdgesynthError:
    return layer.error(
        f"{what} cannot be expressed in the network graph yet (the max7800x target's own "
        "simulator runs it: use `edgesynth izer` or `edgesynth simulate`)"
    )


def _shape(layer: Layer, channels: int, dim: tuple[int, int]) -> tuple[int, ...]:
    return (channels, dim[0]) if layer.is_1d else (channels, *dim)


class _Builder:
    def __init__(
        self, net: Network, bias_div: int, avg_rounding: bool, reshape_inputs: bool
    ) -> None:
        self.net = net
        self.reshape_inputs = reshape_inputs
        self.bias_div = bias_div
        self.avg_method = "half_away" if avg_rounding else "trunc"
        self.graph = g.Graph(name=net.spec.arch or Path(net.spec.path or "network").stem)
        self.graph.source = net.spec.path or ""
        self.out_of: dict[int, str] = {}  # layer index -> its output tensor
        self.act8 = g.QType(8, True, 1 / 128)
        # a description that leaves some placement out: the hints are the keys it gives (the
        # target places the rest); one that places every layer: the keys as the builder read them
        self.given_only = net.spec.leaves_placement_out(net.order)

    # -- helpers --------------------------------------------------------------------------
    def add(self, layer: Layer, kind: str, node: g.Node, shape, qtype: g.QType) -> str:
        node.name = self.graph.unique_name(f"{self.prefix(layer)}/{kind}")
        node.outputs = [node.name]
        node.source = f"{self.net.spec.path}:{layer.spec.line}" if layer.spec.line else ""
        self.graph.add(node, shape, qtype)
        return node.name

    def prefix(self, layer: Layer) -> str:
        return layer.spec.name or f"layer{layer.index}"

    def reshape(self, layer: Layer, tensor: str, shape: tuple[int, ...]) -> str:
        have = self.graph.tensors[tensor]
        if have.shape == shape:
            return tensor
        if int(np.prod(have.shape)) != int(np.prod(shape)):
            raise _refuse(layer, f"reading {have.shape} data as {shape}")
        node = g.Reshape(name="", inputs=[tensor], outputs=[], shape=shape)
        return self.add(layer, "reshape", node, shape, have.qtype or self.act8)

    def clip8(self, layer: Layer, tensor: str, kind: str) -> str:
        shape = self.graph.tensors[tensor].shape
        node = g.Clip(name="", inputs=[tensor], outputs=[], lo=-128, hi=127)
        return self.add(layer, kind, node, shape, self.act8)

    # -- one hardware layer ---------------------------------------------------------------
    def gather(self, layer: Layer, position: int) -> str:
        order = self.net.order
        sources = layer.in_sequences or [NETWORK_INPUT if position == 0 else order[position - 1]]
        if any(s < NETWORK_INPUT for s in sources):
            raise _refuse(layer, "reading the data buffer")
        tensors = []
        for s in sources:
            if s != NETWORK_INPUT and s not in self.out_of:
                raise _refuse(layer, f"reading layer {s}, which has not run yet")
            if layer.in_sequences and s != NETWORK_INPUT and s + 1 in order:
                # the vendor hands layer s+1 the output of the layer that ran before it
                before = order.index(s + 1) - 1
                if before < 0 or order[before] != s:
                    raise _refuse(layer, f"reading layer {s} out of sequence (vendor hand-over)")
            tensors.append(INPUT if s == NETWORK_INPUT else self.out_of[s])
        if len(tensors) == 1:
            return tensors[0]
        shapes = [self.graph.tensors[t].shape for t in tensors]
        if any(s[1:] != shapes[0][1:] for s in shapes):
            raise _refuse(layer, "concatenating `in_sequences` outputs of different sizes")
        shape = (sum(s[0] for s in shapes), *shapes[0][1:])
        return self.add(
            layer, "concat", g.Concat(name="", inputs=tensors, outputs=[]), shape, self.act8
        )

    def operands(self, layer: Layer, data: str) -> list[str]:
        shape = self.graph.tensors[data].shape
        if layer.operands == 1:
            return [data]
        per = shape[0] // layer.operands
        if per * layer.operands != shape[0]:
            raise _refuse(layer, f"splitting {shape[0]} channels into {layer.operands} operands")
        out = []
        for k in range(layer.operands):
            node = g.Slice(
                name="", inputs=[data], outputs=[], axis=0, start=k * per, stop=(k + 1) * per
            )
            out.append(self.add(layer, f"operand{k}", node, (per, *shape[1:]), self.act8))
        return out

    def skip_channels(self, layer: Layer, tensor: str) -> str:
        shape = self.graph.tensors[tensor].shape
        skip = layer.spec.in_channel_skip or 0
        stop = min(skip + layer.in_channels, shape[0])
        if (skip, stop) == (0, shape[0]):
            return tensor
        node = g.Slice(name="", inputs=[tensor], outputs=[], axis=0, start=skip, stop=stop)
        return self.add(layer, "skip", node, (stop - skip, *shape[1:]), self.act8)

    def reshape_input(self, layer: Layer, tensor: str) -> str:
        top, bottom = layer.in_crop
        shape = self.graph.tensors[tensor].shape
        if top or bottom:
            if len(shape) != 3:
                raise _refuse(layer, "`in_crop` on 1-D data")
            node = g.Slice(
                name="", inputs=[tensor], outputs=[], axis=1, start=top, stop=shape[1] - bottom
            )
            tensor = self.add(
                layer, "crop", node, (shape[0], shape[1] - top - bottom, shape[2]), self.act8
            )
        size = int(np.prod(self.graph.tensors[tensor].shape))
        per_channel = layer.in_dim[0] * (1 if layer.is_1d else layer.in_dim[1])
        return self.reshape(layer, tensor, _shape(layer, size // per_channel, layer.in_dim))

    def eltwise(self, layer: Layer, operands: list[str]) -> str:
        shape = self.graph.tensors[operands[0]].shape
        wide = layer.operation == "none" and layer.output_width == 32
        node = g.Eltwise(name="", inputs=operands, outputs=[], kind=layer.eltwise or "add")
        out = self.add(layer, layer.eltwise or "add", node, shape, g.QType(32, True, 1 / 128))
        return out if wide else self.clip8(layer, out, "clip")

    def pool(self, layer: Layer, tensor: str) -> str:
        if layer.pool == (1, 1) and layer.pool_stride == (1, 1):
            return tensor
        shape = self.graph.tensors[tensor].shape
        if layer.is_1d:
            kernel, stride, dilation = (
                (layer.pool[0],),
                (layer.pool_stride[0],),
                (layer.pool_dilation[0],),
            )
            if kernel[0] > 1 and dilation[0] > 1:
                raise _refuse(layer, "dilated 1-D pooling (the vendor's reference quirks)")
            pads: tuple[int, ...] = (0, 0)
        else:
            kernel, stride, dilation = layer.pool, layer.pool_stride, layer.pool_dilation
            pads = (0, 0, 0, 0)
        out_dims = []
        for size, k, s, d in zip(shape[1:], kernel, stride, dilation, strict=True):
            vendor = (size + s - k - d + 1) // s
            standard = (size - d * (k - 1) - 1) // s + 1
            if vendor != standard and k > 1:
                raise _refuse(layer, "a dilated pooling window that runs past the data")
            out_dims.append(standard)
        method = "trunc" if layer.is_1d else self.avg_method
        node = g.Pool(
            name="",
            inputs=[tensor],
            outputs=[],
            kind="avg" if layer.pool_type == "avg" and max(kernel) > 1 else "max",
            kernel=kernel,
            stride=stride,
            dilation=dilation,
            pads=pads,
            method=method,
        )
        return self.add(layer, "pool", node, (shape[0], *out_dims), self.act8)

    def operate(self, layer: Layer, tensor: str) -> str:
        if layer.operation == "none":
            return tensor
        shape = self.graph.tensors[tensor].shape
        weights = layer.weights
        if layer.spec.bypass:  # the hardware runs a kernel of ones
            kh = layer.kernel_size[0]
            if layer.is_1d and layer.groups > 1:
                raise _refuse(layer, "a Conv1d `bypass` layer with `groups`")
            k = (kh,) if layer.is_1d else (kh, kh)
            weights = np.ones((layer.out_channels, shape[0] // layer.groups, *k), np.int64)
        assert weights is not None
        bias = None
        if layer.bias is not None:
            bias = layer.bias.astype(np.int64)[: layer.out_channels] * self.bias_div
        acc_type = g.QType(32, True, None)
        if layer.operation == "linear" or layer.flatten:
            weight = weights.reshape(layer.out_channels, -1).astype(np.int64)
            if weight.shape[1] != int(np.prod(shape)):
                raise _refuse(layer, f"a {layer.kernel_size} kernel on flattened data")
            node: g.Node = g.Linear(name="", inputs=[tensor], outputs=[], weight=weight, bias=bias)
            acc = self.add(layer, "linear", node, (layer.out_channels,), acc_type)
        else:
            kh, kw = layer.kernel_size
            k = (kh,) if layer.is_1d else (kh, kw)
            per_group = shape[0] // layer.groups
            weight = weights.reshape(layer.out_channels, per_group, *k).astype(np.int64)
            n = len(k)
            stride, dilation = layer.stride[:n], layer.dilation[:n]
            if layer.operation == "convtranspose2d":
                conv_pads = tuple(
                    d * (kk - 1) - p for d, kk, p in zip(dilation, k, layer.pad, strict=True)
                )
                node = g.Conv(
                    name="",
                    inputs=[tensor],
                    outputs=[],
                    weight=weight,
                    bias=bias,
                    stride=stride,
                    pads=conv_pads * 2,
                    dilation=dilation,
                    groups=layer.groups,
                    transposed=True,
                    output_padding=layer.output_padding,
                )
            else:
                node = g.Conv(
                    name="",
                    inputs=[tensor],
                    outputs=[],
                    weight=weight,
                    bias=bias,
                    stride=stride,
                    pads=tuple(layer.pad[:n]) * 2,
                    dilation=dilation,
                    groups=layer.groups,
                )
            acc = self.add(
                layer,
                layer.operation,
                node,
                _shape(layer, layer.out_channels, layer.out_dim),
                acc_type,
            )
        out_shape = self.graph.tensors[acc].shape
        if layer.output_width == 32:
            self.graph.tensors[acc].qtype = g.QType(32, True, 2.0 ** (layer.output_shift - 14))
            return acc
        shift = layer.output_shift - 7
        mul, div = (1 << shift, 1) if shift >= 0 else (1, 1 << -shift)
        node = g.Requantize(name="", inputs=[acc], outputs=[], mul=mul, div=div, rounding="half_up")
        return self.add(layer, "requantize", node, out_shape, self.act8)

    def activate(self, layer: Layer, tensor: str) -> str:
        if layer.activation is None:
            return tensor
        t = self.graph.tensors[tensor]
        node = g.Activation(name="", inputs=[tensor], outputs=[], kind=layer.activation)
        out = self.add(layer, layer.activation, node, t.shape, t.qtype or self.act8)
        if layer.output_width == 32 or layer.activation == "abs":
            # ReLU/Abs outputs saturate at 127, on 32-bit outputs too
            clip = g.Clip(name="", inputs=[out], outputs=[], lo=0, hi=127)
            out = self.add(layer, "saturate", clip, t.shape, t.qtype or self.act8)
        return out

    def layer(self, layer: Layer, position: int) -> None:
        if layer.buffer_shift or layer.buffer_insert:
            raise _refuse(layer, "a data-buffer layer")
        data = self.gather(layer, position)
        operands = self.operands(layer, data)
        if self.reshape_inputs:  # --reshape-inputs: read `in_channels` from `in_channel_skip`
            operands = [self.skip_channels(layer, t) for t in operands]
        operands = [self.reshape_input(layer, t) for t in operands]
        if layer.operands > 1 and not layer.pool_first:
            operands = [self.eltwise(layer, operands)]
        if layer.is_1d and layer.pool[0] > 1 and len(operands) > 1:
            raise _refuse(layer, "1-D pooling with element-wise operands (the vendor pools one)")
        operands = [self.pool(layer, t) for t in operands]
        data = self.eltwise(layer, operands) if len(operands) > 1 else operands[0]
        if layer.flatten and layer.operation not in ("linear", "conv2d"):
            raise _refuse(layer, "`flatten` without a linear layer")
        out = self.activate(layer, self.operate(layer, data))
        self.out_of[layer.index] = out
        hints = ("processors", "output_processors", "in_offset", "out_offset", "data_format")
        source = layer.spec if self.given_only else layer
        self.graph.hints[self.prefix(layer)] = {k: getattr(source, k) for k in hints}
        # the interleaving of element-wise operands goes with the offsets given
        self.graph.hints[self.prefix(layer)]["write_gap"] = layer.spec.write_gap

    def build(self) -> g.Graph:
        net = self.net
        if net.sim_order and list(net.sim_order) != list(net.order):
            raise EdgesynthError(
                "a network whose known-answer simulation runs in another order than the "
                "hardware (`simulated_sequence`) cannot be expressed in the network graph",
                file=net.spec.path,
            )
        shape = tuple(net.input_shape)
        if len(shape) == 3 and shape[2] == 1 and net.layers[net.order[0]].is_1d:
            shape = shape[:2]  # a 1-D sample (C, L)
        self.graph.add_input(INPUT, shape, self.act8)
        for position, index in enumerate(net.order):
            self.layer(net.layers[index], position)
        last = net.layers[net.output_layer if net.output_layer >= 0 else net.order[-1]]
        self.graph.outputs = [self.out_of[last.index]]
        self.graph.validate()
        return self.graph


def graph_from_network(
    net: Network,
    *,
    bias_div: int = 128,
    avg_pool_rounding: bool = False,
    reshape_inputs: bool = False,
) -> g.Graph:
    """The graph of a built vendor network (see the module docstring)."""
    return _Builder(net, bias_div, avg_pool_rounding, reshape_inputs).build()
