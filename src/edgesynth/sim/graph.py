"""What every operator of the network graph computes: the one reference every target's simulator,
and the training layers' 8-bit mode, are tested against.

`run(graph, inputs)` evaluates a graph on a batch: every array has a leading batch axis before the
graph's per-sample shape. Integer tensors are exact int64 (wider intermediates where needed);
float tensors are float64.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.sim import ops
from edgesynth.sim.rounding import divide, requantize
from edgesynth.sim.staged import shift_scale_bias
from edgesynth.sim.unary import UNARY, unary
from edgesynth.wording import plural

if TYPE_CHECKING:
    import queue


def _as_2d(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """(N, C, L) -> (N, C, L, 1); (N, C, H, W) as is."""
    return (x[..., None], True) if x.ndim == 3 else (x, False)


def _conv(node: g.Conv, x: np.ndarray) -> np.ndarray:
    data, one_d = _as_2d(x)
    weight = node.weight[..., None] if node.rank == 1 else node.weight
    stride = (*node.stride, 1)[:2] if one_d else node.stride
    dilation = (*node.dilation, 1)[:2] if one_d else node.dilation
    pads = (node.pads[0], 0, node.pads[1], 0) if one_d else node.pads
    out_pad = (*node.output_padding, 0)[:2] if one_d else node.output_padding
    if node.transposed:
        n, c, h, w = data.shape
        stuffed = np.zeros((n, c, (h - 1) * stride[0] + 1, (w - 1) * stride[1] + 1), data.dtype)
        stuffed[:, :, :: stride[0], :: stride[1]] = data
        data, stride = stuffed, (1, 1)
        pads = (pads[0], pads[1], pads[2] + out_pad[0], pads[3] + out_pad[1])
    out = ops.conv2d_batch(
        data, weight, node.bias, stride=stride, pads=pads, dilation=dilation, groups=node.groups
    )
    return out[..., 0] if one_d else out


def _linear(node: g.Linear, x: np.ndarray) -> np.ndarray:
    flat = x.reshape(x.shape[0], -1)
    out = ops._exact_matmul(flat, node.weight.T)
    if node.bias is not None:
        out = out + node.bias[None, :]
    return out


def _average(
    windows: np.ndarray, count: np.ndarray | int, method: str, kernel: tuple[int, int]
) -> np.ndarray:
    """Average of the last axis (kernel rows x columns, row-major)."""
    if method == "float":
        return windows.sum(axis=-1) / count
    if method == "tree":  # Gati: a tree along each row, then a tree over the row results
        grid = windows.reshape(*windows.shape[:-1], *kernel)
        rows = [
            ops.tree_average([grid[..., i, j] for j in range(kernel[1])]) for i in range(kernel[0])
        ]
        return ops.tree_average(rows)
    return divide(windows.sum(axis=-1), count, method)


def _pool(node: g.Pool, x: np.ndarray) -> np.ndarray:
    data, one_d = _as_2d(x)
    kernel = (*node.kernel, 1)[:2] if one_d else node.kernel
    stride = (*node.stride, 1)[:2] if one_d else node.stride
    dilation = (*node.dilation, 1)[:2] if one_d else node.dilation
    pads = (node.pads[0], 0, node.pads[1], 0) if one_d else node.pads
    if node.kind == "max":
        fill = np.iinfo(np.int64).min if np.issubdtype(data.dtype, np.integer) else -np.inf
        out = ops.max_pool_batch(
            data, kernel, stride, dilation=dilation, pads=pads, ceil=node.ceil, fill=fill
        )
        if node.max_floor is not None:
            out = np.maximum(out, node.max_floor)
    elif node.kind == "sum":
        windows, _ = ops.pool_windows_batch(
            data, kernel, stride, dilation=dilation, pads=pads, ceil=node.ceil
        )
        out = windows.sum(axis=-1)
    else:
        windows, inside = ops.pool_windows_batch(
            data, kernel, stride, dilation=dilation, pads=pads, ceil=node.ceil
        )
        if node.count_include_pad:
            count: np.ndarray | int = inside.sum(axis=-1)
        else:
            count = _valid_counts(data.shape[2:], kernel, stride, dilation, pads, inside.shape)
        out = _average(windows, count, node.method, kernel)
    return out[..., 0] if one_d else out


def _valid_counts(
    size: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pads: tuple[int, ...],
    shape: tuple[int, ...],
) -> np.ndarray:
    """Per output position, how many window taps fall on real data (not padding)."""
    out_h, out_w = shape[0], shape[1]
    rows = np.arange(out_h)[:, None] * stride[0] + np.arange(kernel[0]) * dilation[0] - pads[0]
    cols = np.arange(out_w)[:, None] * stride[1] + np.arange(kernel[1]) * dilation[1] - pads[1]
    ok_h = ((rows >= 0) & (rows < size[0])).sum(axis=1)
    ok_w = ((cols >= 0) & (cols < size[1])).sum(axis=1)
    return ok_h[:, None] * ok_w[None, :]


def _global_pool(node: g.GlobalPool, x: np.ndarray) -> np.ndarray:
    flat = x.reshape(*x.shape[:2], -1)
    if node.kind == "max":
        out = flat.max(axis=-1)
    else:
        spatial = (*x.shape[2:], 1)[:2] if x.ndim > 2 else (1, 1)
        out = _average(flat, flat.shape[-1], node.method, spatial)
    return out.reshape(*out.shape, *([1] * (x.ndim - 2)))


def _eltwise(node: g.Eltwise, *xs: np.ndarray) -> np.ndarray:
    if any(not np.issubdtype(x.dtype, np.integer) for x in xs):  # a float graph
        if node.kind not in ("add", "sub", "mul"):
            raise EdgesynthError(f"operator {node.name}: `{node.kind}` needs integer inputs")
        apply = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[node.kind]
        out = xs[0].astype(np.float64)
        for other in xs[1:]:
            out = apply(out, other)
        return out
    if node.kind == "mul":
        out = xs[0]
        for other in xs[1:]:
            out = out * other
        return out
    return ops.eltwise(node.kind, list(xs))


def _requantize(node: g.Requantize, x: np.ndarray) -> np.ndarray:
    return requantize(
        x,
        mul=node.mul,
        add=node.add,
        div=node.div,
        rounding=node.rounding,
        lo=node.lo,
        hi=node.hi,
        channel_axis=1,
    )


def _shift_scale_bias(node: g.ShiftScaleBias, x: np.ndarray) -> np.ndarray:
    return shift_scale_bias(
        x,
        pre=node.pre,
        scale=node.scale,
        post=node.post,
        bias=node.bias,
        bits=node.bits,
        acc_bits=node.acc_bits,
        lo=node.lo,
        hi=node.hi,
        channel_axis=1,
    )


def _activation(node: g.Activation, x: np.ndarray) -> np.ndarray:
    if node.kind == "relu":
        return np.maximum(x, 0)
    if node.kind == "abs":
        return np.abs(x)
    if node.kind in ("sigmoid", "tanh"):
        if np.issubdtype(x.dtype, np.integer):
            return ops.lookup_activation(x, node.kind, node.exponent)
        return 1.0 / (1.0 + np.exp(-x)) if node.kind == "sigmoid" else np.tanh(x)
    if node.kind in UNARY:
        return unary(node.kind, x, node.alpha, node.beta)
    raise EdgesynthError(f"operator {node.name}: unknown activation {node.kind!r}")


def _batchnorm(node: g.BatchNorm, x: np.ndarray) -> np.ndarray:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = node.gamma / np.sqrt(node.var + node.eps)
    return (x - node.mean.reshape(shape)) * scale.reshape(shape) + node.beta.reshape(shape)


def _quantize(node: g.Quantize, x: np.ndarray) -> np.ndarray:
    scaled = np.asarray(x, dtype=np.float64) / node.scale
    if node.rounding == "half_up":
        q = np.floor(scaled + 0.5)
    elif node.rounding == "half_even":
        q = np.rint(scaled)
    elif node.rounding == "half_away":
        q = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    elif node.rounding == "floor":
        q = np.floor(scaled)
    else:
        q = np.trunc(scaled)
    return np.clip(q, node.lo, node.hi).astype(np.int64)


def _softmax(node: g.Softmax, x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    if node.log:  # z - log(sum(exp(z))): finite where the probability underflows
        return z - np.log(e.sum(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _slice(node: g.Slice, x: np.ndarray) -> np.ndarray:
    index = [slice(None)] * x.ndim
    index[node.axis + 1] = slice(node.start, node.stop, node.step)
    return x[tuple(index)]


_EVAL: dict[type[g.Node], Callable[..., np.ndarray]] = {
    g.Conv: _conv,
    g.Linear: _linear,
    g.Pool: _pool,
    g.GlobalPool: _global_pool,
    g.Eltwise: _eltwise,
    g.Constant: lambda n, *_: np.asarray(n.value)[None],
    g.Requantize: _requantize,
    g.ShiftScaleBias: _shift_scale_bias,
    g.Clip: lambda n, x: np.clip(x, n.lo, n.hi),
    g.Activation: _activation,
    g.LeakyRelu: lambda node, x: np.where(x >= 0, x, x * node.alpha),
    g.BatchNorm: _batchnorm,
    g.Flatten: lambda n, x: x.reshape(x.shape[0], -1),
    g.Reshape: lambda n, x: x.reshape(x.shape[0], *n.shape),
    g.Concat: lambda n, *xs: np.concatenate(xs, axis=1),
    g.Slice: _slice,
    g.Quantize: _quantize,
    g.Dequantize: lambda n, x: x.astype(np.float64) * n.scale,
    g.Softmax: _softmax,
}


def evaluate(node: g.Node, *inputs: np.ndarray) -> np.ndarray:
    """One operator on batched inputs."""
    try:
        fn = _EVAL[type(node)]
    except KeyError:
        raise EdgesynthError(f"operator {node.name}: no reference for `{node.op}`") from None
    return fn(node, *inputs)


def run(
    graph: g.Graph,
    inputs: Mapping[str, np.ndarray] | np.ndarray,
    *,
    keep: bool = True,
    visit: Callable[[str, np.ndarray], None] | None = None,
    threads: int = 1,
) -> dict[str, np.ndarray]:
    """Evaluate `graph` on a batch. `inputs` maps input names to (N, *shape) arrays (a bare
    array for a one-input graph). Returns every tensor (`keep`) or only the graph outputs;
    `visit(name, value)` sees every tensor as it is made (the inputs first), before it is dropped
    (without `keep`, a tensor is dropped after its last use). With `threads` > 1, operators
    whose inputs are made run at once in that many threads (`_Threaded`): each operator computes
    the same values from the same inputs, and the visits and drops keep the graph's order."""
    values = _input_values(graph, inputs, visit)
    last_use = {t: i for i, node in enumerate(graph.nodes) for t in node.inputs}
    results = (
        _Threaded(graph, values, threads).results()
        if threads > 1
        else (evaluate(node, *(values[t] for t in node.inputs)) for node in graph.nodes)
    )
    for i, (node, result) in enumerate(zip(graph.nodes, results, strict=True)):
        want = graph.tensors[node.output].shape
        if tuple(result.shape[1:]) != want:
            raise EdgesynthError(
                f"graph {graph.name}: operator {node.name} ({node.op}) produced "
                f"{tuple(result.shape[1:])}, the graph says {want}"
            )
        values[node.output] = result
        if visit is not None:
            visit(node.output, result)
        if not keep:
            for t in node.inputs:
                if last_use.get(t) == i and t not in graph.outputs:
                    values.pop(t, None)
    return values if keep else {t: values[t] for t in graph.outputs}


