"""The whole plan of a network on GAP8: memory homes (L3/L2), per-layer L1 tiling, and the
report (JSON and a readable table) with tile shapes, tile counts, L1/L2 bytes, DMA bytes, MACs
and an estimated cycle count.

The cycle estimate is a model, not a measurement: compute at the cluster's peak MAC rate (or
one element per core per cycle for pooling/additions, times the window), L2<->L1 DMA at the
cluster DMA's bandwidth plus a setup cost per command, a fixed cost per tile, L3 traffic at the
HyperRAM's rate. Double buffering overlaps DMA with compute (the larger of the two counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g
from edgesynth.targets.pulp.device import GAP8, Device
from edgesynth.targets.pulp.lower import PulpLayer
from edgesynth.targets.pulp.memory import (
    LayerMemory,
    MemoryPlan,
    blob_layout,
    has_blob,
    plan_memory,
)
from edgesynth.targets.pulp.tiler import Region, Tiling, check_tile, solve_tiling, span


@dataclass
class PlanOptions:
    l1: int | None = None  # L1 bytes for tiles (default: the device's budget after stacks)
    l2: int | None = None  # L2 bytes (default: the device's)
    code_reserve: int | None = None  # L2 kept for code (default: the device's)
    double_buffer: bool = True
    prefetch: bool = True
    tiles: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # forced (c, h, w)

    def budgets(self, device: Device) -> tuple[int, int]:
        """The L1 bytes for tiles and the L2 bytes for data; an option out of range refused."""
        l1 = device.l1_tile_budget if self.l1 is None else self.l1
        l2 = device.l2_bytes if self.l2 is None else self.l2
        reserve = device.code_reserve if self.code_reserve is None else self.code_reserve
        chip = device.name.upper()
        if not 1 <= l1 <= device.l1_tile_budget:
            raise EdgesynthError(
                f"{l1} bytes of L1 for tiles is out of range: give 1 to {device.l1_tile_budget} "
                f"({chip}'s {device.l1_bytes}-byte L1 less the {device.cores} cores' stacks; "
                "the default is the most)",
                key="--l1",
            )
        if not 0 <= reserve < device.l2_bytes:
            raise EdgesynthError(
                f"a code reserve of {reserve} bytes is out of range: give 0 to "
                f"{device.l2_bytes - 1} (default {device.code_reserve})",
                key="--code-reserve",
            )
        if not reserve < l2 <= device.l2_bytes:
            why = (
                f"is more than {chip}'s L2"
                if l2 > device.l2_bytes
                else f"with a code reserve of {reserve} bytes (--code-reserve) leaves none "
                "for the network"
            )
            raise EdgesynthError(
                f"L2 of {l2} bytes {why}: --l2 takes {reserve + 1} to {device.l2_bytes} bytes "
                "with this reserve",
                key="--code-reserve" if self.l2 is None else "--l2",
            )
        return l1, l2 - reserve

    def to_json(self) -> dict[str, Any]:
        return {
            "l1": self.l1,
            "l2": self.l2,
            "code_reserve": self.code_reserve,
            "double_buffer": self.double_buffer,
            "prefetch": self.prefetch,
            "tiles": {str(k): list(v) for k, v in self.tiles.items()},
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PlanOptions:
        return cls(
            l1=d.get("l1"),
            l2=d.get("l2"),
            code_reserve=d.get("code_reserve"),
            double_buffer=bool(d.get("double_buffer", True)),
            prefetch=bool(d.get("prefetch", True)),
            tiles={int(k): tuple(v) for k, v in d.get("tiles", {}).items()},
        )


@dataclass
class Traffic:
    l2_l1_bytes: int
    dma_commands: int
    l3_bytes: int


@dataclass
class LayerPlan:
    layer: PulpLayer
    memory: LayerMemory
    tiling: Tiling
    traffic: Traffic
    cycles: int
    single: Tiling | None = None  # the single-buffered tiling, for the cost of double buffering
    single_cycles: int | None = None

    def to_json(self) -> dict[str, Any]:
        L, m, t = self.layer, self.memory, self.tiling
        return {
            "index": L.index,
            "name": L.name,
            "op": L.op_label,
            "kind": L.kind,
            "in_shape_chw": [list(s) for s in L.in_shapes],
            "out_shape_chw": list(L.out_shape),
            "bits": {
                "in": [str(s) for s in L.in_storage],
                "weights": str(L.w_storage) if L.w_storage else None,
                "out": str(L.out_storage),
            },
            "macs": L.macs,
            "memory": {
                "where": m.describe(),
                "stage": m.stage,
                "prefetched_weights": m.prefetched,
                "stripe_rows": m.stripe_rows,
                "chunk_channels": m.chunk_channels,
                "l2_in_use": m.l2_in_use,
                "l2_input_bytes": m.x_buf_bytes,
                "l2_output_bytes": m.y_buf_bytes,
                "l2_weight_bytes": m.w_buf_bytes,
            },
            "tiling": t.to_json(),
            "dma": {
                "l2_l1_bytes": self.traffic.l2_l1_bytes,
                "commands": self.traffic.dma_commands,
                "l3_bytes": self.traffic.l3_bytes,
            },
            "cycles": self.cycles,
            "single_buffered": None
            if self.single is None
            else {
                "tiles": self.single.tiles,
                "l1_bytes": self.single.l1_bytes,
                "cycles": self.single_cycles,
            },
            "onnx_nodes": L.sources,
        }


@dataclass
class Plan:
    device: Device
    options: PlanOptions
    l1_budget: int
    l2_budget: int
    layers: list[LayerPlan]
    memory: MemoryPlan
    inputs_order: list[str] = field(default_factory=list)  # the graph's inputs
    warnings: list[str] = field(default_factory=list)

    def io_layout(self) -> dict[str, Any]:
        """What a program's caller needs: each input's and each layer output's shape, storage
        and size (written to layout.json; `edgesynth pulp run` reads it)."""
        homes = self.memory.homes

        def entry(name: str) -> dict[str, Any]:
            h = homes[name]
            return {
                "tensor": name,
                "shape_chw": list(h.shape),
                "bits": h.storage.bits,
                "signed": h.storage.signed,
                "bytes": h.nbytes,
            }

        return {
            "format": "edgesynth-pulp-layout/1",
            "weights_bytes": self.memory.weights_bytes,
            "inputs": [entry(n) for n in self.inputs_order],
            "layers": [
                {
                    "index": lp.layer.index,
                    "name": lp.layer.name,
                    **entry(lp.layer.output),
                    "acc_tensor": lp.layer.acc_tensor,
                }
                for lp in self.layers
            ],
        }

    @property
    def total_cycles(self) -> int:
        return sum(lp.cycles for lp in self.layers)

    @property
    def max_l1(self) -> int:
        return max((lp.tiling.l1_bytes for lp in self.layers), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device.name,
            "options": self.options.to_json(),
            "l1_budget": self.l1_budget,
            "l2_budget": self.l2_budget,
            "l2_peak": self.memory.l2_peak,
            "l1_peak": self.max_l1,
            "l3_bytes": self.memory.l3_bytes,
            "weights_bytes": self.memory.weights_bytes,
            "macs": sum(lp.layer.macs for lp in self.layers),
            "cycles": self.total_cycles,
            "milliseconds": round(1000 * self.total_cycles / self.device.frequency_hz, 3),
            "layers": [lp.to_json() for lp in self.layers],
        }

    def table(self) -> str:
        head = (
            f"{'#':>3} {'layer':<22} {'op':<14} {'out CxHxW':>13} {'tile CxHxW':>12} "
            f"{'tiles':>5} {'1buf':>5} {'L1 B':>6} {'L2 B':>7} {'DMA B':>9} {'MACs':>10} "
            f"{'cycles':>10}  where"
        )
        lines = [head, "-" * len(head)]
        for lp in self.layers:
            L, t = lp.layer, lp.tiling
            c, h, w = L.out_shape
            lines.append(
                f"{L.index:>3} {L.name[:22]:<22} {L.op_label[:14]:<14} {f'{c}x{h}x{w}':>13} "
                f"{f'{t.c}x{t.h}x{t.w}':>12} {t.tiles:>5} "
                f"{lp.single.tiles if lp.single else '':>5} {t.l1_bytes:>6} "
                f"{lp.memory.l2_in_use:>7} {lp.traffic.l2_l1_bytes:>9} {L.macs:>10} "
                f"{lp.cycles:>10}  {lp.memory.describe()}"
                + (" (w prefetched)" if lp.memory.prefetched else "")
            )
        ms = 1000 * self.total_cycles / self.device.frequency_hz
        lines.append(
            f"L1 peak {self.max_l1} of {self.l1_budget} B; L2 peak {self.memory.l2_peak} of "
            f"{self.l2_budget} B; L3 {self.memory.l3_bytes} B; "
            f"{sum(lp.layer.macs for lp in self.layers)} MACs; about {self.total_cycles} cycles "
            f"({ms:.2f} ms at {self.device.frequency_hz // 1_000_000} MHz)"
            + ("" if self.options.double_buffer else "; single-buffered")
        )
        singles = [lp for lp in self.layers if lp.single is not None]
        if singles:
            extra = sum(lp.tiling.tiles - lp.single.tiles for lp in singles)
            saved = sum(lp.single_cycles - lp.cycles for lp in singles)
            lines.append(
                f"double buffering costs {extra} more tiles than single buffering (column 1buf) "
                f"and saves about {saved} cycles (DMA overlapped with compute)"
            )
        return "\n".join(lines)


# -- traffic and cycles ---------------------------------------------------------------------------


def _axis_sum(
    total: int, tile: int, start: int, kernel: int, stride: int, dilation: int, pad: int, size: int
) -> int:
    """Sum over the tiles along one axis of the input rows each reads (clipped to the data)."""
    out = 0
    for t0 in range(start, start + total, tile):
        t1 = min(t0 + tile, start + total)
        lo = t0 * stride - pad
        hi = (t1 - 1) * stride - pad + (kernel - 1) * dilation + 1
        out += max(0, min(hi, size) - max(lo, 0))
    return out


def traffic(layer: PulpLayer, memory: LayerMemory, tiling: Tiling) -> Traffic:
    c_out, h_out, w_out = layer.out_shape
    rows_regions = [
        (h0, min(h0 + memory.stripe_rows, h_out)) for h0 in range(0, h_out, memory.stripe_rows)
    ]
    chunks = [
        (c0, min(c0 + memory.chunk_channels, c_out))
        for c0 in range(0, c_out, memory.chunk_channels)
    ]
    l2l1 = 0
    commands = 0
    l3 = 0
    blob = blob_layout(layer, layer.cout) if has_blob(layer) else None
    for h0, h1 in rows_regions:
        for k, (shape, storage) in enumerate(zip(layer.in_shapes, layer.in_storage, strict=True)):
            cin, h_in, w_in = shape
            if layer.kind == "linear":
                rows_sum, cols_sum, n_rows = 1, 1, 1
            else:
                rows_sum = _axis_sum(
                    h1 - h0,
                    tiling.h,
                    h0,
                    layer.kernel[0],
                    layer.stride[0],
                    layer.dilation[0],
                    layer.pads[0],
                    h_in,
                )
                cols_sum = _axis_sum(
                    w_out,
                    tiling.w,
                    0,
                    layer.kernel[1],
                    layer.stride[1],
                    layer.dilation[1],
                    layer.pads[1],
                    w_in,
                )
                n_rows = tiling.in_h
            for c0, c1 in chunks:
                n_c = -(-(c1 - c0) // tiling.c)
                if layer.kind == "linear" or (layer.kind == "conv" and layer.groups == 1):
                    ch_sum = cin * n_c  # every channel tile reads every input channel
                elif layer.kind == "conv":
                    ch_sum = (c1 - c0) * (cin // layer.groups) // (layer.cout // layer.groups)
                else:
                    ch_sum = c1 - c0
                l2l1 += storage.nbytes(rows_sum * cols_sum * ch_sum)
                commands += n_c * -(-(h1 - h0) // tiling.h) * -(-w_out // tiling.w) * n_rows
            if memory.x_l3[k]:
                in_rows = span(h1 - h0, layer.kernel[0], layer.stride[0], layer.dilation[0], h_in)
                l3 += (
                    storage.nbytes(cin * in_rows * w_in)
                    if layer.kind != "linear"
                    else storage.nbytes(cin)
                )
        for c0, c1 in chunks:
            n_tiles = -(-(c1 - c0) // tiling.c) * -(-(h1 - h0) // tiling.h) * -(-w_out // tiling.w)
            if blob is not None:
                l2l1 += (c1 - c0) * blob.row_bytes + sum(
                    width * (c1 - c0) for _, width, _ in blob.arrays
                )
                commands += -(-(c1 - c0) // tiling.c) * (1 + len(blob.arrays))
                if memory.w_l3:
                    l3 += (c1 - c0) * blob.row_bytes + sum(
                        width * (c1 - c0) for _, width, _ in blob.arrays
                    )
            l2l1 += layer.out_storage.nbytes((c1 - c0) * (h1 - h0) * w_out)
            commands += n_tiles * tiling.h
        if memory.y_l3:
            l3 += layer.out_storage.nbytes(c_out * (h1 - h0) * w_out)
    if blob is not None and not memory.w_l3:
        l3 += blob.nbytes
    return Traffic(l2l1, commands, l3)


def estimate_cycles(
    layer: PulpLayer, memory: LayerMemory, tiling: Tiling, tr: Traffic, device: Device
) -> int:
    c, h, w = layer.out_shape
    if layer.kind in ("conv", "linear"):
        compute = -(-layer.macs // device.macs_per_cycle)
    elif layer.kind == "pool":
        compute = -(-(c * h * w * layer.kernel[0] * layer.kernel[1]) // device.cores)
    else:
        compute = -(-(c * h * w * len(layer.inputs)) // device.cores)
    dma = (
        -(-tr.l2_l1_bytes // device.l2_bytes_per_cycle) + tr.dma_commands * device.dma_setup_cycles
    )
    overhead = tiling.tiles * device.tile_overhead_cycles
    l3 = tr.l3_bytes
    if memory.prefetched and not memory.w_l3 and has_blob(layer):
        l3 -= blob_layout(layer, layer.cout).nbytes  # loaded while the previous layer ran
    l3_cycles = int(max(l3, 0) / device.l3_bytes_per_cycle)
    body = max(compute, dma) if tiling.double and tiling.tiles > 1 else compute + dma
    return int(body + overhead + l3_cycles)


# -- planning ----------------------------------------------------------------------------------


def check_tile_layers(tiles: dict[int, tuple[int, int, int]], layers: list[PulpLayer]) -> None:
    """Every forced tile names a layer by its index (0-based, the `#` of the plan table)."""
    unknown = sorted(set(tiles) - {layer.index for layer in layers})
    if not unknown:
        return
    shown = [f"{layer.index} ({layer.name})" for layer in layers]
    if len(shown) > 8:
        shown = [*shown[:6], "...", shown[-1]]
    raise EdgesynthError(
        f"no layer {' or '.join(map(str, unknown))}: LAYER in LAYER=CxHxW is the layer's index "
        f"(0-based, the `#` column of the plan table); this network's layers are "
        f"{', '.join(shown)}",
        key="--tile",
    )


def make_plan(
    layers: list[PulpLayer], graph: g.Graph, options: PlanOptions, device: Device = GAP8
) -> Plan:
    l1_budget, l2_budget = options.budgets(device)
    check_tile_layers(options.tiles, layers)
    memory = plan_memory(layers, graph, l2_budget, prefetch=options.prefetch)
    plans: list[LayerPlan] = []
    warnings: list[str] = []
    for layer, mem in zip(layers, memory.layers, strict=True):
        region = Region(mem.chunk_channels, mem.stripe_rows)
        forced = options.tiles.get(layer.index)
        if forced is not None:
            tiling = check_tile(layer, region, *forced, l1_budget, options.double_buffer)
        else:
            try:
                tiling = solve_tiling(layer, region, l1_budget, options.double_buffer)
            except EdgesynthError:
                if not options.double_buffer:
                    raise
                tiling = solve_tiling(layer, region, l1_budget, False)
                warnings.append(
                    f"ONNX node {layer.name}: no double-buffered tiling fits L1; this layer is "
                    "single-buffered"
                )
        tr = traffic(layer, mem, tiling)
        lp = LayerPlan(layer, mem, tiling, tr, estimate_cycles(layer, mem, tiling, tr, device))
        if tiling.double and forced is None:  # what double buffering costs, for the report
            lp.single = solve_tiling(layer, region, l1_budget, False)
            single_tr = traffic(layer, mem, lp.single)
            lp.single_cycles = estimate_cycles(layer, mem, lp.single, single_tr, device)
        plans.append(lp)
    return Plan(device, options, l1_budget, l2_budget, plans, memory, list(graph.inputs), warnings)
