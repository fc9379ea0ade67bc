"""Functional model of the Gati FPGA: DWP decoder, DRAM, and the layer pipeline.

`GatiMachine` consumes a DWP stream (META packets and DRAM writes) into a DRAM image, then
executes the instructions it finds at INST_ORIGIN exactly as the fields say: it never sees the
network, the compiler's data structures or the ONNX model. It reads the stream and the
instructions with its own tables, written from the Gati document (`executor/dwp.py`,
`executor/isa.py`), never with the encoder's (`dwp.py`, `isa.py`): a field the encoder puts in
the wrong bits changes what runs here (tests/test_import_rules.py keeps it so).

* CONV: weight-stationary. For every kernel iteration (8 filters) and channel iteration (8
  input channels), each of the 8 engines holds a 9x8 weight tile (9 taps x 8 filters) and
  streams its input channel's windows; an adder tree sums the 8 engines; partial sums of
  successive channel iterations are accumulated (AccEn) on chip (OnChipAcc) or through the
  int32 accumulant buffer in DRAM. The last channel iteration's sums go to the tail blocks.
* FC: output stationary, 1 x 32. Each pass multiplies the input vector by one 32-column
  block of the weight matrix; Flatten turns the NHW8C8 map into a CHW-ordered vector first.
* Tail blocks, in order: bias, quantization (round half up, saturate to int8), activation,
  pooling. Their arithmetic (requantization, the pairwise-average tree, the sigmoid/tanh table)
  is `edgesynth.sim`'s, shared with every target; the engines' data movement is modelled here.
  BNEn is refused: edgesynth folds batchnorm into the weights.
* ELTWISE (edgesynth's instruction for the seed's element-wise block, docs/gati.md): two int8
  NHW8C8 maps A and B of IC channels; each operand times its Scale, shifted right by its Shift
  (round half up, no saturation), then A + B, A - B or A * B, saturated to 32 bits, per channel
  group (KernelItr) through the tail blocks like a CONV's sums.
* OutputBlock: writes NHW8C8 maps (CONV) or vectors (FC); DispatchEn sends the written output
  back as a DWP packet whose address is DispatchID.

A batch of inputs runs as independent inferences sharing one program: DRAM written by the
program stream (instructions, weights, biases) is read-only and shared, DRAM above it is
private to each inference. Engines are modelled per tile with NumPy matrix products in float64,
which are exact here (every partial sum is an integer well below 2**53).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from edgesynth.errors import EdgesynthError
from edgesynth.sim.ops import lookup_activation, tree_average
from edgesynth.sim.rounding import requantize
from edgesynth.targets.gati import device
from edgesynth.targets.gati.executor import dwp as own_dwp
from edgesynth.targets.gati.executor import isa as own_isa

BLOCK_BYTES = 64  # one NHW8C8 block of int8 (8 channels x 8 pixels)
TILE = device.ENGINES * device.ENGINE_ROWS * device.ENGINE_COLS
DRAM_LIMIT = 1 << 32


@dataclass
class LayerProgram:
    address: int  # DRAM address of the layer's START instruction
    start: own_isa.Inst
    block: own_isa.Inst  # CONV or FC
    tail: own_isa.Inst
    output: own_isa.Inst


def _fail(address: int, msg: str) -> EdgesynthError:
    return EdgesynthError(f"DRAM address {address:#x}: {msg}")


class Dram:
    """Shared read-only program memory below `ro_end`, per-inference memory above it."""

    def __init__(self, rom: np.ndarray, ro_end: int, size: int, batch: int) -> None:
        self.rom = rom
        self.ro_end = ro_end
        self.size = size
        self.ram = np.zeros((batch, size - ro_end), dtype=np.uint8)
        self.batch = batch

    def read(self, addr: int, n: int) -> np.ndarray:
        """(batch, n) uint8."""
        if addr < 0 or addr + n > self.size:
            raise _fail(addr, f"read of {n} bytes past the end of DRAM ({self.size:#x})")
        if addr + n <= self.ro_end:
            return np.broadcast_to(self.rom[addr : addr + n], (self.batch, n))
        if addr >= self.ro_end:
            return self.ram[:, addr - self.ro_end : addr - self.ro_end + n]
        raise _fail(addr, "read straddles the loaded program and the data area")

    def write(self, addr: int, data: np.ndarray) -> None:
        n = data.shape[1]
        if addr < self.ro_end:
            raise _fail(addr, "write into the program/weight area, which is read-only")
        if addr + n > self.size:
            raise _fail(addr, f"write of {n} bytes past the end of DRAM ({self.size:#x})")
        self.ram[:, addr - self.ro_end : addr - self.ro_end + n] = data

    def read_i8(self, addr: int, n: int) -> np.ndarray:
        return self.read(addr, n).view(np.int8).astype(np.int64)

    def read_i32(self, addr: int, n: int) -> np.ndarray:
        return np.ascontiguousarray(self.read(addr, 4 * n)).view("<i4").astype(np.int64)


def _to_bytes(values: np.ndarray, elem: int) -> np.ndarray:
    dt = np.dtype("<i1") if elem == 1 else np.dtype("<i4")
    return np.ascontiguousarray(values.astype(dt)).view(np.uint8).reshape(values.shape[0], -1)


def _from_blocks(raw: np.ndarray, groups: int, pixels: int, elem: int) -> np.ndarray:
    """NHW8C8 bytes -> (B, groups*8, pixels) values."""
    b = raw.shape[0]
    pb = -(-pixels // 8)
    dt = np.dtype("<i1") if elem == 1 else np.dtype("<i4")
    v = np.ascontiguousarray(raw).view(dt).reshape(b, groups, pb, 8, 8).astype(np.int64)
    return v.transpose(0, 1, 3, 2, 4).reshape(b, groups * 8, pb * 8)[:, :, :pixels]


def _to_blocks(values: np.ndarray, elem: int) -> np.ndarray:
    """(B, 8, pixels) values of one channel group -> NHW8C8 bytes."""
    b, _, p = values.shape
    pb = -(-p // 8)
    padded = np.zeros((b, 8, pb * 8), dtype=np.int64)
    padded[:, :, :p] = values
    blocks = padded.reshape(b, 8, pb, 8).transpose(0, 2, 1, 3)
    return _to_bytes(blocks.reshape(b, -1), elem)


def _check_region(addr: int, start: int, end: int, size: int, what: str) -> None:
    if start % device.WORD_BYTES or end % device.WORD_BYTES:
        raise _fail(addr, f"{what} [{start:#x}, {end:#x}) is not 32-bit aligned")
    if end - start != size:
        raise _fail(addr, f"{what} spans {end - start} bytes, the layer needs {size}")


# -- tail blocks ----------------------------------------------------------------------------


def _pool(x: np.ndarray, t: own_isa.Inst, addr: int) -> np.ndarray:
    """Pooling network on (B, C, H, W): the movement makes windows, the action reduces them."""
    h, w = x.shape[2:]
    ptype = t["PoolType"]
    if ptype not in own_isa.POOL_TYPES:
        raise _fail(addr, f"TailBlock.PoolType {ptype} is unknown")
    kh, kw, s = t["PoolHeight"], t["PoolWidth"], t["PoolStride"]
    if ptype == own_isa.POOL_GLOBAL_AVG and (kh, kw) != (h, w):
        raise _fail(addr, f"global average pool of {kh}x{kw} over a {h}x{w} map")
    if kh == 0 or kw == 0 or s == 0:
        raise _fail(addr, "TailBlock pool size and stride must be at least 1")
    p, sides = t["PoolPadding"], t["PoolPadSides"]
    top = p if sides & own_isa.PAD_TOP else 0
    left = p if sides & own_isa.PAD_LEFT else 0
    bottom = p if sides & own_isa.PAD_BOTTOM else 0
    right = p if sides & own_isa.PAD_RIGHT else 0

    def out_dim(n: int, k: int, lo: int, hi: int) -> int:
        span = n + lo + hi - k
        if span < 0:
            raise _fail(addr, f"pool window {k} larger than the padded input {n + lo + hi}")
        o = (-(-span // s) if t["PoolCeil"] else span // s) + 1
        if t["PoolCeil"] and (o - 1) * s >= n + lo:
            o -= 1
        return o

    oh, ow = out_dim(h, kh, top, bottom), out_dim(w, kw, left, right)
    extra_h = max((oh - 1) * s + kh - (h + top + bottom), 0)
    extra_w = max((ow - 1) * s + kw - (w + left + right), 0)
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom + extra_h), (left, right + extra_w)))
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::s, ::s][:, :, :oh, :ow]
    if ptype == own_isa.POOL_MAX:
        return np.maximum(win.max(axis=(4, 5)), 0)  # the max register starts at 0
    # the Average action: each window row through the pairwise tree, then the row results
    rows = [tree_average([win[..., i, j] for j in range(kw)]) for i in range(kh)]
    return tree_average(rows)


def _activation_table(kind: int, exponent: int) -> np.ndarray:
    """The sigmoid/tanh module's 256-entry table, indexed by the int8 input + 128."""
    name = "sigmoid" if kind == own_isa.ACT_SIGMOID else "tanh"
    return lookup_activation(
        np.arange(-128, 128), name, exponent, out_fraction_bits=device.ACT_OUT_FRACTION_BITS
    )


