"""L2 -> L1 tiling of one layer: the tile shape chosen by a constraint model (OR-Tools CP-SAT).

A tile is `c` output channels x `h` output rows x `w` output columns of the region the layer
computes (the whole output, or one L3 stripe/chunk of it). Every tile holds all the input
channels it needs (all of them for a standard convolution or a linear layer, its groups' for a
grouped one, its own for pooling and additions) and the input rows/columns its outputs read:
`(h - 1) * stride + (k - 1) * dilation + 1`, at most the input's size. Borders read zeros for the
padding instead of memory, so a tile's buffer is never larger than an interior tile's.

L1 holds, per tile: the input(s), the weights and per-channel parameters of the tile's channels,
the output. Double buffering keeps two of each that changes between tiles (inputs and outputs
when there are several tiles, weights when there are several channel tiles). The model:

    minimise   tiles * BIG + DMA bytes          (fewest tiles first, then least traffic)
    subject to L1 bytes (with the buffers above) <= the L1 budget
               c a multiple of the channel alignment (sub-byte packing, groups) or all channels

DMA bytes = tiles x input tile bytes (halos re-read) + channel tiles x weight bytes + the output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import gcd
from typing import Any

from edgesynth.cpsat import cp_model as load_cp_model
from edgesynth.cpsat import new_solver
from edgesynth.errors import EdgesynthError
from edgesynth.targets.pulp.lower import PulpLayer

PARAM_ALIGN = 8  # every L1 buffer starts on an 8-byte boundary


def _lcm(a: int, b: int) -> int:
    return a * b // gcd(a, b)


def _align(n: int) -> int:
    return (n + PARAM_ALIGN - 1) // PARAM_ALIGN * PARAM_ALIGN


@dataclass(frozen=True)
class Region:
    """The part of a layer's output one call of its L2 loop nest computes."""

    c: int  # output channels
    h: int  # output rows


@dataclass
class Tiling:
    c: int
    h: int
    w: int
    n_c: int
    n_h: int
    n_w: int
    in_c: int
    in_h: int
    in_w: int
    x_bytes: list[int]  # one buffer per input
    w_bytes: int
    p_bytes: int  # per-channel parameters (bias, multipliers, offsets)
    y_bytes: int
    double: bool
    offsets: dict[str, int] = field(default_factory=dict)  # L1 buffer offsets

    @property
    def tiles(self) -> int:
        return self.n_c * self.n_h * self.n_w

    @property
    def nb_x(self) -> int:
        return 2 if self.double and self.tiles > 1 else 1

    @property
    def nb_w(self) -> int:
        return 2 if self.double and self.n_c > 1 else 1

    @property
    def nb_y(self) -> int:
        return 2 if self.double and self.tiles > 1 else 1

    @property
    def l1_bytes(self) -> int:
        return max(self.offsets.values(), default=0) if self.offsets else self.layout()[1]

    def layout(self) -> tuple[dict[str, int], int]:
        """L1 offsets of every buffer (8-byte aligned) and the total."""
        offsets: dict[str, int] = {}
        at = 0
        for k, size in enumerate(self.x_bytes):
            for b in range(self.nb_x):
                offsets[f"x{k}_{b}"] = at
                at += _align(size)
        for b in range(self.nb_w):
            if self.w_bytes:
                offsets[f"w_{b}"] = at
                at += _align(self.w_bytes)
            if self.p_bytes:
                offsets[f"p_{b}"] = at
                at += _align(self.p_bytes)
        for b in range(self.nb_y):
            offsets[f"y_{b}"] = at
            at += _align(self.y_bytes)
        offsets["end"] = at
        return offsets, at

    def finish(self) -> Tiling:
        self.offsets, _ = self.layout()
        return self

    def dma_bytes(self) -> int:
        return self.tiles * sum(self.x_bytes) + self.n_c * (self.w_bytes + self.p_bytes)

    def to_json(self) -> dict[str, object]:
        return {
            "tile_out": [self.c, self.h, self.w],
            "tile_in": [self.in_c, self.in_h, self.in_w],
            "tile_counts": [self.n_c, self.n_h, self.n_w],
            "tiles": self.tiles,
            "double_buffer": self.double,
            "x_bytes": self.x_bytes,
            "w_bytes": self.w_bytes,
            "param_bytes": self.p_bytes,
            "y_bytes": self.y_bytes,
            "l1_bytes": self.l1_bytes,
        }


