"""Replay a trace into the accelerator's registers and memories (the state before it runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.vdevice import regmap
from edgesynth.targets.max7800x.vdevice.memory import (
    DataMemory,
    Fifos,
    KernelMemory,
    StreamMemory,
    mexpress_runs,
    new_memories,
)
from edgesynth.targets.max7800x.vdevice.record import Factory, Record
from edgesynth.targets.max7800x.vdevice.regmap import DeviceMap
from edgesynth.targets.max7800x.vdevice.trace import PHASES, Trace

if TYPE_CHECKING:  # (imported where a run keeps the access log)
    from edgesynth.targets.max7800x.vdevice.hazards import AccessLog

CTRL_MEXPRESS = 1 << regmap.MAX78000_MAP.global_regs[0].field("mexpress").lsb


class Machine(Record):
    """Registers and memories of one accelerator, as the firmware left them."""

    dmap: DeviceMap
    global_regs: dict[tuple[int, int], int]  # (quadrant, byte offset) -> value
    layer_regs: np.ndarray  # (4, layers, register slots) uint32
    layer_written: np.ndarray  # same shape, bool
    stream_regs: np.ndarray  # MAX78002: (4, stream layers, 3)
    data: DataMemory
    kernels: KernelMemory
    bias: np.ndarray  # (4, bias words) uint8
    bias_written: np.ndarray
    fifos: Fifos
    stream: StreamMemory = Factory(StreamMemory)
    log: AccessLog | None = None
    ctrl_history: list[tuple[int, int, int]] = Factory(list)  # (phase, quad, value)
    fifo_ctl: int = 0
    fast_fifo_regs: dict[int, int] = Factory(dict)

    def __post_init__(self) -> None:
        self._names = _names(self.dmap)  # (not a field: the device map's, looked up once)

    def reg(self, group: int, layer: int, name: str) -> int:
        """A layer register's value (stream registers too) by name."""
        stream, register = self._names.layer[name]
        if not stream:
            return int(self.layer_regs[group, layer, register.index])
        if layer >= self.stream_regs.shape[1]:
            return 0
        return int(self.stream_regs[group, layer, register.index])

    def fields(self, group: int, layer: int, reg: str) -> dict[str, int]:
        """Every field of a layer register, by name (the register map's fields)."""
        return self._register(reg).decode(self.reg(group, layer, reg))

    def global_fields(self, group: int, name: str) -> dict[str, int]:
        offset, register = self._names.global_[name]
        return register.decode(self.global_regs.get((group, offset), 0))

    def field(self, group: int, layer: int, reg: str, name: str) -> int:
        return self._names.field[reg, name].get(self.reg(group, layer, reg))

    def _register(self, name: str) -> regmap.Register:
        return self._names.layer[name][1]

    def global_reg(self, group: int, name: str) -> int:
        return self.global_regs.get((group, self._names.global_[name][0]), 0)

    def layer_touched(self, group: int, layer: int) -> bool:
        return bool(self.layer_written[group, layer].any())


class _Names(Record):
    """A device's registers by name (the first of a name, a layer register before a stream
    register): layer and stream registers as (is a stream register, register), global ones
    as (byte offset, register), and every layer or stream register's fields by (register,
    field). Looked up for every field of every layer the device runs."""

    layer: dict[str, tuple[bool, regmap.Register]]
    global_: dict[str, tuple[int, regmap.Register]]
    field: dict[tuple[str, str], regmap.Field]


_NAMES: dict[str, _Names] = {}


def _names(dmap: DeviceMap) -> _Names:
    names = _NAMES.get(dmap.name)
    if names is None:
        layer: dict[str, tuple[bool, regmap.Register]] = {}
        for stream, registers in ((False, dmap.layer_regs), (True, dmap.stream_regs)):
            for r in registers:
                layer.setdefault(r.name, (stream, r))
        global_: dict[str, tuple[int, regmap.Register]] = {}
        for offset, r in dmap.global_regs.items():
            global_.setdefault(r.name, (offset, r))
        field = {}
        for _, r in layer.values():
            for f in reversed(r.fields):  # (the first of a name wins, as Register.field)
                field[r.name, f.name] = f
        names = _NAMES[dmap.name] = _Names(layer, global_, field)
    return names