def _tail(
    acc: np.ndarray, t: own_isa.Inst, dram: Dram, first_channel: int, addr: int
) -> np.ndarray:
    """Tail blocks on (B, channels, ...) int64 sums of channels first_channel.. onwards."""
    if t["BNEn"]:
        raise _fail(addr, "TailBlock.BNEn is set; the functional model has no batchnorm block")
    n_ch = acc.shape[1]
    y = acc
    if t["BiasEn"]:
        width = t["BiasWidth"]
        if width not in (8, 32):
            raise _fail(addr, f"TailBlock.BiasWidth {width} is neither 8 nor 32")
        eb = width // 8
        start = t["BiasStartAddress"] + first_channel * eb
        if start + n_ch * eb > t["BiasEndAddress"]:
            raise _fail(addr, "bias channels run past BiasEndAddress")
        raw = dram.read(start, n_ch * eb)[:1]
        bias = (raw.view(np.int8) if eb == 1 else np.ascontiguousarray(raw).view("<i4"))[0]
        y = y + bias.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    if t["QuantEn"]:  # (y * QuantScale + 2**(QuantShift - 1)) >> QuantShift, saturated
        y = requantize(
            y, mul=t["QuantScale"], div=1 << t["QuantShift"], rounding="half_up", lo=-128, hi=127
        )
    else:
        y = np.clip(y, -(1 << 31), (1 << 31) - 1)
    if t["ActEn"]:
        kind = t["ActType"]
        if kind == own_isa.ACT_RELU:
            y = np.maximum(y, 0)
        elif kind in (own_isa.ACT_SIGMOID, own_isa.ACT_TANH):
            if not t["QuantEn"]:
                raise _fail(addr, "sigmoid/tanh lookup needs QuantEn (int8 inputs)")
            y = _activation_table(kind, t["ActParam"])[y + 128]
        else:
            raise _fail(addr, f"TailBlock.ActType {kind} is unknown")
    if t["PoolEn"]:
        if y.ndim != 4:
            raise _fail(addr, "pooling is enabled on an FC layer")
        y = _pool(y, t, addr)
    return y


