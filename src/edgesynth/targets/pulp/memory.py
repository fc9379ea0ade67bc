"""L3/L2 memory planning: where every tensor and weight blob lives, and the L2 buffer stack.

L2 is one bidirectional stack (the seed's Network Parser): two LIFO stacks growing toward each
other from the two ends of the L2 budget. Layer j writes its output on side `j % 2`, the other
side holding its input; its weights (and the stripe buffers of inputs read from L3) go on top of
its input, so both are popped as soon as the layer ends. The next layer's weights may be
prefetched from L3 during layer j (Table 2 of the seed): they go on top of layer j's output,
which is the next layer's input. Without residual branches the stack therefore peaks at
`x_j + w_j + y_j + w_{j+1}`, the seed's formula; a tensor read again later (a residual branch)
stays where it is until its last reader ran, and is freed once it is on top.

When a layer does not fit (the seed's five-stage cascade; an input already in L3 is read from
there in row stripes):

    stage 0  everything in L2
    stage 2  weights stay in L3, streamed in chunks of output channels
    stage 3  the output goes to L3 in stripes of rows (weights in L2)
    stage 4  both

Stripes are as tall and chunks as wide as the budget allows. L3 holds every weight blob (in
layer order) followed by the activations that live there.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.targets.pulp.lower import PulpLayer, Storage, storage_for
from edgesynth.targets.pulp.tiler import param_width, span

ALIGN = 8


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


# -- weight blobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlobLayout:
    """Byte offsets inside a weight blob holding `channels` output channels."""

    channels: int
    row_bytes: int  # weight bytes per output channel
    arrays: tuple[tuple[str, int, int], ...]  # (name, element width, offset)
    nbytes: int


def blob_layout(layer: PulpLayer, channels: int) -> BlobLayout:
    row = layer.w_storage.nbytes(int(layer.weight[0].size)) if layer.weight is not None else 0
    at = align(row * channels)
    arrays = []
    for name, arr in layer.params():
        width = param_width(arr)
        arrays.append((name, width, at))
        at += align(width * channels)
    return BlobLayout(channels, row, tuple(arrays), at)


def has_blob(layer: PulpLayer) -> bool:
    return layer.weight is not None or bool(layer.params())


# -- the stack ------------------------------------------------------------------------------------


@dataclass
class Buffer:
    name: str
    size: int
    side: int
    offset: int
    alive: bool = True


@dataclass
class Stack:
    budget: int
    sides: list[list[Buffer]] = field(default_factory=lambda: [[], []])
    tops: list[int] = field(default_factory=list)
    peak: int = 0

    def __post_init__(self) -> None:
        if not self.tops:
            self.tops = [0, self.budget]

    @property
    def used(self) -> int:
        return self.tops[0] + (self.budget - self.tops[1])

    @property
    def fits(self) -> bool:
        return self.tops[0] <= self.tops[1]

    def push(self, name: str, size: int, side: int) -> Buffer:
        size = align(max(size, 1))
        if side == 0:
            offset = self.tops[0]
            self.tops[0] += size
        else:
            self.tops[1] -= size
            offset = self.tops[1]
        buf = Buffer(name, size, side, offset)
        self.sides[side].append(buf)
        self.peak = max(self.peak, self.used)
        return buf

    def free(self, name: str) -> None:
        """Mark `name` dead; pop every dead buffer on top of either side."""
        for side in (0, 1):
            for buf in self.sides[side]:
                if buf.name == name:
                    buf.alive = False
        for side in (0, 1):
            stack = self.sides[side]
            while stack and not stack[-1].alive:
                top = stack.pop()
                if side == 0:
                    self.tops[0] -= top.size
                else:
                    self.tops[1] += top.size

    def copy(self) -> Stack:
        return copy.deepcopy(self)


# -- the plan -------------------------------------------------------------------------------------


@dataclass
class Home:
    """Where a tensor lives for its whole life: an L2 offset or an L3 offset."""

    level: str  # L2 | L3
    offset: int
    nbytes: int
    storage: Storage
    shape: tuple[int, int, int]  # (C, H, W)


@dataclass
class LayerMemory:
    stage: int
    x_l3: list[bool]
    w_l3: bool
    y_l3: bool
    stripe_rows: int
    chunk_channels: int
    x_buf: list[int]  # L2 offset of each input (the tensor, or its stripe buffer)
    x_buf_bytes: list[int]
    y_buf: int  # L2 offset of the output (the tensor, or its stripe buffer)
    y_buf_bytes: int
    w_buf: int  # L2 offset of the weight blob (all of it, or one chunk); -1: none
    w_buf_bytes: int
    w_l3_offset: int  # L3 offset of the layer's weight blob; -1: none
    prefetched: bool  # weights loaded during the previous layer
    l2_in_use: int = 0  # stack bytes in use while the layer runs

    def describe(self) -> str:
        parts = []
        if any(self.x_l3):
            parts.append("x from L3")
        if self.w_l3:
            parts.append(f"w from L3 in chunks of {self.chunk_channels} ch")
        if self.y_l3:
            parts.append(f"y to L3 in stripes of {self.stripe_rows} rows")
        elif any(self.x_l3):
            parts.append(f"stripes of {self.stripe_rows} rows")
        return ", ".join(parts) or "L2"


@dataclass
class MemoryPlan:
    budget: int
    homes: dict[str, Home]
    layers: list[LayerMemory]
    blob_l3: list[int]  # per layer, -1 without weights
    weights_bytes: int  # the L3 image of every blob
    l3_bytes: int  # weights + L3 activations
    l2_peak: int


class _NoFit(Exception):
    pass


class _Planner:
    def __init__(
        self, layers: list[PulpLayer], graph: g.Graph, budget: int, inputs_l3: bool
    ) -> None:
        self.layers = layers
        self.graph = graph
        self.budget = budget
        self.stack = Stack(budget)
        self.homes: dict[str, Home] = {}
        self.in_l2: dict[str, str] = {}  # tensor -> its stack buffer
        self.frees: list[str] = []  # temporaries of the layer that just ran
        self.l3_top = 0
        self.uses: dict[str, int] = {}
        for layer in layers:
            for t in layer.inputs:
                self.uses[t] = self.uses.get(t, 0) + 1
        self.blob_l3: list[int] = []
        for layer in layers:
            if has_blob(layer):
                self.blob_l3.append(self.l3_top)
                self.l3_top += align(blob_layout(layer, layer.cout).nbytes)
            else:
                self.blob_l3.append(-1)
        self.weights_bytes = self.l3_top
        for name in graph.inputs:
            shape = _shape3(graph.tensors[name].shape)
            qt = graph.tensors[name].qtype
            storage = storage_for(qt.lo, qt.hi, shape[0])
            nbytes = storage.nbytes(shape[0] * shape[1] * shape[2])
            if inputs_l3:
                self.homes[name] = Home("L3", self.l3_alloc(nbytes), nbytes, storage, shape)
            else:
                buf = self.stack.push(f"in:{name}", nbytes, 1)  # layer 0 writes on side 0
                self.in_l2[name] = buf.name
                self.homes[name] = Home("L2", buf.offset, nbytes, storage, shape)
                if not self.stack.fits:
                    raise _NoFit(f"the input {name} ({nbytes} bytes) does not fit L2")

    def state(self) -> tuple:
        return (
            self.stack.copy(),
            dict(self.in_l2),
            dict(self.uses),
            list(self.frees),
            dict(self.homes),
            self.l3_top,
        )

    def restore(self, state: tuple) -> None:
        stack, in_l2, uses, frees, homes, l3_top = state
        self.stack, self.in_l2, self.uses, self.frees = (
            stack.copy(),
            dict(in_l2),
            dict(uses),
            list(frees),
        )
        self.homes, self.l3_top = dict(homes), l3_top

    def l3_alloc(self, nbytes: int) -> int:
        offset = self.l3_top
        self.l3_top += align(nbytes)
        return offset

    # -- one layer ------------------------------------------------------------------------
    def sizes(self, layer: PulpLayer, rows: int, channels: int) -> tuple[list[int], int, int]:
        """L2 bytes of: each input's stripe (rows needed by `rows` output rows), the output
        stripe (all channels), a weight chunk of `channels` channels."""
        c, _, w = layer.out_shape
        xs = []
        for shape, storage in zip(layer.in_shapes, layer.in_storage, strict=True):
            cin, h_in, w_in = shape
            if layer.kind in ("conv", "pool"):
                in_rows = span(rows, layer.kernel[0], layer.stride[0], layer.dilation[0], h_in)
            elif layer.kind == "linear":
                in_rows = h_in
            else:
                in_rows = rows
            xs.append(storage.nbytes(cin * in_rows * w_in))
        y = layer.out_storage.nbytes(c * rows * w)
        wb = blob_layout(layer, channels).nbytes if has_blob(layer) else 0
        return xs, y, wb

    def try_layer(
        self, j: int, w_l3: bool, y_l3: bool, rows: int, channels: int, prefetched: bool
    ) -> LayerMemory | None:
        """Allocate layer j's buffers; None (and nothing allocated) if they do not fit."""
        layer = self.layers[j]
        before = self.stack.copy()
        side = j % 2
        other = 1 - side
        x_l3 = [self.homes[t].level == "L3" for t in layer.inputs]
        xs, ybytes, wbytes = self.sizes(layer, rows, channels)
        c, h, w = layer.out_shape
        full_y = layer.out_storage.nbytes(c * h * w)
        y_size = ybytes if y_l3 else full_y
        y_buf = self.stack.push(f"y{j}", y_size, side)
        x_bufs: list[int] = []
        x_sizes: list[int] = []
        temps: list[str] = []
        for k, t in enumerate(layer.inputs):
            if x_l3[k]:
                buf = self.stack.push(f"x{j}_{k}", xs[k], other)
                temps.append(buf.name)
                x_bufs.append(buf.offset)
                x_sizes.append(xs[k])
            else:
                x_bufs.append(self.homes[t].offset)
                x_sizes.append(self.homes[t].nbytes)
        w_buf, w_size = -1, 0
        if has_blob(layer):
            if prefetched:
                found = next(b for b in self.stack.sides[other] if b.name == f"w{j}")
                w_buf, w_size = found.offset, found.size
            else:
                buf = self.stack.push(f"w{j}", wbytes, other)
                w_buf, w_size = buf.offset, wbytes
            temps.append(f"w{j}")
        if not self.stack.fits:
            self.stack = before
            return None
        if y_l3:
            temps.append(y_buf.name)
        self.pending = (y_buf, temps)
        return LayerMemory(
            stage=_stage(w_l3, y_l3),
            x_l3=x_l3,
            w_l3=w_l3,
            y_l3=y_l3,
            stripe_rows=rows,
            chunk_channels=channels,
            x_buf=x_bufs,
            x_buf_bytes=x_sizes,
            y_buf=y_buf.offset,
            y_buf_bytes=y_size,
            w_buf=w_buf,
            w_buf_bytes=w_size,
            w_l3_offset=self.blob_l3[j],
            prefetched=prefetched,
            l2_in_use=self.stack.used,
        )

    def candidates(self, layer: PulpLayer, w_l3: bool, y_l3: bool, x_l3: bool):
        """(rows, channels) to try, largest first."""
        _, h, _ = layer.out_shape
        c = layer.cout
        if layer.kind == "linear" or not (y_l3 or x_l3):
            row_options = [h]
        else:
            row_options = sorted({-(-h // n) for n in range(1, h + 1)}, reverse=True)
        if w_l3:
            step = max(layer.out_storage.align, 1)
            if layer.kind == "conv" and layer.groups > 1:
                step = max(step, layer.cout // layer.groups)
            ch_options = sorted({c, *range(step, c, step)}, reverse=True)
        else:
            ch_options = [c]
        for rows in row_options:
            for channels in ch_options:
                yield rows, channels

    def place(self, j: int, prefetched: bool) -> LayerMemory:
        layer = self.layers[j]
        x_l3 = any(self.homes[t].level == "L3" for t in layer.inputs)
        for w_l3, y_l3 in ((False, False), (True, False), (False, True), (True, True)):
            if w_l3 and (not has_blob(layer) or prefetched):
                continue
            if y_l3 and layer.kind == "linear":
                continue
            for rows, channels in self.candidates(layer, w_l3, y_l3, x_l3):
                mem = self.try_layer(j, w_l3, y_l3, rows, channels, prefetched)
                if mem is not None:
                    return mem
        raise _NoFit(
            f"ONNX node {layer.name}: does not fit the {self.budget} bytes of L2 even streamed "
            "from L3"
        )

    def finish(self, j: int, mem: LayerMemory) -> None:
        """Layer j ran: its output gets its home; its temporaries are freed at `release`."""
        layer = self.layers[j]
        y_buf, temps = self.pending
        c, h, w = layer.out_shape
        nbytes = layer.out_storage.nbytes(c * h * w)
        if mem.y_l3:
            self.homes[layer.output] = Home(
                "L3", self.l3_alloc(nbytes), nbytes, layer.out_storage, layer.out_shape
            )
        else:
            self.homes[layer.output] = Home(
                "L2", y_buf.offset, nbytes, layer.out_storage, layer.out_shape
            )
            self.in_l2[layer.output] = y_buf.name
        self.frees = temps
        for t in layer.inputs:
            self.uses[t] -= 1

    def release(self) -> None:
        for name in self.frees:
            self.stack.free(name)
        self.frees = []
        for t in [t for t, left in self.uses.items() if left == 0 and t in self.in_l2]:
            if t not in self.graph.outputs:
                self.stack.free(self.in_l2.pop(t))

    def push_prefetch(self, j: int) -> bool:
        """Push layer j's whole weight blob on top of its input's side, if it fits now."""
        layer = self.layers[j]
        if not has_blob(layer) or any(self.homes[t].level == "L3" for t in layer.inputs):
            return False
        before = self.stack.copy()
        self.stack.push(f"w{j}", blob_layout(layer, layer.cout).nbytes, 1 - j % 2)
        if not self.stack.fits:
            self.stack = before
            return False
        return True


def _stage(w_l3: bool, y_l3: bool) -> int:
    return {(False, False): 0, (True, False): 2, (False, True): 3, (True, True): 4}[(w_l3, y_l3)]


def _shape3(shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(shape) == 3:
        return (shape[0], shape[1], shape[2])
    if len(shape) == 2:
        return (shape[0], 1, shape[1])
    return (shape[0], 1, 1)


def plan_memory(
    layers: list[PulpLayer], graph: g.Graph, budget: int, *, prefetch: bool = True
) -> MemoryPlan:
    """Place every tensor and weight blob; raise EdgesynthError when a layer cannot fit."""
    last_error = ""
    for inputs_l3 in (False, True):
        try:
            return _plan(layers, graph, budget, inputs_l3, prefetch)
        except _NoFit as err:
            last_error = str(err)
    raise EdgesynthError(last_error)


def _plan(
    layers: list[PulpLayer], graph: g.Graph, budget: int, inputs_l3: bool, prefetch: bool
) -> MemoryPlan:
    p = _Planner(layers, graph, budget, inputs_l3)
    out: list[LayerMemory] = []
    prefetched = False
    for j in range(len(layers)):
        mem = p.place(j, prefetched)
        p.finish(j, mem)
        prefetched = False
        if prefetch and j + 1 < len(layers):
            saved = p.state()
            if p.push_prefetch(j + 1):
                in_use = p.stack.used  # while layer j runs and the weights arrive
                p.release()
                trial = p.state()
                try:
                    p.place(j + 1, True)
                    prefetched = True
                except _NoFit:
                    pass
                if prefetched:
                    p.restore(trial)
                    mem.l2_in_use = max(mem.l2_in_use, in_use)
                else:
                    p.restore(saved)
                    p.release()
            else:
                p.release()
        else:
            p.release()
        out.append(mem)
    return MemoryPlan(
        budget=budget,
        homes=p.homes,
        layers=out,
        blob_l3=p.blob_l3,
        weights_bytes=p.weights_bytes,
        l3_bytes=p.l3_top,
        l2_peak=p.stack.peak,
    )


def check_no_overlap(layer_plans: list, memory: MemoryPlan, graph: g.Graph) -> None:
    """Independent check of the stack: while each layer runs, every L2 region in use (live
    tensors, the layer's buffers, the next layer's prefetched weights) lies inside the budget and
    no two overlap. Raises AssertionError naming the layer and the regions."""
    layers = [lp.layer for lp in layer_plans]
    last_read: dict[str, int] = {}
    born: dict[str, int] = {name: -1 for name in graph.inputs}
    for j, layer in enumerate(layers):
        for t in layer.inputs:
            last_read[t] = j
        born[layer.output] = j
    end = len(layers)
    for j, mem in enumerate(memory.layers):
        regions: list[tuple[int, int, str]] = []
        for name, home in memory.homes.items():
            if home.level != "L2" or name not in born:
                continue
            alive_until = end if name in graph.outputs else last_read.get(name, born[name])
            if born[name] <= j <= alive_until and not (born[name] == j and mem.y_l3):
                regions.append((home.offset, home.nbytes, f"tensor {name}"))
        for k, is_l3 in enumerate(mem.x_l3):
            if is_l3:
                regions.append((mem.x_buf[k], mem.x_buf_bytes[k], f"input stripe {k}"))
        if mem.y_l3:
            regions.append((mem.y_buf, mem.y_buf_bytes, "output stripe"))
        if mem.w_buf >= 0:
            regions.append((mem.w_buf, mem.w_buf_bytes, "weights"))
        if j + 1 < len(layers) and memory.layers[j + 1].prefetched:
            nxt = memory.layers[j + 1]
            regions.append((nxt.w_buf, nxt.w_buf_bytes, "next layer's weights"))
        regions.sort()
        for offset, size, what in regions:
            assert offset >= 0 and offset + size <= memory.budget, (
                f"layer {j}: {what} at {offset}+{size} outside the L2 budget {memory.budget}"
            )
        for (o1, s1, w1), (o2, _, w2) in itertools.pairwise(regions):
            assert o1 + s1 <= o2, f"layer {j}: {w1} ({o1}+{s1}) overlaps {w2} ({o2})"
