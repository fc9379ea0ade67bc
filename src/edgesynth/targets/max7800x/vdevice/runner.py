"""Replay a trace, run every layer the registers enable, and check the known answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.compat import readback
from edgesynth.targets.max7800x.vdevice import regmap
from edgesynth.targets.max7800x.vdevice.execute import LayerResult, Placement, Wrap, run_layer
from edgesynth.targets.max7800x.vdevice.hazards import Hazard
from edgesynth.targets.max7800x.vdevice.interpret import LayerProgram, active_groups, interpret
from edgesynth.targets.max7800x.vdevice.knownanswer import KnownAnswer
from edgesynth.targets.max7800x.vdevice.regmap import MAPS
from edgesynth.targets.max7800x.vdevice.state import Machine, replay
from edgesynth.targets.max7800x.vdevice.trace import Trace, read_trace


@dataclass
class KatReport:
    words: int
    mismatches: int
    first_bad_layer: int | None
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0


@dataclass
class RunResult:
    machine: Machine
    programs: list[LayerProgram]
    layers: list[LayerResult]
    kat: KatReport | None = None
    output: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)


def layer_sequence(machine: Machine) -> list[int]:
    """The layers the accelerator processes, from the global and layer registers."""
    dmap = machine.dmap
    # The quadrant the start sequence enables last is the master; unwritten registers are 0.
    masters = [g for _, g, v in machine.ctrl_history if v & 1] or [0]
    lcnt_reg = dmap.global_regs[0x8]
    value = machine.global_regs.get((masters[-1], 0x8), 0)
    last = lcnt_reg.field("lcnt").get(value)
    start = lcnt_reg.field("layer_start").get(value) if dmap.name == "MAX78002" else 0
    order = []
    layer = start
    seen = set()
    while layer not in seen and layer < dmap.max_layers:
        seen.add(layer)
        if active_groups(machine, layer):
            order.append(layer)
        if dmap.name == "MAX78002":
            g = (active_groups(machine, layer) or [masters[0]])[0]
            link = machine.reg(g, layer, "NXTLYR")
            if link >> 8 & 1:
                break
            if link >> 7 & 1:
                layer = link & 0x7F
                continue
        if layer >= last:
            break
        layer += 1
    return order


def programs_for(machine: Machine) -> list[LayerProgram]:
    """Every layer the accelerator runs, interpreted, with where its input comes from: the
    first layer from the FIFOs when CTRL enables them, a streaming layer (CTRL.stream_en and a
    circular buffer size in FBUF) from its circular buffer."""
    programs = [interpret(machine, layer) for layer in layer_sequence(machine)]
    if not programs:
        return programs
    first = programs[0]
    ctrl = machine.global_fields(min(first.parts), "CTRL")
    first.qupac = bool(ctrl["qupac"])
    if ctrl["ffifo_en"]:
        first.fifo = "fast"
    elif ctrl["fifo_en"]:
        first.fifo = "standard"
    for prog in programs[1:]:
        prog.streamed = prog.stream_enabled and prog.fbuf > 0
    return programs


def wrap_for(consumer: LayerProgram | None) -> Wrap | None:
    if consumer is None or not consumer.streamed:
        return None
    quads = frozenset(p // 4 for part in consumer.parts.values() for p in part.processors)
    return Wrap(consumer.read_ptr, consumer.fbuf, quads)


def run(trace: Trace, device: str) -> RunResult:
    dmap = MAPS[device]
    machine = replay(trace, dmap)
    programs = programs_for(machine)
    results = []
    for i, prog in enumerate(programs):
        consumer = programs[i + 1] if i + 1 < len(programs) else None
        results.append(run_layer(machine, prog, wrap_for(consumer)))
    return RunResult(machine, programs, results, warnings=_unmodelled(machine))


def _unmodelled(machine: Machine) -> list[str]:
    """What the firmware configured that the model does not run: the snoop unit (MAX78002),
    whose control registers' fields are not public. It can stop the run, or decide whether a
    layer's jump to another layer is taken; the model follows the layer registers."""
    names = {"SNP1_C1", "SNP1_C2", "SNP2_C1", "SNP2_C2"}
    offsets = {o: r.name for o, r in machine.dmap.global_regs.items() if r.name in names}
    on = sorted(
        f"{offsets[o]} = 0x{v:08x} (quadrant {g})"
        for (g, o), v in machine.global_regs.items()
        if o in offsets and v
    )
    if not on:
        return []
    return [
        "the snoop unit is configured ("
        + ", ".join(on[:2])
        + (", ..." if len(on) > 2 else "")
        + "): it can stop the run or decide whether a layer's jump is taken; the virtual "
        "device does not model it (its registers' fields are not public) and follows the "
        "layer registers"
    ]