def _last_writes(keys: np.ndarray) -> np.ndarray:
    """Indices of the last write to each distinct key (in first-seen order of the result)."""
    reversed_keys = keys[::-1]
    _, first = np.unique(reversed_keys, return_index=True)
    return np.sort(keys.size - 1 - first)


def replay(trace: Trace, dmap: DeviceMap, record: bool = True) -> Machine:
    """Apply every write of `trace` to a freshly reset accelerator. With `record`, the run
    keeps the access log the hazard analysis reads (`machine.log`); without, it runs faster."""
    cls = regmap.classify(dmap, trace.addr)
    unknown = cls.region == regmap.UNKNOWN
    if unknown.any():
        bad = np.unique(trace.addr[unknown])[:8]
        raise EdgesynthError(
            f"{int(unknown.sum())} writes to addresses that are no register or memory of the "
            f"{dmap.name}: " + ", ".join(f"0x{int(a):08x}" for a in bad),
            file=trace.source,
        )
    data, kernels, bias = new_memories(dmap)
    n_slots = max(r.index for r in dmap.layer_regs) + 1
    layer_regs = np.zeros((4, dmap.max_layers, n_slots), dtype=np.uint32)
    layer_written = np.zeros_like(layer_regs, dtype=bool)
    stream_regs = np.zeros((4, max(dmap.stream_layers, 1), 3), dtype=np.uint32)
    machine = Machine(
        dmap=dmap,
        global_regs={},
        layer_regs=layer_regs,
        layer_written=layer_written,
        stream_regs=stream_regs,
        data=data,
        kernels=kernels,
        bias=bias,
        bias_written=np.zeros_like(bias, dtype=bool),
        fifos=Fifos(),
    )
    value = trace.value

    # Global registers: keep the history of CTRL (start sequence), last value of the rest.
    sel = np.flatnonzero(cls.region == regmap.GLOBAL)
    for i in sel:
        key = (int(cls.group[i]), int(cls.offset[i]))
        machine.global_regs[key] = int(value[i])
        if key[1] == 0:
            machine.ctrl_history.append((int(trace.phase[i]), key[0], int(value[i])))
        if key[1] == 0xC:
            _test_register(machine, key[0], int(value[i]))

    # Layer and stream registers: the last write wins.
    sel = np.flatnonzero(cls.region == regmap.LAYER)
    last = sel[_last_writes(cls.group[sel] * 1_000_000 + cls.index[sel] * 100 + cls.offset[sel])]
    layer_regs[cls.group[last], cls.index[last], cls.offset[last]] = value[last]
    layer_written[cls.group[last], cls.index[last], cls.offset[last]] = True
    sel = np.flatnonzero(cls.region == regmap.STREAM)
    last = sel[_last_writes(cls.group[sel] * 1_000 + cls.index[sel] * 10 + cls.offset[sel])]
    stream_regs[cls.group[last], cls.index[last], cls.offset[last]] = value[last]

    # Bias memory: one byte per 32-bit word.
    sel = np.flatnonzero(cls.region == regmap.BIAS)
    bias[cls.group[sel], cls.offset[sel]] = (value[sel] & 0xFF).astype(np.uint8)
    machine.bias_written[cls.group[sel], cls.offset[sel]] = True

    _load_kernels(machine, trace, cls)

    # Data memory written by the CPU (input data, and anything else the firmware stores).
    sel = np.flatnonzero(cls.region == regmap.SRAM)
    data.host_write(cls.index[sel], cls.offset[sel], value[sel])
    if record:
        from edgesynth.targets.max7800x.vdevice.hazards import AccessLog

        machine.log = AccessLog(words=data.words)
        machine.log.host_written(cls.index[sel], cls.offset[sel])
        machine.log.kernel_written = machine.kernels.written

    # FIFOs: the ordered stream of words per FIFO.
    sel = cls.region == regmap.FIFO_DATA
    machine.fifos.standard = [value[sel & (cls.index == k)].copy() for k in range(4)]
    fast = cls.region == regmap.FAST_FIFO
    machine.fifos.fast = value[fast & (cls.offset == 4)].copy()
    for i in np.flatnonzero(fast & (cls.offset != 4)):
        machine.fast_fifo_regs[int(cls.offset[i])] = int(value[i])
    ctl = np.flatnonzero((cls.region == regmap.FIFO_CTL) & (cls.offset == 0))
    if ctl.size:
        machine.fifo_ctl = int(value[ctl[-1]])
    return machine