# -- geometry -------------------------------------------------------------------------------


def channel_alignment(layer: PulpLayer) -> int:
    """The smallest channel step a tile can have (below all channels)."""
    out_align = layer.out_storage.align
    in_align = max(s.align for s in layer.in_storage)
    if layer.kind == "conv" and layer.groups > 1:
        opg = layer.cout // layer.groups
        ipg = layer.cin // layer.groups
        groups_step = in_align // gcd(in_align, ipg)  # groups per tile keeping inputs aligned
        return _lcm(out_align, opg * groups_step)
    if layer.kind in ("pool", "eltwise"):
        return _lcm(out_align, in_align)
    return out_align


def channel_choices(layer: PulpLayer, region_c: int) -> list[int]:
    step = channel_alignment(layer)
    values = list(range(step, region_c + 1, step))
    if region_c not in values:
        values.append(region_c)
    return values


def span(size: int, kernel: int, stride: int, dilation: int, limit: int) -> int:
    """Input rows (or columns) a tile of `size` outputs reads."""
    return min(limit, (size - 1) * stride + (kernel - 1) * dilation + 1)


def param_bytes_per_channel(layer: PulpLayer) -> list[int]:
    return [param_width(arr) for _, arr in layer.params()]


def param_width(arr: object) -> int:
    """Bytes per value of a parameter array: 4 when every value fits int32, else 8."""
    import numpy as np

    a = np.asarray(arr)
    if a.size == 0:
        return 4
    if a.dtype.kind not in "iub":  # Python ints beyond int64, or floats holding integers
        a = np.asarray(arr, dtype=object)
        return 4 if all(-(1 << 31) <= int(v) < (1 << 31) for v in a.flat) else 8
    return 4 if int(a.min()) >= -(1 << 31) and int(a.max()) < (1 << 31) else 8