def _memory_coordinates(machine: Machine, addr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cls = regmap.classify(machine.dmap, addr)
    if np.any(cls.region != regmap.SRAM):
        bad = addr[cls.region != regmap.SRAM][0]
        raise EdgesynthError(f"known-answer address 0x{int(bad):08x} is not in data memory")
    return cls.index, cls.offset


def check_kat(result: RunResult, kat: KnownAnswer) -> KatReport:
    machine = result.machine
    quad, word = _memory_coordinates(machine, kat.addr)
    actual = machine.data.data[quad, word]
    bad = np.flatnonzero((actual & kat.mask) != (kat.expected & kat.mask))
    writers = machine.data.writer[quad[bad], word[bad]]
    first_layer = None
    details = []
    if bad.size:
        order = [r.layer for r in result.layers]
        known = [w for w in writers if w in order]
        first_layer = min(known, key=order.index) if known else int(writers[0])
        for i in bad[:10]:
            details.append(
                f"0x{int(kat.addr[i]):08x}: expected 0x{int(kat.expected[i]):08x} got "
                f"0x{int(actual[i]):08x} (mask 0x{int(kat.mask[i]):08x}, written by "
                f"{_writer_name(int(machine.data.writer[quad[i], word[i]]))})"
            )
    return KatReport(int(kat.addr.size), int(bad.size), first_layer, details)


def _writer_name(writer: int) -> str:
    return {-1: "nobody", -2: "the CPU"}.get(writer, f"layer {writer}")


def read_output(
    machine: Machine, placement: Placement, out32: bool, kat: KnownAnswer | None = None
) -> np.ndarray:
    """The tensor a layer wrote, read back from data memory (channels, rows, cols).

    Slots that only pad a partly used output pass are left out. With a known answer, so are
    the channels whose byte lane it masks out on a word it checks (the hardware also writes
    the unused lanes of a partly used instance), and the vendor's reading of a dilated Conv1d
    run on the 2-D engine applies (`compat.readback`).
    """
    quad, word = placement.quad, placement.word
    if out32:
        values = machine.data.data[quad, word].astype(np.int32).astype(np.int64)
    else:
        lane = np.broadcast_to(placement.lane[:, None], quad.shape)
        values = machine.data.read_bytes(quad, word, lane)
    keep = np.ones(placement.channels, dtype=bool)
    if placement.padding is not None:
        keep &= ~placement.padding
    rows, cols = placement.shape
    if kat is None:
        return values[keep].reshape(int(keep.sum()), rows, cols)
    kq, kw = _memory_coordinates(machine, kat.addr)
    mask = np.zeros(machine.data.data.shape, dtype=np.uint32)
    covered_word = np.zeros(machine.data.data.shape, dtype=bool)
    mask[kq, kw] = kat.mask
    covered_word[kq, kw] = True
    lane_mask = (
        np.full(placement.channels, 0xFFFFFFFF, dtype=np.uint32)
        if out32
        else (np.uint32(0xFF) << (8 * placement.lane.astype(np.uint32))).astype(np.uint32)
    )
    checked = covered_word[quad, word]  # (channels, pixels)
    lane_checked = (mask[quad, word] & lane_mask[:, None]) == lane_mask[:, None]
    # A channel is dropped when the check covers one of its words but masks its lane out (the
    # check may cover only part of a large output).
    keep &= ~(checked & ~lane_checked).any(axis=1)
    if not keep.any():
        keep = np.ones(placement.channels, dtype=bool)
    values = values[keep]
    window = readback.dilated_conv1d_window(checked[keep] & lane_checked[keep])
    if window is not None:
        return values[:, window].reshape(values.shape[0], -1, 1)
    return values.reshape(values.shape[0], rows, cols)


def network_output(result: RunResult, kat: KnownAnswer | None = None) -> np.ndarray:
    """The network's output: the last layer's tensor read back from data memory, in the
    vendor's reading where its conventions apply (see `compat.readback`)."""
    last, prog = result.layers[-1], result.programs[-1]
    values = read_output(result.machine, last.placement, prog.out32, kat)
    producers = [
        (p, r)
        for p, r in zip(result.programs, result.layers, strict=True)
        if r.layer in last.sources
    ]
    if prog.passthrough and prog.eltwise and prog.passes == 1 and producers:
        passes = {
            p.slots // max(1, p.slots_per_pass) if p.slots > p.slots_per_pass else 1
            for p, _ in producers
        }
        shapes = {r.output.shape[1:] for _, r in producers}
        if len(passes) == len(shapes) == 1:
            (n,), (shape,) = passes, shapes
            pixels = values.shape[1] * values.shape[2]
            if n > 1 and pixels == n * shape[0] * shape[1]:
                flat = values.reshape(values.shape[0], -1)
                return readback.emulated_multipass_eltwise(flat, n, shape)
    return values


def hazards_of(result: RunResult, kat: KnownAnswer | None = None) -> list[Hazard]:
    """The run's memory hazards; the last layer's outputs count as used where the known
    answer checks them (all of them without one)."""
    log = result.machine.log
    if log is None or not result.layers:
        return []
    checked = None
    if kat is not None:
        quad, word = _memory_coordinates(result.machine, kat.addr)
        lanes = (kat.mask[:, None] >> (8 * np.arange(4))[None, :]) & 0xFF
        row, lane = np.nonzero(lanes)
        checked = (quad[row], word[row], lane)
    return log.analyze(result.layers[-1].layer, checked)


def run_trace_file(path: str | Path, device: str) -> RunResult:
    return run(read_trace(path), device)


@dataclass(frozen=True)
class RegisterChange:
    layer: int
    group: int
    register: str
    field: str
    before: int
    after: int

    def __str__(self) -> str:
        return (
            f"layer {self.layer} quadrant {self.group} {self.register}.{self.field}: "
            f"{self.before} -> {self.after}"
        )


def register_diff(before: Machine, after: Machine) -> list[RegisterChange]:
    """Every layer-register field that differs between two accelerator states."""
    changes = []
    groups, layers, slots = np.nonzero(before.layer_regs != after.layer_regs)
    by_index = {r.index: r for r in before.dmap.layer_regs}
    for g, layer, slot in zip(groups.tolist(), layers.tolist(), slots.tolist(), strict=True):
        reg = by_index.get(slot)
        if reg is None:
            continue
        old, new = int(before.layer_regs[g, layer, slot]), int(after.layer_regs[g, layer, slot])
        for f in reg.fields:
            if f.get(old) != f.get(new):
                changes.append(RegisterChange(layer, g, reg.name, f.name, f.get(old), f.get(new)))
    return changes


def first_divergent_layer(reference: RunResult, result: RunResult) -> int | None:
    """The first layer (in run order) whose output differs from the reference run's."""
    for ref, got in zip(reference.layers, result.layers, strict=False):
        if ref.layer != got.layer or ref.output.shape != got.output.shape:
            return got.layer
        if not np.array_equal(ref.output, got.output):
            return got.layer
    common = min(len(reference.layers), len(result.layers))
    longer = result.layers if len(result.layers) > common else reference.layers
    if len(longer) > common:
        return longer[common].layer
    return None