def _test_register(machine: Machine, group: int, value: int) -> None:
    """A MAX78002 'clear registers' request (zeroize with memory selects) clears the group's
    layer registers, and its bias memory when the bias select is set."""
    if machine.dmap.name != "MAX78002":
        return
    if value & (1 << 7) and value & (1 << 11) and value & (1 << 12):
        machine.layer_regs[group] = 0
        machine.layer_written[group] = False
        machine.stream_regs[group] = 0
        if value & (1 << 10):
            machine.bias[group] = 0


def _load_kernels(machine: Machine, trace: Trace, cls: regmap.Classified) -> None:
    sel = np.flatnonzero(cls.region == regmap.MRAM)
    if sel.size == 0:
        return
    # The packed loader is selected by CTRL.mexpress at the time of the writes.
    weights_phase = PHASES.index("cnn_load_weights")
    packed = any(
        v & CTRL_MEXPRESS for phase, _, v in machine.ctrl_history if phase <= weights_phase
    )
    proc = cls.index[sel]
    offset = cls.offset[sel]
    value = trace.value[sel]
    if not packed:
        _load_kernels_plain(machine, proc, offset, value)
        return
    is_set, starts = mexpress_runs(proc, offset)
    start_word: dict[int, int] = {}  # processor -> column of the last set-address write
    # Runs are few (one per processor and block) and contiguous; each is stored vectorized,
    # from the words' bytes in stream order (big-endian), converted once.
    heads = np.flatnonzero(is_set | starts)
    ends = np.append(heads[1:], proc.size).tolist()
    stream = value.astype(">u4").view(np.uint8)
    for i, end, p, word, sets in zip(
        heads.tolist(),
        ends,
        proc[heads].tolist(),
        offset[heads].tolist(),
        is_set[heads].tolist(),
        strict=True,
    ):
        if sets:
            start_word[p] = word // 4
            continue
        column = start_word.get(p, 0)
        machine.kernels.store_stream(p, column, stream[4 * i : 4 * end])
        start_word[p] = column + (4 * (end - i)) // 9


def _load_kernels_plain(
    machine: Machine, proc: np.ndarray, offset: np.ndarray, value: np.ndarray
) -> None:
    """Plain form: 16 bytes of address space per 72-bit word: byte 0, bytes 1-4, bytes 5-8."""
    last = _last_writes(proc * 10_000_000 + offset)
    proc, offset, value = proc[last], offset[last], value[last]
    word, sub = offset // 16, (offset % 16) // 4
    kd = machine.kernels.data
    first = sub == 0
    kd[proc[first], word[first], 0] = value[first] & 0xFF
    for sub_word, pos0 in ((1, 1), (2, 5)):
        s = sub == sub_word
        for k in range(4):
            kd[proc[s], word[s], pos0 + k] = (value[s] >> (24 - 8 * k)) & 0xFF
    machine.kernels.written[proc, word] = True
