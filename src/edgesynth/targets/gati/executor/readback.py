"""Rebuild a compiled Gati program from its files: the layers the instruction stream describes,
as a `GatiModel`, and so the integer graph it computes (`program_graph.integer_graph`).

Everything comes from `program.dwp` (instructions, weight tiles, biases, decoded by the
functional model's loader with its own field tables, `executor/isa.py`, never the encoder's)
and the host contract in `report.json` (the input's name, shape and scale, the dispatched
outputs): the compiler's data structures are not used. Comparing the graph
read back with the one compiled checks the encoder: weight tiling, bias packing and every field.
Which layers each layer reads (a branch, an element-wise operand, a concatenation) follows from
the addresses: an operand's DRAM range is the run of outputs (or the input) that tiles it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.graph import pool_output_size
from edgesynth.targets.gati import device
from edgesynth.targets.gati.chain import FusedLayer, LayerChain, PoolSpec
from edgesynth.targets.gati.executor import isa as own_isa
from edgesynth.targets.gati.executor.machine import GatiMachine, LayerProgram
from edgesynth.targets.gati.layers import GatiLayer, GatiModel


def _read(rom: np.ndarray, start: int, end: int, dtype: str) -> np.ndarray:
    return np.ascontiguousarray(rom[start:end]).view(dtype).astype(np.int64)


def _conv_weights(lp: LayerProgram, rom: np.ndarray) -> np.ndarray:
    """(KN, IC, KH, KW) from the 576-byte tiles: (kernel itr, channel itr, engine, row, col)."""
    c, o = lp.block, lp.output
    ki, ci = o["KernelItr"], o["ChannelItr"]
    tiles = _read(rom, c["WeightStartAddress"], c["WeightEndAddress"], "i1")
    tiles = tiles.reshape(ki, ci, device.ENGINES, device.ENGINE_ROWS, device.ENGINE_COLS)
    taps = tiles.transpose(0, 4, 1, 2, 3).reshape(ki * device.ENGINE_COLS, ci * device.ENGINES, -1)
    kh, kw = c["KH"], c["KW"]
    return taps[: c["KN"], : c["IC"], : kh * kw].reshape(c["KN"], c["IC"], kh, kw)


def _fc_weights(lp: LayerProgram, rom: np.ndarray) -> np.ndarray:
    """(M, N) from blocks of N rows x 32 columns."""
    f = lp.block
    n, m = f["WeightRows"], f["WeightCols"]
    blocks = _read(rom, f["WeightStartAddress"], f["WeightEndAddress"], "i1")
    mat = blocks.reshape(-1, n, device.FC_WIDTH).transpose(1, 0, 2).reshape(n, -1)
    return np.ascontiguousarray(mat[:, :m].T)


def _bias(lp: LayerProgram, rom: np.ndarray, channels: int) -> np.ndarray | None:
    t = lp.tail
    if not t["BiasEn"]:
        return None
    dtype = "i1" if t["BiasWidth"] == 8 else "<i4"
    bias = _read(rom, t["BiasStartAddress"], t["BiasEndAddress"], dtype)[:channels]
    if len(bias) != channels:
        raise EdgesynthError(
            f"DRAM address {lp.address:#x}: the bias region holds {len(bias)} of the layer's "
            f"{channels} channels"
        )
    return bias


def _side_pads(amount: int, sides: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from a pad amount and a PadSides bit vector."""

    def pad(bit: int) -> int:
        return amount if sides & bit else 0

    return (
        pad(own_isa.PAD_TOP),
        pad(own_isa.PAD_LEFT),
        pad(own_isa.PAD_BOTTOM),
        pad(own_isa.PAD_RIGHT),
    )


def _pool(t: own_isa.Inst, name: str, shape: tuple[int, ...]) -> PoolSpec | None:
    if not t["PoolEn"]:
        return None
    kh, kw, s = t["PoolHeight"], t["PoolWidth"], t["PoolStride"]
    pads = _side_pads(t["PoolPadding"], t["PoolPadSides"])
    _, h, w = shape
    ceil = bool(t["PoolCeil"])
    spec = PoolSpec(own_isa.POOL_TYPES[t["PoolType"]], (kh, kw), (s, s), pads, ceil, True, name)
    spec.in_hw = (h, w)
    spec.out_hw = (
        pool_output_size(h, kh, s, pads[0], pads[2], ceil),
        pool_output_size(w, kw, s, pads[1], pads[3], ceil),
    )
    return spec