# -- megablocks -----------------------------------------------------------------------------


def _conv_checks(lp: LayerProgram) -> tuple[tuple[int, int, int, int], int, int]:
    """A CONV layer's fields checked against each other before any data moves: its pads (top,
    left, bottom, right), image bytes and weight bytes."""
    c, o = lp.block, lp.output
    addr = lp.address
    ic, kn, ih, iw, oh, ow = c["IC"], c["KN"], c["IH"], c["IW"], c["OH"], c["OW"]
    kh, kw, s, pad, sides = c["KH"], c["KW"], c["Stride"], c["Pad"], c["PadSides"]
    if kh * kw > device.ENGINE_ROWS or kh * kw == 0:
        raise _fail(addr, f"CONV kernel {kh}x{kw} does not fit a 9-row engine column")
    if s == 0 or 0 in (ic, kn, ih, iw, oh, ow):
        raise _fail(addr, "CONV has a zero dimension or stride")
    ci, ki = o["ChannelItr"], o["KernelItr"]
    if ci != -(-ic // device.ENGINES) or ki != -(-kn // device.ENGINE_COLS):
        raise _fail(addr, f"ChannelItr/KernelItr {ci}/{ki} do not match IC {ic} / KN {kn}")
    if o["ImageDimAcc"] != oh * ow:
        raise _fail(addr, f"ImageDimAcc {o['ImageDimAcc']} is not OH x OW = {oh * ow}")
    top = pad if sides & own_isa.PAD_TOP else 0
    left = pad if sides & own_isa.PAD_LEFT else 0
    bottom = pad if sides & own_isa.PAD_BOTTOM else 0
    right = pad if sides & own_isa.PAD_RIGHT else 0
    if (ih + top + bottom - kh) // s + 1 != oh or (iw + left + right - kw) // s + 1 != ow:
        raise _fail(addr, f"CONV output {oh}x{ow} does not follow from the input and kernel")
    in_size = ci * -(-(ih * iw) // 8) * BLOCK_BYTES
    _check_region(addr, c["ImageStartAddress"], c["ImageEndAddress"], in_size, "image")
    w_size = ki * ci * TILE
    _check_region(addr, c["WeightStartAddress"], c["WeightEndAddress"], w_size, "weights")
    return (top, left, bottom, right), in_size, w_size


def _run_conv(lp: LayerProgram, dram: Dram) -> int:
    """Run one CONV layer; returns the bytes written at OutputAddr."""
    c, t, o = lp.block, lp.tail, lp.output
    addr = lp.address
    (top, left, bottom, right), in_size, w_size = _conv_checks(lp)
    ih, iw, oh, ow = c["IH"], c["IW"], c["OH"], c["OW"]
    kh, kw, s = c["KH"], c["KW"], c["Stride"]
    ci, ki = o["ChannelItr"], o["KernelItr"]

    image = _from_blocks(dram.read(c["ImageStartAddress"], in_size), ci, ih * iw, 1)
    image = image.reshape(-1, ci * 8, ih, iw)
    image = np.pad(image, ((0, 0), (0, 0), (top, bottom), (left, right)))
    weights = dram.read(c["WeightStartAddress"], w_size)[0].view(np.int8)
    weights = weights.reshape(ki, ci, device.ENGINES, device.ENGINE_ROWS, device.ENGINE_COLS)

    b = dram.batch
    pixels = oh * ow
    win = sliding_window_view(image, (kh, kw), axis=(2, 3))[:, :, ::s, ::s][:, :, :oh, :ow]
    taps = win.reshape(b, ci * 8, pixels, kh * kw)

    def engine_inputs(it: int) -> np.ndarray:
        """(B, pixels, 8 engines x 9 rows): what the 8 engines see in channel iteration `it`."""
        x = np.zeros((b, pixels, device.ENGINES, device.ENGINE_ROWS))
        x[..., : kh * kw] = taps[:, it * 8 : (it + 1) * 8].transpose(0, 2, 1, 3)
        return x.reshape(b, pixels, device.ENGINES * device.ENGINE_ROWS)

    cached = [engine_inputs(it) for it in range(ci)] if ki > 1 else None
    acc_addr = o["AccumulantAddr"]
    acc_bytes = -(-pixels // 8) * BLOCK_BYTES * 4
    elem = 1 if t["QuantEn"] else 4
    pooled = None
    group_bytes = 0
    for k in range(ki):
        onchip: np.ndarray | None = None
        psum = np.zeros((b, pixels, device.ENGINE_COLS), dtype=np.int64)
        for it in range(ci):
            x = cached[it] if cached is not None else engine_inputs(it)
            tile = weights[k, it].reshape(device.ENGINES * device.ENGINE_ROWS, device.ENGINE_COLS)
            # 8 engines x (9 rows . 8 columns) then the adder tree over engines == one product
            psum = np.rint(x @ tile.astype(np.float64)).astype(np.int64)
            if it > 0 and o["AccEn"]:
                if o["OnChipAcc"]:
                    assert onchip is not None
                    psum = psum + onchip
                else:
                    raw = dram.read(acc_addr, acc_bytes)
                    psum = psum + _from_blocks(raw, 1, pixels, 4).transpose(0, 2, 1)
            if it < ci - 1:
                if o["OnChipAcc"]:
                    onchip = psum
                else:
                    dram.write(acc_addr, _to_blocks(psum.transpose(0, 2, 1), 4))
        grid = psum.transpose(0, 2, 1).reshape(b, device.ENGINE_COLS, oh, ow)
        out = _tail(grid, t, dram, k * device.ENGINE_COLS, addr)
        pooled = out.shape[2:]
        dim_out = pooled[0] * pooled[1]
        if o["ImageDimOutput"] != dim_out:
            raise _fail(addr, f"ImageDimOutput {o['ImageDimOutput']} but the tail gives {dim_out}")
        data = _to_blocks(out.reshape(b, device.ENGINE_COLS, dim_out), elem)
        group_bytes = data.shape[1]
        dram.write(o["OutputAddr"] + k * group_bytes, data)
    return ki * group_bytes


def _eltwise_checks(lp: LayerProgram) -> int:
    """An ELTWISE layer's fields checked against each other: the bytes of each operand."""
    e, o = lp.block, lp.output
    addr = lp.address
    ic, ih, iw = e["IC"], e["IH"], e["IW"]
    if 0 in (ic, ih, iw):
        raise _fail(addr, "ELTWISE has a zero dimension")
    if e["Operation"] not in own_isa.ELT_OPS:
        raise _fail(addr, f"ELTWISE.Operation {e['Operation']} is unknown")
    groups = -(-ic // 8)
    if o["KernelItr"] != groups or o["ChannelItr"] != 1 or o["AccEn"]:
        raise _fail(addr, f"KernelItr/ChannelItr/AccEn do not match an ELTWISE of {ic} channels")
    if o["ImageDimAcc"] != ih * iw:
        raise _fail(addr, f"ImageDimAcc {o['ImageDimAcc']} is not IH x IW = {ih * iw}")
    size = groups * -(-(ih * iw) // 8) * BLOCK_BYTES
    _check_region(addr, e["AStartAddress"], e["AEndAddress"], size, "operand A")
    _check_region(addr, e["BStartAddress"], e["BEndAddress"], size, "operand B")
    return size


def _run_eltwise(lp: LayerProgram, dram: Dram) -> int:
    """Run one ELTWISE layer; returns the bytes written at OutputAddr."""
    e, t, o = lp.block, lp.tail, lp.output
    size = _eltwise_checks(lp)
    ih, iw = e["IH"], e["IW"]
    groups, pixels = o["KernelItr"], ih * iw
    operands = []
    for side in ("A", "B"):
        x = _from_blocks(dram.read(e[f"{side}StartAddress"], size), groups, pixels, 1)
        # the operand's multiply and shift: (x * Scale + 2**(Shift - 1)) >> Shift
        operands.append(
            requantize(
                x,
                mul=e[f"{side}Scale"],
                div=1 << e[f"{side}Shift"],
                rounding="half_up",
                lo=-(1 << 31),
                hi=(1 << 31) - 1,
            )
        )
    a, b = operands
    op = own_isa.ELT_OPS[e["Operation"]]
    y = a + b if op == "add" else a - b if op == "sub" else a * b
    y = np.clip(y, -(1 << 31), (1 << 31) - 1)
    elem = 1 if t["QuantEn"] else 4
    written = 0
    for k in range(groups):
        grid = y[:, k * 8 : (k + 1) * 8].reshape(dram.batch, 8, ih, iw)
        out = _tail(grid, t, dram, k * 8, lp.address)
        dim_out = out.shape[2] * out.shape[3]
        if o["ImageDimOutput"] != dim_out:
            raise _fail(
                lp.address, f"ImageDimOutput {o['ImageDimOutput']} but the tail gives {dim_out}"
            )
        data = _to_blocks(out.reshape(dram.batch, 8, dim_out), elem)
        dram.write(o["OutputAddr"] + written, data)
        written += data.shape[1]
    return written


def _fc_checks(lp: LayerProgram) -> tuple[int, int]:
    """An FC layer's fields checked against each other before any data moves: its input bytes
    and weight bytes."""
    f, o = lp.block, lp.output
    addr = lp.address
    n, m = f["WeightRows"], f["WeightCols"]
    if f["InputRows"] != 1:
        raise _fail(addr, f"FC.InputRows {f['InputRows']}: only single-row inputs are modelled")
    if n == 0 or m == 0:
        raise _fail(addr, "FC has a zero dimension")
    blocks = -(-m // device.FC_WIDTH)
    if o["KernelItr"] != blocks:
        raise _fail(addr, f"KernelItr {o['KernelItr']} but WeightCols {m} needs {blocks} passes")
    start, end = f["ImageStartAddress"], f["ImageEndAddr"]
    if f["Flatten"]:
        hw_dim = f["ImageDim"]
        if hw_dim == 0 or n % hw_dim:
            raise _fail(addr, f"FC.ImageDim {hw_dim} does not divide WeightRows {n}")
        size = -(-(n // hw_dim) // 8) * -(-hw_dim // 8) * BLOCK_BYTES
        _check_region(addr, start, end, size, "image")
    else:
        size = -(-n // 4) * 4
        _check_region(addr, start, end, size, "input vector")
    w_size = -(-m // device.FC_WIDTH) * n * device.FC_WIDTH
    _check_region(addr, f["WeightStartAddress"], f["WeightEndAddress"], w_size, "weights")
    return size, w_size


def _run_fc(lp: LayerProgram, dram: Dram) -> int:
    """Run one FC layer; returns the bytes written at OutputAddr."""
    f, t, o = lp.block, lp.tail, lp.output
    addr = lp.address
    n, m = f["WeightRows"], f["WeightCols"]
    size, w_size = _fc_checks(lp)
    blocks = -(-m // device.FC_WIDTH)
    start = f["ImageStartAddress"]
    if f["Flatten"]:
        hw_dim = f["ImageDim"]
        ch = n // hw_dim
        # the flattening controller: one bank per channel, read out bank after bank
        x = _from_blocks(dram.read(start, size), -(-ch // 8), hw_dim, 1)[:, :ch].reshape(-1, n)
    else:
        x = dram.read_i8(start, n)
    weights = dram.read(f["WeightStartAddress"], w_size)[0].view(np.int8)
    weights = weights.reshape(blocks, n, device.FC_WIDTH).astype(np.float64)
    xf = x.astype(np.float64)
    # one pass per 32-column block: every PE keeps its output, inputs and weights stream by
    acc = np.concatenate([np.rint(xf @ weights[j]) for j in range(blocks)], axis=1)
    out = _tail(acc.astype(np.int64)[:, :m], t, dram, 0, addr)
    elem = 1 if t["QuantEn"] else 4
    data = _to_bytes(out, elem)
    pad = (-data.shape[1]) % device.WORD_BYTES
    if pad:
        data = np.concatenate([data, np.zeros((data.shape[0], pad), dtype=np.uint8)], axis=1)
    dram.write(o["OutputAddr"], data)
    return int(data.shape[1])


_CHECKS = {"CONV": _conv_checks, "FC": _fc_checks, "ELTWISE": _eltwise_checks}
_RUN = {"CONV": _run_conv, "FC": _run_fc, "ELTWISE": _run_eltwise}


class GatiMachine:
    """Load a program stream once, then run batches of inferences on it."""

    def __init__(self, stream: bytes) -> None:
        packets = own_dwp.read_stream(stream)
        self.origin = device.INST_ORIGIN
        writes: list[own_dwp.Write] = []
        expected: int | None = None
        counted = 0
        for p in packets:
            if isinstance(p, own_dwp.Meta):
                if p.type == own_dwp.RESET:
                    writes, expected, counted = [], None, 0
                elif p.type == own_dwp.PAYLOAD_SIZE:
                    expected, counted = p.value, 0
                elif p.type == own_dwp.INST_ORIGIN:
                    self.origin = p.value
                else:
                    raise EdgesynthError(
                        f"byte offset {p.offset:#x}: DISPATCH in the program stream (inputs "
                        "and DISPATCH come with each inference)"
                    )
            else:
                writes.append(p)
                counted += own_dwp.HEADER_BYTES + p.size
        if expected is not None and counted != expected:
            raise EdgesynthError(
                f"PAYLOAD_SIZE announced {expected} bytes of DWP packets, the stream has {counted}"
            )
        ro_end = max((p.address + p.size for p in writes), default=0)
        self.ro_end = device.align(ro_end, device.DRAM_ALIGN)
        self.rom = np.zeros(self.ro_end, dtype=np.uint8)
        for p in writes:
            self.rom[p.address : p.address + p.size] = np.frombuffer(p.payload, dtype=np.uint8)
        self.layers = self._decode_program()
        for lp in self.layers:  # a malformed layer is refused on loading, before any data moves
            _CHECKS[lp.block.name](lp)
        self.size = max(self.ro_end, self._extent())

    def _read_inst(self, addr: int) -> own_isa.Inst:
        if addr + own_isa.INST_BYTES > self.ro_end:
            raise _fail(addr, "instruction fetch past the loaded program")
        return own_isa.decode(self.rom[addr : addr + own_isa.INST_BYTES].tobytes(), addr)

    def _decode_program(self) -> list[LayerProgram]:
        layers: list[LayerProgram] = []
        addr = self.origin
        total = None
        while total is None or len(layers) < total:
            start = self._read_inst(addr)
            if start.name != "START":
                raise _fail(addr, f"expected START, found {start.name}")
            if total is None:
                total = start["TotalLayers"]
                if total == 0:
                    raise _fail(addr, "START.TotalLayers is 0")
            if start["TotalLayers"] != total or start["LayerNumber"] != len(layers):
                raise _fail(
                    addr,
                    f"START says layer {start['LayerNumber']} of {start['TotalLayers']}, "
                    f"expected layer {len(layers)} of {total}",
                )
            insts = [self._read_inst(addr + k * own_isa.INST_BYTES) for k in (1, 2, 3)]
            expect = (("CONV", "FC", "ELTWISE"), ("TailBlock",), ("OutputBlock",))
            for k, (inst, ok) in enumerate(zip(insts, expect, strict=True)):
                if inst.name not in ok:
                    names = "/".join(ok)
                    raise _fail(
                        addr + (k + 1) * own_isa.INST_BYTES, f"expected {names}, found {inst.name}"
                    )
            layers.append(LayerProgram(addr, start, *insts))
            addr += 4 * own_isa.INST_BYTES
        return layers

    def _extent(self) -> int:
        end = 0
        for lp in self.layers:
            b, o = lp.block, lp.output
            if b.name == "ELTWISE":
                end = max(end, b["AEndAddress"], b["BEndAddress"])
                out = o["KernelItr"] * -(-o["ImageDimOutput"] // 8) * BLOCK_BYTES * 4
            elif b.name == "CONV":
                end = max(end, b["ImageEndAddress"])
                pix = o["ImageDimOutput"]
                acc = -(-o["ImageDimAcc"] // 8) * BLOCK_BYTES * 4
                end = max(end, o["AccumulantAddr"] + acc if o["AccEn"] else 0)
                out = o["KernelItr"] * -(-pix // 8) * BLOCK_BYTES * 4
            else:
                end = max(end, b["ImageEndAddr"])
                out = device.align(b["WeightCols"] * 4, device.WORD_BYTES)
            end = max(end, o["OutputAddr"] + out)
        if end > DRAM_LIMIT:
            raise EdgesynthError("the program addresses more than 4 GiB of DRAM")
        return device.align(end, device.DRAM_ALIGN)

    def run(self, inferences: Sequence[bytes], chunk: int = 128) -> list[list[own_dwp.Write]]:
        """Run one inference per stream (input DWP packets + META DISPATCH); each returns the
        DWP packets the dispatcher sends back (address = DispatchID)."""
        results: list[list[own_dwp.Write]] = []
        for lo in range(0, len(inferences), chunk):
            results += self._run_batch(inferences[lo : lo + chunk], lo)
        return results

    def _run_batch(self, inferences: Sequence[bytes], first: int) -> list[list[own_dwp.Write]]:
        dram = Dram(self.rom, self.ro_end, self.size, len(inferences))
        for row, stream in enumerate(inferences):
            dispatched = False
            for p in own_dwp.read_stream(stream):
                if isinstance(p, own_dwp.Meta):
                    if p.type != own_dwp.DISPATCH:
                        raise EdgesynthError(
                            f"inference {first + row}, byte offset {p.offset:#x}: META "
                            f"{p.type_name} inside an inference stream"
                        )
                    dispatched = True
                    continue
                if p.address < self.ro_end or p.address + p.size > self.size:
                    raise EdgesynthError(
                        f"inference {first + row}, byte offset {p.offset:#x}: input write to "
                        f"{p.address:#x} outside the data area"
                    )
                lo = p.address - self.ro_end
                dram.ram[row, lo : lo + p.size] = np.frombuffer(p.payload, dtype=np.uint8)
            if not dispatched:
                raise EdgesynthError(f"inference {first + row}: no META DISPATCH, nothing runs")
        results: list[list[own_dwp.Write]] = [[] for _ in inferences]
        for lp in self.layers:
            written = _RUN[lp.block.name](lp, dram)
            if lp.output["DispatchEn"]:
                data = dram.read(lp.output["OutputAddr"], written)
                for row in range(len(inferences)):
                    results[row].append(own_dwp.Write(lp.output["DispatchID"], data[row].tobytes()))
        return results
