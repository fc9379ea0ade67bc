"""The plan step: a quantized network compiled into Gati instructions, a DRAM layout and a DWP
stream.

Each layer is four instructions: START, the megablock (CONV or FC), TailBlock, OutputBlock.
A layer without weights (kind `none`: a pooling or activation that could not be fused) runs
as an identity megablock: a 1x1 CONV (or FC) with unit weights and QuantScale 1,
QuantShift 0, whose tail block does the work. An element-wise layer's megablock is ELTWISE
(edgesynth's instruction for the seed's element-wise block), reading two maps. The layers a
concatenation joins write adjacent channel ranges of one DRAM buffer (`concat.py`), which the
reader reads as one map.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError, did_you_mean
from edgesynth.targets.gati import device, dwp, isa, layout
from edgesynth.targets.gati.chain import FusedLayer, LayerChain
from edgesynth.targets.gati.concat import concat_buffers
from edgesynth.targets.gati.layers import GatiLayer, GatiModel
from edgesynth.targets.gati.layout import Region

INSTRUCTIONS_PER_LAYER = 4


@dataclass
class LayerCode:
    """Everything the compiler decided for one layer."""

    index: int
    name: str
    engine: str  # conv | fc | eltwise
    weights: np.ndarray  # the megablock's int8 weights: (KN, IC, KH, KW) or (M, N)
    bias: np.ndarray | None
    in_shape: tuple[int, ...]  # (C, H, W) map or (N,) vector entering the megablock
    conv_shape: tuple[int, ...]  # megablock output before pooling
    out_shape: tuple[int, ...]  # after pooling
    tensor: str  # ONNX tensor this layer produces
    dispatch: bool = False
    dispatch_id: int = 0
    on_chip_acc: bool = False
    regions: dict[str, Region] = field(default_factory=dict)
    instructions: list[isa.Instruction] = field(default_factory=list)

    @property
    def channel_itr(self) -> int:
        return device.cdiv(self.in_shape[0], device.ENGINES) if self.engine == "conv" else 1

    @property
    def kernel_itr(self) -> int:
        if self.engine in ("conv", "eltwise"):
            return device.cdiv(self.conv_shape[0], device.ENGINE_COLS)
        return device.cdiv(self.conv_shape[0], device.FC_WIDTH)


@dataclass
class CompiledProgram:
    model: GatiModel
    layers: list[LayerCode]
    regions: list[Region]
    dram_bytes: int
    input_region: Region
    blob: bytes
    stream: bytes
    warnings: list[str]


def dispatch_id(tensor: str) -> int:
    """A 32-bit integrity id for a dispatched layer, word-aligned (it travels as a DWP address)."""
    return zlib.crc32(tensor.encode()) & 0xFFFFFFFC


def _layer_code(i: int, fl: FusedLayer, g: GatiLayer) -> LayerCode:
    in_shape = tuple(fl.in_map if fl.flatten else fl.in_shape)
    if fl.kind == "eltwise":
        engine, weights = "eltwise", np.zeros((0,), dtype=np.int64)
    elif fl.kind == "conv":
        assert g.weights is not None
        engine, weights = "conv", g.weights
    elif fl.kind == "linear":
        assert g.weights is not None
        engine, weights = "fc", g.weights
    elif len(fl.in_shape) == 3:
        c = fl.in_shape[0]
        engine, weights = "conv", np.eye(c, dtype=np.int64).reshape(c, c, 1, 1)
    else:
        n = fl.in_shape[0]
        engine, weights = "fc", np.eye(n, dtype=np.int64)
    bias = g.bias if g.bias is not None and np.any(g.bias) else None
    return LayerCode(
        i,
        fl.name,
        engine,
        weights.astype(np.int8),
        bias,
        in_shape,
        tuple(fl.conv_shape),
        tuple(fl.out_shape),
        fl.output,
    )


def _select_dispatch(model: GatiModel, codes: list[LayerCode], names: Sequence[str]) -> None:
    codes[-1].dispatch = True
    lookup: dict[str, int] = {}
    for c, g in zip(codes, model.layers, strict=True):
        for key in [*g.onnx_nodes, c.tensor]:
            lookup[key] = c.index
    for name in names:
        if name not in lookup:
            raise EdgesynthError(
                f"--dispatch `{name}` names no ONNX node or tensor of this model."
                + did_you_mean(name, lookup)
            )
        codes[lookup[name]].dispatch = True
    for c in codes:
        if c.dispatch:
            c.dispatch_id = dispatch_id(c.tensor)


def _weights_and_bias(planner: layout.Planner, model: GatiModel, codes: list[LayerCode]) -> None:
    for c in codes:
        if c.engine == "conv":
            size = c.kernel_itr * c.channel_itr * layout.CONV_TILE
        elif c.engine == "fc":
            size = c.kernel_itr * c.weights.shape[1] * device.FC_WIDTH
        else:
            continue
        c.regions["weights"] = planner.add(f"{c.name}.weights", "weights", size, c.index)
    for c, g in zip(codes, model.layers, strict=True):
        if c.bias is not None:
            per = device.ENGINE_COLS if c.engine == "conv" else device.FC_WIDTH
            size = device.align(c.kernel_itr * per * g.bias_width // 8, device.WORD_BYTES)
            c.regions["bias"] = planner.add(f"{c.name}.bias", "bias", size, c.index)


def _output_size(c: LayerCode, g: GatiLayer) -> int:
    if c.engine == "fc":
        return layout.vector_bytes(c.out_shape[0], g.out_bytes)
    ch, h, w = c.out_shape
    return layout.map_bytes(ch, h * w, g.out_bytes)


def _outputs(planner: layout.Planner, model: GatiModel, codes: list[LayerCode]) -> None:
    """Every layer's output region; the layers of a concatenation buffer get adjacent parts of
    one region, allocated where the first of them is."""
    home = {j: buf for buf in concat_buffers(model.chain) for j in buf}
    for c, g in zip(codes, model.layers, strict=True):
        if "output" in c.regions:
            continue
        if c.index not in home:
            size = _output_size(c, g)
            c.regions["output"] = planner.add(f"{c.name}.output", "output", size, c.index)
            continue
        buf = home[c.index]
        sizes = [_output_size(codes[j], model.layers[j]) for j in buf]
        names = "+".join(codes[j].tensor for j in buf)
        region = planner.add(f"concat({names})", "output", sum(sizes))
        start = region.start
        for j, size in zip(buf, sizes, strict=True):
            codes[j].regions["output"] = Region(f"{codes[j].name}.output", "output", start, size, j)
            start += size


def _operand_region(codes: list[LayerCode], input_region: Region, producers: list[int]) -> Region:
    """Where an operand lies: the input, one layer's output, or the run of a buffer that
    holds a concatenation."""
    parts = [input_region if j < 0 else codes[j].regions["output"] for j in producers]
    if len(parts) == 1:
        return parts[0]
    start, end = parts[0].start, parts[-1].end
    return Region("concat", "output", start, end - start)


def _plan(
    model: GatiModel, codes: list[LayerCode], on_chip_bytes: int
) -> tuple[list[Region], Region, int]:
    planner = layout.Planner()
    planner.add(
        "instructions", "instructions", len(codes) * INSTRUCTIONS_PER_LAYER * isa.INST_BYTES
    )
    _weights_and_bias(planner, model, codes)
    if model.input_layout == "map":
        ch, h, w = model.input_shape
        in_size = layout.map_bytes(ch, h * w, 1)
    else:
        in_size = layout.vector_bytes(model.input_shape[0], 1)
    input_region = planner.add("input", "input", in_size)
    _outputs(planner, model, codes)
    for c in codes:
        sources = model.chain.sources_of(c.index)
        c.regions["input"] = _operand_region(codes, input_region, sources[0])
        if c.engine == "eltwise":
            c.regions["input_b"] = _operand_region(codes, input_region, sources[1])
        order = ("weights", "bias", "input", "input_b", "output")
        c.regions = {k: c.regions[k] for k in order if k in c.regions}
    acc_size = 0
    for c in codes:
        if c.engine == "conv" and c.channel_itr > 1:
            need = layout.map_bytes(device.ENGINE_COLS, c.conv_shape[1] * c.conv_shape[2], 4)
            c.on_chip_acc = need <= on_chip_bytes
            if not c.on_chip_acc:
                acc_size = max(acc_size, need)
    if acc_size:
        acc = planner.add("accumulants", "accumulants", acc_size)
        for c in codes:
            if c.engine == "conv" and c.channel_itr > 1 and not c.on_chip_acc:
                c.regions["accumulants"] = acc
    return planner.regions, input_region, planner.total


def _encode(fmt: isa.Format, node: str, **fields: int) -> isa.Instruction:
    return isa.make(fmt, f"ONNX node `{node}`", **fields)


def _eltwise(c: LayerCode, model: GatiModel) -> isa.Instruction:
    g = model.layers[c.index]
    a, b = c.regions["input"], c.regions["input_b"]
    ic, ih, iw = c.in_shape
    kind = model.chain.layers[c.index].eltwise
    return _encode(
        isa.ELTWISE,
        c.name,
        Operation={v: k for k, v in isa.ELT_NAMES.items()}[str(kind)],
        IW=iw,
        IH=ih,
        IC=ic,
        AStartAddress=a.start,
        AEndAddress=a.end,
        BStartAddress=b.start,
        BEndAddress=b.end,
        AScale=g.operand_scales[0],
        AShift=g.operand_shifts[0],
        BScale=g.operand_scales[1],
        BShift=g.operand_shifts[1],
    )


def _megablock(c: LayerCode, model: GatiModel) -> isa.Instruction:
    if c.engine == "eltwise":
        return _eltwise(c, model)
    g = model.layers[c.index]
    src, wts = c.regions["input"], c.regions["weights"]
    if c.engine == "conv":
        ic, ih, iw = c.in_shape
        kn, oh, ow = c.conv_shape
        fl = model.chain.layers[c.index]
        kh, kw = c.weights.shape[2:]
        stride = fl.strides[0] if fl.kind == "conv" else 1
        return _encode(
            isa.CONV,
            c.name,
            IW=iw,
            IH=ih,
            OW=ow,
            OH=oh,
            IC=ic,
            KN=kn,
            KW=kw,
            KH=kh,
            Stride=stride,
            Pad=g.pad,
            PadSides=g.pad_sides,
            ImageStartAddress=src.start,
            ImageEndAddress=src.end,
            WeightStartAddress=wts.start,
            WeightEndAddress=wts.end,
        )
    m, n = c.weights.shape
    flatten = len(c.in_shape) == 3
    image_dim = c.in_shape[1] * c.in_shape[2] if flatten else 0
    return _encode(
        isa.FC,
        c.name,
        WeightRows=n,
        WeightCols=m,
        InputRows=1,
        DropoutConstant=0,
        Flatten=int(flatten),
        ImageDim=image_dim,
        ImageStartAddress=src.start,
        ImageEndAddr=src.end,
        WeightStartAddress=wts.start,
        WeightEndAddress=wts.end,
        Vec2MatCols=device.align(device.cdiv(n, device.FC_WIDTH), device.WORD_SIZE),
    )


def _tail(c: LayerCode, model: GatiModel) -> isa.Instruction:
    g = model.layers[c.index]
    fl = model.chain.layers[c.index]
    fields: dict[str, int] = {
        "QuantEn": int(g.quant_en),
        "QuantScale": g.quant_scale if g.quant_en else 0,
        "QuantShift": g.quant_shift if g.quant_en else 0,
    }
    if fl.activation:
        fields.update(
            ActEn=1,
            ActType={"relu": isa.ACT_RELU, "sigmoid": isa.ACT_SIGMOID, "tanh": isa.ACT_TANH}[
                fl.activation
            ],
            ActParam=g.act_param if fl.activation != "relu" else 0,
        )
    if fl.pool is not None:
        kh, kw = fl.pool.kernel
        stride = 1 if g.pool_global else fl.pool.strides[0]
        _, _, w = c.conv_shape
        pl = g.pool_pad if g.pool_pad_sides & isa.PAD_LEFT else 0
        pr = g.pool_pad if g.pool_pad_sides & isa.PAD_RIGHT else 0
        fields.update(
            PoolEn=1,
            PoolType={
                "max": isa.POOL_MAX,
                "avg": isa.POOL_AVERAGE,
                "global_avg": isa.POOL_GLOBAL_AVG,
            }[fl.pool.type],
            PoolWidth=kw,
            PoolHeight=kh,
            PoolStride=stride,
            PoolPadding=g.pool_pad,
            PoolCeil=int(g.pool_ceil),
            PoolModCount=(w + pl + pr - kw) % stride,
            PoolPadSides=g.pool_pad_sides,
        )
    if c.bias is not None:
        b = c.regions["bias"]
        fields.update(
            BiasEn=1, BiasWidth=g.bias_width, BiasStartAddress=b.start, BiasEndAddress=b.end
        )
    return _encode(isa.TAIL, fl.pool.node if fl.pool is not None else c.name, **fields)


def _output_block(c: LayerCode) -> isa.Instruction:
    acc = c.regions.get("accumulants")
    if c.engine in ("conv", "eltwise"):
        dim_acc = c.conv_shape[1] * c.conv_shape[2]
        dim_out = c.out_shape[1] * c.out_shape[2]
    else:
        dim_acc = dim_out = 1
    return _encode(
        isa.OUTPUT,
        c.name,
        AccumulantAddr=acc.start if acc is not None else 0,
        OutputAddr=c.regions["output"].start,
        ChannelItr=c.channel_itr,
        KernelItr=c.kernel_itr,
        ImageDimOutput=dim_out,
        ImageDimAcc=dim_acc,
        AccEn=int(c.channel_itr > 1),
        DispatchEn=int(c.dispatch),
        DispatchID=c.dispatch_id,
        OnChipAcc=int(c.on_chip_acc),
    )


def build_stream(blob: bytes, codes: list[LayerCode], model: GatiModel) -> bytes:
    """RESET, PAYLOAD_SIZE, INST_ORIGIN, then DWP packets: the blob, every weight and bias."""
    packets: list[dwp.Packet] = [dwp.DwpPacket(device.INST_ORIGIN, blob)]
    for c in codes:
        if c.engine == "eltwise":
            continue
        w = c.regions["weights"]
        data = (
            layout.pack_conv_weights(c.weights)
            if c.engine == "conv"
            else layout.pack_fc_weights(c.weights)
        )
        assert len(data) == w.size
        packets.append(dwp.DwpPacket(w.start, data))
    for c, g in zip(codes, model.layers, strict=True):
        if c.bias is not None:
            b = c.regions["bias"]
            per = device.ENGINE_COLS if c.engine == "conv" else device.FC_WIDTH
            data = layout.pack_bias(c.bias, g.bias_width, c.kernel_itr * per)
            assert len(data) == b.size
            packets.append(dwp.DwpPacket(b.start, data))
    head: list[dwp.Packet] = [
        dwp.MetaPacket(dwp.META_RESET, 0),
        dwp.MetaPacket(dwp.META_PAYLOAD_SIZE, dwp.payload_bytes(packets)),
        dwp.MetaPacket(dwp.META_INST_ORIGIN, device.INST_ORIGIN),
    ]
    return dwp.encode_stream(head + packets)


def compile_model(
    model: GatiModel,
    dispatch: Sequence[str] = (),
    on_chip_acc_bytes: int = device.ON_CHIP_ACC_BYTES,
) -> CompiledProgram:
    codes = [_layer_code(i, fl, g) for i, (fl, g) in enumerate(model.pairs())]
    _select_dispatch(model, codes, dispatch)
    regions, input_region, total = _plan(model, codes, on_chip_acc_bytes)
    n = len(codes)
    blob = bytearray()
    for c in codes:
        c.instructions = [
            _encode(isa.START, c.name, LayerNumber=c.index, TotalLayers=n),
            _megablock(c, model),
            _tail(c, model),
            _output_block(c),
        ]
        for inst in c.instructions:
            blob += isa.encode_bytes(inst)
    assert len(blob) == regions[0].size
    stream = build_stream(bytes(blob), codes, model)
    warnings = [w for g in model.layers for w in g.warnings]
    return CompiledProgram(
        model, codes, regions, total, input_region, bytes(blob), stream, warnings
    )


def import_onnx(path: str | Path) -> LayerChain:
    """An ONNX file as Gati layers: the ONNX front end, then `lower.fuse`."""
    from edgesynth.frontends.onnx import load_onnx
    from edgesynth.targets.gati.lower import fuse

    return fuse(load_onnx(path)).chain


def compile_onnx(
    path: str | Path,
    calibration: np.ndarray,
    dispatch: Sequence[str] = (),
    on_chip_acc_bytes: int = device.ON_CHIP_ACC_BYTES,
) -> CompiledProgram:
    """ONNX file + calibration batch -> compiled program (nothing written to disk)."""
    from edgesynth.targets.gati.check import check_graph
    from edgesynth.targets.gati.quantize import quantize

    chain = import_onnx(path)
    check_graph(chain)
    model = quantize(chain, calibration)
    return compile_model(model, dispatch, on_chip_acc_bytes)