def _layer(
    lp: LayerProgram, rom: np.ndarray, shape: tuple[int, ...], name: str
) -> tuple[FusedLayer, GatiLayer]:
    b, t = lp.block, lp.tail
    if b.name == "ELTWISE":
        dims = (b["IC"], b["IH"], b["IW"])
        fl = FusedLayer(name, "eltwise", dims, [name], conv_shape=dims)
        fl.eltwise = own_isa.ELT_OPS[b["Operation"]]
        gl = GatiLayer([name], 1.0, 1.0, 1.0, 1.0, bool(t["QuantEn"]))
        gl.operand_scales = (b["AScale"], b["BScale"])
        gl.operand_shifts = (b["AShift"], b["BShift"])
    elif b.name == "CONV":
        weights = _conv_weights(lp, rom)
        fl = FusedLayer(
            name,
            "conv",
            (b["IC"], b["IH"], b["IW"]),
            [name],
            weights,
            strides=(b["Stride"], b["Stride"]),
            conv_shape=(b["KN"], b["OH"], b["OW"]),
        )
        gl = GatiLayer([name], 1.0, 1.0, 1.0, 1.0, bool(t["QuantEn"]), weights=weights)
        gl.pad, gl.pad_sides = b["Pad"], b["PadSides"]
    else:
        weights = _fc_weights(lp, rom)
        fl = FusedLayer(name, "linear", shape, [name], weights, conv_shape=(b["WeightCols"],))
        if b["Flatten"]:
            fl.flatten, fl.in_map = True, shape
            fl.in_shape = (int(np.prod(shape)),)
        gl = GatiLayer([name], 1.0, 1.0, 1.0, 1.0, bool(t["QuantEn"]), weights=weights)
        gl.flat_map = fl.in_map
    gl.bias = _bias(lp, rom, fl.conv_shape[0])
    gl.bias_width = t["BiasWidth"] if t["BiasEn"] else 32
    gl.quant_scale, gl.quant_shift = t["QuantScale"], t["QuantShift"]
    if t["ActEn"]:
        fl.activation = own_isa.ACT_TYPES[t["ActType"]]
        gl.act_param = t["ActParam"]
    fl.pool = _pool(t, name, fl.conv_shape) if b.name != "FC" else None
    if fl.pool is not None:
        gl.pool_pad, gl.pool_pad_sides = t["PoolPadding"], t["PoolPadSides"]
        gl.pool_ceil, gl.pool_global = fl.pool.ceil, fl.pool.type == "global_avg"
        fl.out_shape = (fl.conv_shape[0], *fl.pool.out_hw)
    else:
        fl.out_shape = fl.conv_shape
    return fl, gl


# (start, end, layer): where the input (layer -1) and every layer's output lie
Extent = tuple[int, int, int]


def _output_extent(lp: LayerProgram, k: int) -> Extent:
    o, elem = lp.output, 1 if lp.tail["QuantEn"] else 4
    if lp.block.name == "FC":
        size = device.align(lp.block["WeightCols"] * elem, device.WORD_BYTES)
    else:
        size = o["KernelItr"] * -(-o["ImageDimOutput"] // 8) * 64 * elem
    return o["OutputAddr"], o["OutputAddr"] + size, k


def _producers(extents: list[Extent], start: int, end: int, address: int) -> list[int]:
    """The layers whose outputs, one after another, fill [start, end)."""
    found: list[int] = []
    at = start
    while at < end:
        nxt = [e for e in extents if e[0] == at and e[1] <= end]
        if not nxt:
            raise EdgesynthError(
                f"DRAM address {address:#x}: the operand [{start:#x}, {end:#x}) is not the input "
                "or a run of layer outputs"
            )
        found.append(nxt[-1][2])
        at = nxt[-1][1]
    return found


def _operands(lp: LayerProgram, extents: list[Extent]) -> list[list[int]]:
    b = lp.block
    if b.name == "ELTWISE":
        ranges = [("AStartAddress", "AEndAddress"), ("BStartAddress", "BEndAddress")]
    else:
        ranges = [("ImageStartAddress", "ImageEndAddress" if b.name == "CONV" else "ImageEndAddr")]
    return [_producers(extents, b[lo], b[hi], lp.address) for lo, hi in ranges]


def _shape(layers: list[FusedLayer], in_shape: tuple[int, ...], src: list[int]) -> tuple[int, ...]:
    shapes = [in_shape if j < 0 else layers[j].out_shape for j in src]
    if len(shapes) == 1:
        return tuple(shapes[0])
    return (sum(s[0] for s in shapes), *shapes[0][1:])


def read_model(stream: bytes, host: Mapping[str, Any], path: str = "") -> GatiModel:
    """The quantized model a program stream runs, with the host contract's names and scales."""
    machine = GatiMachine(stream)
    inp = host["input"]
    names = {o["layer"]: o["tensor"] for o in host["outputs"]}
    scales = {o["layer"]: o["scale"] for o in host["outputs"]}
    in_shape = tuple(inp["shape"])
    extents: list[Extent] = [(inp["address"], inp["address"] + inp["size"], -1)]
    layers: list[FusedLayer] = []
    glayers: list[GatiLayer] = []
    for k, lp in enumerate(machine.layers):
        sources = _operands(lp, extents)
        fl, gl = _layer(lp, machine.rom, _shape(layers, in_shape, sources[0]), f"layer{k}")
        fl.sources = sources
        fl.output = names.get(k, f"layer{k}")
        gl.out_scale = scales.get(k, 1.0)
        layers.append(fl)
        glayers.append(gl)
        extents.append(_output_extent(lp, k))
    glayers[0].in_scale = inp["scale"]
    chain = LayerChain(
        path,
        inp["name"],
        tuple(inp["shape"]),
        host["output_tensor"],
        layers,
        host.get("host_post"),
        None,
        0,
        tuple(host["output_shape"]),
    )
    return GatiModel(chain, glayers, inp["scale"], inp["layout"])
