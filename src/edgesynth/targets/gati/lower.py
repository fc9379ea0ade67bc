"""Fuse a network graph into Gati layers (a `LayerChain`): what one megablock and its tail do.

Into the megablock of a Conv/Linear the tail fuses, in graph order:

* the bias (BatchNorm and constant Adds are already folded by `ir.passes.simplify`),
* an integer graph's `Requantize` right after the megablock (QuantScale/QuantShift),
* one activation (ReLU, sigmoid, tanh; an integer Clip to [0, hi] counts as ReLU),
* one pooling. A monotonic activation after a max pool is moved in front of it
  (`act(max(x)) == max(act(x))`), so `MaxPool -> Relu` fuses too; and a pool that follows the
  activation of a layer (as in an integer graph written for MAX7800x, which pools before the
  next convolution) becomes that layer's tail pooling.

Each layer's chain is found by the `ir.fusion` matcher over `FUSION_PATTERNS` when the layer
opens; three Gati moves take more operators than the patterns do, each a small step that then
follows the rest of the pattern from the operator it took (`_Fuser.extend`):

* `relu(relu(x)) == relu(x)`: a ReLU (or a ReLU-like Clip) after the layer's ReLU joins it,
* a monotonic activation after the layer's max pool moves in front of it (above),
* a Flatten of the layer's output only renames it: the layer's tail goes on after it.

What cannot fuse opens an identity layer (kind `none`: a 1x1 CONV or an FC with unit weights
whose tail does the work), whose chain is an `identity-*` pattern's. A trailing Softmax runs on
the host. A tensor may be read by several layers; an element-wise add, subtract or multiply of
two maps is an `eltwise` layer (the element-wise block, its tail fusing like a megablock's); a
channel concatenation has no layer: its producers write adjacent channel ranges of one DRAM
tensor (`plan`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.ir.fusion import Matcher, Member, Pattern, pattern
from edgesynth.ir.passes import simplify
from edgesynth.targets.gati.chain import FusedLayer, LayerChain, PoolSpec

# What one layer runs, from its megablock (or element-wise block) forward (`ir.fusion`): the
# tail's requantization, activation and pooling; an identity layer's chain starts in the tail.
# The handlers check each operator taken (which activations and clips the tail block runs); see
# the module docstring for the moves that make more graphs fit.
FUSION_PATTERNS = (
    pattern("megablock", "conv|linear [requantize] [activation|clip] [pool|global_pool]"),
    pattern(
        "eltwise",
        "eltwise:add|eltwise:sub|eltwise:mul [requantize] [activation|clip] [pool|global_pool]",
    ),
    pattern("identity-requantize", "requantize [activation|clip] [pool|global_pool]"),
    pattern("identity-activation", "activation|clip [pool|global_pool]"),
    pattern("identity-pool", "pool|global_pool"),
)
# The tail's members, in order (requantize, activation, pooling): what a move continues over.
_TAIL = FUSION_PATTERNS[0].members[1:]

GATI_OPS = (
    "Conv, Linear, BatchNorm/constant Add (folded), ReLU, sigmoid, tanh, max/average pooling, "
    "Add/Sub/Mul of two feature maps, channel Concat"
)


class _Fuser:
    """One walk over the graph's operators, keeping which layers produce each tensor."""

    def __init__(self, graph: g.Graph) -> None:
        self.graph = graph
        self.layers: list[FusedLayer] = []
        # tensor -> the layers whose outputs, concatenated along the channels, are its value
        # (-1: the graph input)
        self.producers: dict[str, list[int]] = {}
        self.flat: dict[str, tuple[int, ...]] = {}  # a flattened (C, H, W) map -> that shape
        self.host_post: str | None = None
        self.host_post_node: g.Node | None = None
        self.requantize: dict[str, g.Requantize] = {}  # layer name -> its tail requantization
        self.node: g.Node | None = None
        self.matcher = Matcher(graph)
        self.chained: dict[str, FusedLayer] = {}  # a tail operator -> the layer its chain is

    # -- errors ---------------------------------------------------------------------------
    def fail(self, reason: str, node: g.Node | None = None) -> EdgesynthError:
        node = node or self.node
        assert node is not None
        where = node.source or f"operator `{node.name}` ({node.op})"
        return EdgesynthError(f"{where}: {reason}", file=self.graph.source or None)

    def refuse(self, reason: str) -> EdgesynthError:
        return EdgesynthError(reason, file=self.graph.source or None)

    # -- main loop ------------------------------------------------------------------------
    def run(self) -> LayerChain:
        in_name, in_shape = self.graph_input()
        self.producers[in_name] = [-1]
        handlers = {
            g.Conv: self.conv,
            g.Linear: self.linear,
            g.Requantize: self.requant,
            g.Activation: self.activation,
            g.Clip: self.clip,
            g.Pool: self.pool,
            g.GlobalPool: self.pool,
            g.Flatten: self.flatten,
            g.Reshape: self.reshape,
            g.Softmax: self.softmax,
            g.BatchNorm: self.batchnorm,
            g.Eltwise: self.eltwise,
            g.Concat: self.concat,
        }
        errors: list[EdgesynthError] = []
        for node in self.graph.nodes:
            self.node = node
            if isinstance(node, g.Constant):
                continue  # read by the operator that uses it
            try:
                self.fuse_node(node, handlers)
            except EdgesynthError as err:  # go on after the refused operator: report them all
                errors.append(err)
                self.host_post, self.host_post_node = None, None
                known = [self.producers[t] for t in node.inputs if t in self.producers]
                for out in node.outputs:
                    self.producers.setdefault(out, known[0] if known else [-1])
        if errors:
            raise errors[0] if len(errors) == 1 else MultipleErrors(errors)
        return self.finish(in_name, in_shape)

    def fuse_node(self, node: g.Node, handlers: dict[type, Callable[[Any], None]]) -> None:
        if self.host_post_node is not None:
            raise self.fail(f"{self.host_post_node.name} must be the last node of the graph")
        handler = handlers.get(type(node))
        if handler is None:
            raise self.fail(
                f"`{node.op}` has no Gati instruction (the Gati target runs {GATI_OPS})"
            )
        handler(node)

    def graph_input(self) -> tuple[str, tuple[int, ...]]:
        inputs = self.graph.inputs
        if len(inputs) != 1:
            raise self.refuse(
                f"the Gati target takes models with one input, this one has {len(inputs)} "
                f"({', '.join(inputs)})"
            )
        shape = self.graph.tensors[inputs[0]].shape
        if len(shape) not in (1, 3):
            raise self.refuse(
                f"input `{inputs[0]}` has rank {len(shape) + 1}; the Gati target takes (N, C, H, "
                "W) images or (N, F) vectors"
            )
        return inputs[0], shape

    def finish(self, in_name: str, in_shape: tuple[int, ...]) -> LayerChain:
        outputs = self.graph.outputs
        if len(outputs) != 1:
            raise self.refuse(
                f"the Gati target takes models with one output, this one has {len(outputs)}"
            )
        if not self.layers:
            raise self.refuse("the model has no Conv or Gemm/MatMul layer")
        last = len(self.layers) - 1
        final = self.layers[last].output
        if self.producers.get(outputs[0]) != [last]:
            raise self.refuse(
                f"graph output `{outputs[0]}` is not the end of the layer chain (`{final}`)"
            )
        for layer in self.layers:
            if layer.stage < 2:
                layer.out_shape = layer.conv_shape
        post = self.host_post_node
        return LayerChain(
            self.graph.source,
            in_name,
            in_shape,
            outputs[0],
            self.layers,
            self.host_post,
            post.name if post is not None else None,
            int(self.graph.meta.get("opset", 0)),  # type: ignore[call-overload]
            tuple(self.graph.tensors[outputs[0]].shape),
        )

    # -- the layers each tensor comes from ------------------------------------------------
    def take(self, name: str) -> list[int]:
        """The layers `name` comes from (several: a channel concatenation)."""
        if name not in self.producers:
            raise self.fail(f"reads `{name}`, which no Gati layer produces")
        return list(self.producers[name])

    def readers(self, name: str) -> int:
        return len(self.graph.consumers(name)) + (name in self.graph.outputs)

    def advance(self, layer: FusedLayer, output: str) -> None:
        """`output` is now `layer`'s output."""
        layer.output = output
        self.producers[output] = [next(i for i, kept in enumerate(self.layers) if kept is layer)]

    def open_layer(self, layer: FusedLayer, sources: list[list[int]]) -> None:
        """Open `layer` at the current operator; the tail operators of its longest
        `FUSION_PATTERNS` chain from there are to join it."""
        layer.sources = sources
        self.layers.append(layer)
        assert self.node is not None
        match = self.matcher.longest(self.node, FUSION_PATTERNS)
        for node in match.nodes[1:] if match is not None else ():
            self.chained[node.name] = layer

    def extend(self, layer: FusedLayer, node: g.Node) -> None:
        """After a move took `node` into `layer`: the rest of its chain follows from `node`, over
        the tail members the layer has not passed yet."""
        passed = {0: int(layer.name in self.requantize), 1: 2, 2: 3}[layer.stage]
        rest = Pattern("rest", (Member(node.op_names), *_TAIL[passed:]))
        for later in self.matcher.follow(node, rest)[1:]:
            self.chained[later.name] = layer

    def producer(self, name: str) -> FusedLayer | None:
        """The layer whose tail can take the next operation on `name`: the one layer that
        writes `name`, when this node is its only reader."""
        src = self.producers.get(name)
        if src is None or len(src) != 1 or src[0] < 0 or self.readers(name) != 1:
            return None
        layer = self.layers[src[0]]
        return layer if layer.output == name else None

    def joined(self, node: g.Node) -> FusedLayer | None:
        """The layer whose chain (`FUSION_PATTERNS`, or its rest after a move) takes `node`,
        when that layer still writes `node`'s input."""
        layer = self.producer(node.inputs[0])
        return layer if layer is not None and self.chained.get(node.name) is layer else None

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.tensors[name].shape

    def shape_of(self, node: g.Node) -> tuple[int, ...]:
        return self.graph.tensors[node.output].shape

    # -- megablocks -----------------------------------------------------------------------
    def map_operand(self, name: str) -> list[int]:
        """The layers a (C, H, W) operand comes from."""
        src = self.take(name)
        if name in self.flat or len(self.shape(name)) != 3:
            raise self.fail(f"`{name}` of shape {self.shape(name)} is not a (C, H, W) map")
        return src

    def conv(self, node: g.Conv) -> None:
        name = node.inputs[0]
        self.take(name)
        if node.transposed:
            raise self.fail("transposed convolution has no Gati instruction")
        if node.rank != 2:
            raise self.fail(f"{node.rank}-D convolution: Gati's CONV takes (C, H, W) maps")
        src = self.map_operand(name)
        out = self.shape_of(node)
        bias = (
            node.bias if node.bias is not None else np.zeros(node.out_channels, node.weight.dtype)
        )
        layer = FusedLayer(
            node.name,
            "conv",
            self.shape(name),
            [node.name, *node.folded],
            node.weight,
            bias,
            strides=(int(node.stride[0]), int(node.stride[1])),
            pads=(
                int(node.pads[0]),
                int(node.pads[1]),
                int(node.pads[2]),
                int(node.pads[3]),
            ),
            dilations=(int(node.dilation[0]), int(node.dilation[1])),
            group=node.groups,
            conv_shape=out,
        )
        self.open_layer(layer, [src])
        self.advance(layer, node.output)

    def linear(self, node: g.Linear) -> None:
        name = node.inputs[0]
        src = self.take(name)
        shape = self.shape(name)
        flatten, in_map = name in self.flat, self.flat.get(name, ())
        if len(shape) == 3:  # the graph's Linear reads a map flattened in C, H, W order
            flatten, in_map = True, shape
        elif len(shape) != 1:
            raise self.fail(f"input of shape {shape} must be flattened first")
        bias = (
            node.bias
            if node.bias is not None
            else np.zeros(node.weight.shape[0], node.weight.dtype)
        )
        layer = FusedLayer(
            node.name,
            "linear",
            shape,
            [node.name, *node.folded],
            node.weight,
            bias,
            flatten=flatten,
            conv_shape=(int(node.weight.shape[0]),),
        )
        if flatten:
            layer.in_map = in_map
        self.open_layer(layer, [src])
        self.advance(layer, node.output)

    def eltwise(self, node: g.Eltwise) -> None:
        constants = [t for t in node.inputs if isinstance(self.graph.producer(t), g.Constant)]
        if constants and node.kind in ("add", "sub") and len(node.inputs) == 2:
            self.take(next(t for t in node.inputs if t not in constants))
            raise self.fail(
                "a constant Add is fused as the bias of the preceding Conv/Gemm/MatMul; here it "
                "does not follow one directly"
            )
        if constants:
            raise self.fail(f"element-wise {node.kind} with a constant has no Gati instruction")
        if node.kind not in ("add", "sub", "mul") or len(node.inputs) != 2:
            raise self.fail(
                f"element-wise {node.kind} of {len(node.inputs)} tensors has no Gati instruction "
                "(the element-wise block adds, subtracts or multiplies two tensors)"
            )
        a, b = node.inputs
        srcs = [self.map_operand(a), self.map_operand(b)]
        out = self.shape_of(node)
        if self.shape(a) != out or self.shape(b) != out:
            raise self.fail(
                f"element-wise {node.kind} of shapes {self.shape(a)} and {self.shape(b)}: the "
                "element-wise block takes two maps of one shape (no broadcasting)"
            )
        layer = FusedLayer(node.name, "eltwise", out, [node.name], conv_shape=out)
        layer.eltwise = node.kind
        self.open_layer(layer, srcs)
        self.advance(layer, node.output)

    def concat(self, node: g.Concat) -> None:
        """No instruction: the producers write adjacent channel ranges of one DRAM tensor."""
        srcs = [self.map_operand(t) for t in node.inputs]
        self.producers[node.output] = [j for src in srcs for j in src]

    # -- tail -----------------------------------------------------------------------------
    def requant(self, node: g.Requantize) -> None:
        """An integer graph's requantization: the tail's QuantScale/QuantShift step."""
        name = node.inputs[0]
        self.take(name)
        layer = self.joined(node) or self.open_identity(name)
        self.requantize[layer.name] = node
        layer.nodes.append(node.name)
        self.advance(layer, node.output)

    def activation(self, node: g.Activation) -> None:
        if node.kind not in ("relu", "sigmoid", "tanh"):
            raise self.fail(
                f"activation `{node.kind}` has no Gati tail block (ReLU, sigmoid, tanh)"
            )
        self.set_activation(node, node.kind)

    def clip(self, node: g.Clip) -> None:
        """An integer Clip to [0, hi] after an 8-bit requantization is a ReLU."""
        name = node.inputs[0]
        self.take(name)
        layer = self.producer(name)
        requant = self.requantize.get(layer.name) if layer is not None else None
        top = requant.hi if requant is not None else None
        if node.lo == 0 and top is not None and node.hi >= top:
            self.set_activation(node, "relu")
            return
        float_graph = self.graph.tensors[node.output].qtype is None
        if float_graph and node.lo == 0 and node.hi > 0:
            # float ReLU with an upper bound: the ReLU, with the bound as the quantized range
            layer = self.set_activation(node, "relu")
            bound = float(node.hi)
            layer.act_bound = bound if layer.act_bound is None else min(layer.act_bound, bound)
            return
        raise self.fail(
            f"Clip to [{node.lo}, {node.hi}] has no Gati tail block (a ReLU is a Clip to [0, "
            "127] right after a layer's 8-bit requantization)"
        )

    def set_activation(self, node: g.Node, kind: str) -> FusedLayer:
        name = node.inputs[0]
        self.take(name)
        layer = self.producer(name)
        max_pool = layer is not None and layer.pool is not None and layer.pool.type == "max"
        if (
            layer is not None
            and layer.activation == kind == "relu"
            and layer.stage >= 1
            and (layer.pool is None or max_pool)
        ):
            layer.nodes.append(node.name)  # move: relu(relu(x)) == relu(x)
            self.advance(layer, node.output)
            self.extend(layer, node)
            return layer
        moved = layer is not None and layer.activation is None and layer.stage == 2 and max_pool
        # move: after a max pool, a monotonic activation commutes with it: act(max(x)) ==
        # max(act(x)), and the tail block applies the activation before pooling.
        layer = self.joined(node) or (layer if moved else None)
        if layer is not None:
            layer.activation, layer.activation_node = kind, node.name
            layer.stage = max(layer.stage, 1)
            layer.nodes.append(node.name)
            self.advance(layer, node.output)
            return layer
        layer = self.open_identity(name)
        layer.activation, layer.activation_node, layer.stage = kind, node.name, 1
        self.advance(layer, node.output)
        return layer

    def open_identity(self, name: str) -> FusedLayer:
        """A layer of kind `none` reading `name`, whose tail does the work."""
        node = self.node
        assert node is not None
        src = self.take(name)
        shape = self.shape(name)
        if len(shape) == 1 and name in self.flat:
            raise self.fail("a tail operation on a flattened feature map needs an FC layer first")
        layer = FusedLayer(node.name, "none", shape, [node.name], conv_shape=shape)
        self.open_layer(layer, [src])
        return layer

    def pool(self, node: g.Pool | g.GlobalPool) -> None:
        name = node.inputs[0]
        self.take(name)
        shape = self.shape(name)
        if len(shape) != 3 or name in self.flat:
            raise self.fail(f"pooling needs a (C, H, W) tensor, got {shape}")
        c, h, w = shape
        if isinstance(node, g.GlobalPool):
            kind = "global_avg" if node.kind == "avg" else "max"  # a max over the whole map
            spec = PoolSpec(kind, (h, w), (1, 1), (0, 0, 0, 0), False, False, node.name)
        else:
            if len(node.kernel) != 2:
                raise self.fail(f"only 2-D pooling is supported (kernel {node.kernel})")
            if any(d != 1 for d in node.dilation):
                raise self.fail("dilated pooling is not supported")
            spec = PoolSpec(
                node.kind,
                (int(node.kernel[0]), int(node.kernel[1])),
                (int(node.stride[0]), int(node.stride[1])),
                (int(node.pads[0]), int(node.pads[1]), int(node.pads[2]), int(node.pads[3])),
                bool(node.ceil),
                bool(node.count_include_pad),
                node.name,
            )
        out = self.shape_of(node)
        spec.in_hw, spec.out_hw = (h, w), (out[1], out[2])
        layer = self.joined(node)
        if layer is None or len(layer.conv_shape) != 3:
            layer = self.open_identity(name)
        layer.pool = spec
        layer.stage = 2
        if node.name not in layer.nodes:
            layer.nodes.append(node.name)
        layer.out_shape = (c, out[1], out[2])
        self.advance(layer, node.output)

    def batchnorm(self, node: g.BatchNorm) -> None:
        self.take(node.inputs[0])
        raise self.fail(
            "BatchNormalization is folded into the preceding Conv/Gemm; here it does not "
            "follow one directly (Gati's batchnorm block is not used by edgesynth)"
        )

    # -- shapes ---------------------------------------------------------------------------
    def flatten(self, node: g.Flatten) -> None:
        name = node.inputs[0]
        src = self.take(name)
        shape = self.shape(name)
        if len(shape) == 3:
            self.flat[node.output] = shape
        elif len(shape) != 1:
            raise self.fail(f"flattening a {shape} tensor has no Gati layout")
        elif name in self.flat:
            self.flat[node.output] = self.flat[name]
        layer = self.producer(name)
        if layer is not None:  # move: the layer's output is known by its flattened name
            self.advance(layer, node.output)
            self.extend(layer, node)
        else:
            self.producers[node.output] = src

    def reshape(self, node: g.Reshape) -> None:
        name = node.inputs[0]
        self.take(name)
        raise self.fail(
            f"Reshape of {tuple(self.shape(name))} to {tuple(node.shape)}: only flattening to "
            "(batch, features) is supported"
        )

    def softmax(self, node: g.Softmax) -> None:
        name = node.inputs[0]
        src = self.take(name)
        if len(self.shape(name)) != 1:
            raise self.fail("only a Softmax over the class vector of the last layer is supported")
        self.host_post = "logsoftmax" if node.log else "softmax"
        self.host_post_node = node
        self.producers[node.output] = src  # the last layer keeps its own output name


@dataclass
class Fused:
    chain: LayerChain  # the Gati layers
    graph: g.Graph  # the simplified graph the layers were fused from (names, types)
    requantize: dict[str, g.Requantize]  # integer graphs: each layer's requantization


def fuse(graph: g.Graph) -> Fused:
    """Simplify `graph` (fold BatchNorm and constant Adds, drop no-ops) and fuse it into Gati
    layers."""
    simple = simplify(graph)
    fuser = _Fuser(simple)
    chain = fuser.run()
    return Fused(chain, simple, fuser.requantize)