def _input_values(
    graph: g.Graph,
    inputs: Mapping[str, np.ndarray] | np.ndarray,
    visit: Callable[[str, np.ndarray], None] | None,
) -> dict[str, np.ndarray]:
    """The graph's inputs, checked, as int64 (quantized inputs) or float64, each visited."""
    if isinstance(inputs, np.ndarray):
        if len(graph.inputs) != 1:
            raise EdgesynthError(f"graph {graph.name} takes {plural(len(graph.inputs), 'input')}")
        inputs = {graph.inputs[0]: inputs}
    values: dict[str, np.ndarray] = {}
    for name in graph.inputs:
        if name not in inputs:
            raise EdgesynthError(f"graph {graph.name}: no data for input `{name}`")
        data = np.asarray(inputs[name])
        want = graph.tensors[name].shape
        if tuple(data.shape[1:]) != want:
            raise EdgesynthError(
                f"graph {graph.name}: input `{name}` takes (N, {', '.join(map(str, want))}) "
                f"arrays, not {data.shape}"
            )
        qtype = graph.tensors[name].qtype
        values[name] = data.astype(np.int64) if qtype is not None else data.astype(np.float64)
        if visit is not None:
            visit(name, values[name])
    return values


class _Threaded:
    """Each operator's result in graph order (`results`), the operators run in `threads` threads
    as soon as the tensors they read are made (the earliest in the graph first), reading them
    from `values` (the caller stores each result there in its turn) or `made` (results made
    ahead of their turn). NumPy releases the interpreter lock in its large operations (the
    BLAS products), so independent branches share the cores. An operator's error is raised
    when its turn in the graph's order comes."""

    def __init__(self, graph: g.Graph, values: dict[str, np.ndarray], threads: int) -> None:
        self.graph, self.values, self.threads = graph, values, threads
        self.nodes = graph.nodes
        made_by = {node.output: i for i, node in enumerate(self.nodes)}
        self.readers: dict[int, list[int]] = {}
        self.missing = [0] * len(self.nodes)  # input tensors not made yet, per operator
        for i, node in enumerate(self.nodes):
            for t in {t for t in node.inputs if t in made_by}:
                self.readers.setdefault(made_by[t], []).append(i)
                self.missing[i] += 1
        self.ready = [i for i, m in enumerate(self.missing) if m == 0]  # a heap
        self.running = 0
        self.finished: dict[int, tuple[np.ndarray | None, BaseException | None]] = {}
        self.made: dict[str, np.ndarray] = {}

    def results(self) -> Iterator[np.ndarray]:
        import queue
        import threading

        todo: queue.SimpleQueue = queue.SimpleQueue()  # (operator, inputs), None: stop
        done: queue.SimpleQueue = queue.SimpleQueue()  # (operator, result, error)
        for _ in range(self.threads):  # daemons: Ctrl-C ends the command without them
            threading.Thread(target=self._work, args=(todo, done), daemon=True).start()
        try:
            for i in range(len(self.nodes)):
                while i not in self.finished:
                    self._start(todo)
                    if not self.running:
                        raise EdgesynthError(
                            f"graph {self.graph.name}: operator {self.nodes[i].name} reads a "
                            "tensor no operator makes before it"
                        )
                    self._collect(done)
                self.made.pop(self.nodes[i].output, None)
                result, error = self.finished.pop(i)
                if error is not None:
                    raise error
                assert result is not None
                yield result
        finally:
            for _ in range(self.threads):
                todo.put(None)

    def _work(self, todo: queue.SimpleQueue, done: queue.SimpleQueue) -> None:
        """A thread: evaluate the operators handed to it until it is handed None."""
        while (job := todo.get()) is not None:
            i, inputs = job
            try:
                done.put((i, evaluate(self.nodes[i], *inputs), None))
            except BaseException as err:  # raised in the caller's thread, in its turn
                done.put((i, None, err))

    def _start(self, todo: queue.SimpleQueue) -> None:
        """Hand the ready operators to the threads, the earliest first, while one is free."""
        while self.ready and self.running < self.threads:
            j = heapq.heappop(self.ready)
            node = self.nodes[j]
            todo.put((j, [self.made[t] if t in self.made else self.values[t] for t in node.inputs]))
            self.running += 1

    def _collect(self, done: queue.SimpleQueue) -> None:
        """Wait for an operator to finish; keep what it made and mark its readers' input
        made."""
        j, result, error = done.get()
        self.running -= 1
        self.finished[j] = (result, error)
        if error is None:
            assert result is not None
            self.made[self.nodes[j].output] = result
            for r in self.readers.get(j, ()):
                self.missing[r] -= 1
                if self.missing[r] == 0:
                    heapq.heappush(self.ready, r)