def make_tiling(
    layer: PulpLayer,
    region: Region,
    c: int,
    h: int,
    w: int,
    double: bool,
    widths: list[int] | None = None,
) -> Tiling:
    """The buffers of tiles of c x h x w outputs (no check against the budget); `widths`:
    `param_bytes_per_channel(layer)` when the caller has it already."""
    w_out = layer.out_shape[2]
    cin, h_in, w_in = layer.in_shapes[0]
    if layer.kind == "linear":
        in_c, in_h, in_w = cin, 1, 1
    else:
        in_h = span(h, layer.kernel[0], layer.stride[0], layer.dilation[0], h_in)
        in_w = span(w, layer.kernel[1], layer.stride[1], layer.dilation[1], w_in)
        if layer.kind == "conv":
            in_c = (
                cin
                if layer.groups == 1
                else c // (layer.cout // layer.groups) * (cin // layer.groups)
            )
        else:
            in_c = c
    x_bytes = [s.nbytes(in_c * in_h * in_w) for s in layer.in_storage]
    if layer.weight is not None:
        per_channel = int(layer.weight[0].size)
        w_bytes = c * layer.w_storage.nbytes(per_channel)
    else:
        w_bytes = 0
    if widths is None:
        widths = param_bytes_per_channel(layer)
    p_bytes = sum(_align(c * width) for width in widths)
    y_bytes = layer.out_storage.nbytes(c * h * w)
    return Tiling(
        c=c,
        h=h,
        w=w,
        n_c=-(-region.c // c),
        n_h=-(-region.h // h),
        n_w=-(-w_out // w),
        in_c=in_c,
        in_h=in_h,
        in_w=in_w,
        x_bytes=x_bytes,
        w_bytes=w_bytes,
        p_bytes=p_bytes,
        y_bytes=y_bytes,
        double=double,
    ).finish()


def check_tile(
    layer: PulpLayer, region: Region, c: int, h: int, w: int, budget: int, double: bool
) -> Tiling:
    """A given tile shape, validated: EdgesynthError if it breaks a rule."""
    if c not in channel_choices(layer, region.c):
        raise EdgesynthError(
            f"ONNX node {layer.name}: a tile of {c} channels is not allowed (multiples of "
            f"{channel_alignment(layer)} or all {region.c})"
        )
    if not (1 <= h <= region.h and 1 <= w <= layer.out_shape[2]):
        raise EdgesynthError(f"ONNX node {layer.name}: tile {h}x{w} outside the output")
    tiling = make_tiling(layer, region, c, h, w, double)
    if tiling.l1_bytes > budget:
        raise EdgesynthError(
            f"ONNX node {layer.name}: a {c}x{h}x{w} tile needs {tiling.l1_bytes} bytes of L1; "
            f"{budget} are available"
        )
    return tiling


def greedy_tiling(layer: PulpLayer, region: Region, budget: int, double: bool) -> Tiling | None:
    """A quick feasible tiling (the largest rows, then columns, then channels that fit): the
    constraint model's starting point and bound."""
    choices = channel_choices(layer, region.c)
    widths = param_bytes_per_channel(layer)  # the same for every candidate

    def fits(c: int, h: int, w: int) -> bool:
        return make_tiling(layer, region, c, h, w, double, widths).l1_bytes <= budget

    top = _most_rows_or_columns(layer, region, choices[-1], double, widths, fits)
    if top is not None or len(choices) == 1:  # all channels (one channel tile)
        return top
    # Below all channels there are several channel tiles, so every buffer is doubled or none
    # is: a tile's L1 bytes grow with its channels and columns. The most channels whose 1x1
    # tile fits, by bisection:
    lo, hi = -1, len(choices) - 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(choices[mid], 1, 1):
            lo = mid
        else:
            hi = mid - 1
    if lo < 0:
        return None
    return _most_rows_or_columns(layer, region, choices[lo], double, widths, fits)


def _most_rows_or_columns(
    layer: PulpLayer,
    region: Region,
    c: int,
    double: bool,
    widths: list[int],
    fits: Callable[[int, int, int], bool],
) -> Tiling | None:
    """The tile of `c` channels with the most full rows that fit, else one row with the most
    columns that fit; None when not even a 1x1 tile fits."""
    w_out = layer.out_shape[2]
    if fits(c, 1, w_out):
        h = _most(region.h, lambda h: fits(c, h, w_out))
        return make_tiling(layer, region, c, h, w_out, double, widths)
    if fits(c, 1, 1):
        w = _most(w_out, lambda w: fits(c, 1, w))
        return make_tiling(layer, region, c, 1, w, double, widths)
    return None


def _most(limit: int, ok: Callable[[int], bool]) -> int:
    """The largest n in 1..limit with ok(n), ok(1) being true and ok monotone."""
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


# -- the constraint model -------------------------------------------------------------------


def solve_tiling(layer: PulpLayer, region: Region, budget: int, double: bool) -> Tiling:
    """The best tile shape for `layer` computing `region` within `budget` bytes of L1."""
    start = greedy_tiling(layer, region, budget, double)
    if start is not None and start.tiles == 1:  # the whole region at once: the only best tile
        return start
    cp_model = load_cp_model()
    w_out = layer.out_shape[2]
    m = cp_model.CpModel()
    choices = channel_choices(layer, region.c)
    c = m.NewIntVarFromDomain(cp_model.Domain.FromValues(choices), "c")
    h = m.NewIntVar(1, region.h, "h")
    w = m.NewIntVar(1, w_out, "w")
    n_c, tiles = _tile_counts(m, region, w_out, c, h, w)
    in_elems, max_in_c = _input_elements(m, layer, region, c, h, w)
    hw = m.NewIntVar(1, region.h * w_out, "hw")
    m.AddMultiplicationEquality(hw, [h, w])
    y_elems = m.NewIntVar(1, region.c * region.h * w_out, "y_elems")
    m.AddMultiplicationEquality(y_elems, [hw, c])
    xy_bytes, wp_bytes = _buffer_bytes(m, layer, region, c, in_elems, max_in_c, y_elems)
    if double:
        _fit_double_buffered(m, layer, region, budget, tiles, n_c, xy_bytes, wp_bytes, max_in_c)
    else:
        m.Add(xy_bytes + wp_bytes <= budget)
    _minimise_tiles_then_traffic(m, layer, region, tiles, in_elems, max_in_c)
    if start is not None:  # a feasible start bounds the search
        m.AddHint(c, start.c)
        m.AddHint(h, start.h)
        m.AddHint(w, start.w)
        m.Add(tiles <= start.tiles)

    # 2.0 is a work limit: the same plan everywhere
    solver = new_solver(seconds=30.0, effort=2.0, seed=0)
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        smallest = make_tiling(layer, region, choices[0], 1, 1, double)
        raise EdgesynthError(
            f"ONNX node {layer.name}: even the smallest tile ({choices[0]} channels x 1 x 1) "
            f"needs {smallest.l1_bytes} bytes of L1; {budget} are available"
        )
    tiling = make_tiling(layer, region, solver.Value(c), solver.Value(h), solver.Value(w), double)
    if tiling.l1_bytes > budget:  # the model and Tiling.layout must agree
        raise EdgesynthError(
            f"ONNX node {layer.name}: internal tiling error ({tiling.l1_bytes} > {budget})"
        )
    return tiling


def _ceil_count(m: Any, var: Any, total: int, name: str) -> Any:
    """A variable equal to ceil(total / var)."""
    n = m.NewIntVar(1, total, name)
    prod = m.NewIntVar(1, total * total + total, f"{name}_prod")
    m.AddMultiplicationEquality(prod, [n, var])
    m.Add(prod >= total)
    m.Add(prod - var <= total - 1)
    return n


def _tile_counts(m: Any, region: Region, w_out: int, c: Any, h: Any, w: Any) -> tuple[Any, Any]:
    """The number of channel tiles and the number of tiles."""
    n_c = _ceil_count(m, c, region.c, "n_c")
    n_h = _ceil_count(m, h, region.h, "n_h")
    n_w = _ceil_count(m, w, w_out, "n_w")
    n_ch = m.NewIntVar(1, region.c * region.h, "n_ch")
    m.AddMultiplicationEquality(n_ch, [n_c, n_h])
    tiles = m.NewIntVar(1, region.c * region.h * w_out, "tiles")
    m.AddMultiplicationEquality(tiles, [n_ch, n_w])
    return n_c, tiles


def _input_elements(
    m: Any, layer: PulpLayer, region: Region, c: Any, h: Any, w: Any
) -> tuple[Any, int]:
    """The elements of one input tile (rows and columns the outputs read, channels they need),
    and the most input channels a tile can have."""
    cin, h_in, w_in = layer.in_shapes[0]
    if layer.kind == "linear":
        in_hw = m.NewConstant(1)
        in_c_var = m.NewConstant(cin)
        max_in_c = cin
    else:
        kh, kw = layer.kernel
        sh, sw = layer.stride
        dh, dw = layer.dilation
        in_h = m.NewIntVar(1, h_in, "in_h")
        in_w = m.NewIntVar(1, w_in, "in_w")
        m.AddMinEquality(in_h, [h_in, (h - 1) * sh + (kh - 1) * dh + 1])
        m.AddMinEquality(in_w, [w_in, (w - 1) * sw + (kw - 1) * dw + 1])
        in_hw = m.NewIntVar(1, h_in * w_in, "in_hw")
        m.AddMultiplicationEquality(in_hw, [in_h, in_w])
        in_c_var, max_in_c = _input_channels(m, layer, region, c)
    in_elems = m.NewIntVar(1, max_in_c * h_in * w_in, "in_elems")
    m.AddMultiplicationEquality(in_elems, [in_hw, in_c_var])
    return in_elems, max_in_c


def _input_channels(m: Any, layer: PulpLayer, region: Region, c: Any) -> tuple[Any, int]:
    """The input channels a tile of `c` output channels reads: all of them for a standard
    convolution, its groups' for a grouped one, its own for pools and additions."""
    cin = layer.in_shapes[0][0]
    if layer.kind == "conv" and layer.groups == 1:
        return m.NewConstant(cin), cin
    if layer.kind == "conv":
        opg, ipg = layer.cout // layer.groups, cin // layer.groups
        groups_t = m.NewIntVar(1, layer.groups, "groups_t")
        m.Add(c == opg * groups_t)
        in_c_var = m.NewIntVar(1, cin, "in_c")
        m.Add(in_c_var == ipg * groups_t)
        return in_c_var, cin
    return c, region.c


def _aligned(m: Any, bits_expr: Any, upper_bits: int, name: str) -> Any:
    """Bytes of a buffer of `bits_expr` bits rounded up to the 8-byte boundary (exactly as
    `Tiling.layout` lays L1 out)."""
    k = m.NewIntVar(0, upper_bits // 64 + 1, name)
    m.Add(64 * k >= bits_expr)
    m.Add(64 * k <= bits_expr + 63)
    return 8 * k


def _buffer_bytes(
    m: Any,
    layer: PulpLayer,
    region: Region,
    c: Any,
    in_elems: Any,
    max_in_c: int,
    y_elems: Any,
) -> tuple[Any, Any]:
    """L1 bytes of one tile's buffers: inputs and output, then weights and parameters."""
    _, h_in, w_in = layer.in_shapes[0]
    w_out = layer.out_shape[2]
    x_upper = max_in_c * h_in * w_in
    x_bytes = [
        _aligned(m, in_elems * s.bits, x_upper * s.bits, f"x{k}")
        for k, s in enumerate(layer.in_storage)
    ]
    out_bits = layer.out_storage.bits
    y_bytes = _aligned(m, y_elems * out_bits, region.c * region.h * w_out * out_bits, "y")
    row_bytes = _weight_row_bytes(layer)
    w_parts = []
    if row_bytes:
        w_parts.append(_aligned(m, c * (8 * row_bytes), region.c * 8 * row_bytes, "w"))
    for k, width in enumerate(param_bytes_per_channel(layer)):
        w_parts.append(_aligned(m, c * (8 * width), region.c * 8 * width, f"p{k}"))
    return sum(x_bytes) + y_bytes, sum(w_parts) if w_parts else 0


def _weight_row_bytes(layer: PulpLayer) -> int:
    """Bytes of one output channel's weights (0 without weights)."""
    if layer.weight is None:
        return 0
    return layer.w_storage.nbytes(int(layer.weight[0].size))


def _fit_double_buffered(
    m: Any,
    layer: PulpLayer,
    region: Region,
    budget: int,
    tiles: Any,
    n_c: Any,
    xy_bytes: Any,
    wp_bytes: Any,
    max_in_c: int,
) -> None:
    """The L1 budget with a second input and output buffer when there are several tiles, and
    a second weight buffer when there are several channel tiles."""
    _, h_in, w_in = layer.in_shapes[0]
    w_out = layer.out_shape[2]
    x_upper = max_in_c * h_in * w_in
    w_upper = 8 * region.c * (_weight_row_bytes(layer) + sum(param_bytes_per_channel(layer)))
    multi = m.NewBoolVar("multi")
    m.Add(tiles >= 2).OnlyEnforceIf(multi)
    m.Add(tiles <= 1).OnlyEnforceIf(multi.Not())
    multi_c = m.NewBoolVar("multi_c")
    m.Add(n_c >= 2).OnlyEnforceIf(multi_c)
    m.Add(n_c <= 1).OnlyEnforceIf(multi_c.Not())
    limit = 64 * (budget + 1) + 8 * x_upper * 4 + 8 * region.c * region.h * w_out * 4
    xy = m.NewIntVar(0, limit, "xy")
    m.Add(xy == xy_bytes)
    extra_xy = m.NewIntVar(0, limit, "extra_xy")
    m.AddMultiplicationEquality(extra_xy, [multi, xy])
    wp = m.NewIntVar(0, limit + w_upper, "wp")
    m.Add(wp == wp_bytes)
    extra_w = m.NewIntVar(0, limit + w_upper, "extra_w")
    m.AddMultiplicationEquality(extra_w, [multi_c, wp])
    m.Add(xy_bytes + wp_bytes + extra_xy + extra_w <= budget)


def _minimise_tiles_then_traffic(
    m: Any, layer: PulpLayer, region: Region, tiles: Any, in_elems: Any, max_in_c: int
) -> None:
    """The objective: fewest tiles, then least input DMA traffic (halos re-read)."""
    _, h_in, w_in = layer.in_shapes[0]
    max_tiles = region.c * region.h * layer.out_shape[2]
    x_bits = sum(in_elems * s.bits for s in layer.in_storage)
    x_bytes_max = sum(s.nbytes(max_in_c * h_in * w_in) for s in layer.in_storage)
    traffic_x = m.NewIntVar(0, max_tiles * 8 * x_bytes_max + 1, "traffic_x")
    x_bits_var = m.NewIntVar(0, 8 * x_bytes_max + 1, "x_bits")
    m.Add(x_bits_var == x_bits)  # traffic counted in bits, before alignment
    m.AddMultiplicationEquality(traffic_x, [tiles, x_bits_var])
    big = max_tiles * 8 * x_bytes_max + 1
    m.Minimize(tiles * big + traffic_x)
