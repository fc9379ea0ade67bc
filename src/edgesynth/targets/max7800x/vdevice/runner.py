"""Replay a trace, run every layer the registers enable, and check the known answer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.compat import readback
from edgesynth.targets.max7800x.vdevice import regmap, snoop
from edgesynth.targets.max7800x.vdevice.execute import LayerResult, Placement, Wrap, run_layer
from edgesynth.targets.max7800x.vdevice.interpret import LayerProgram, active_groups, interpret
from edgesynth.targets.max7800x.vdevice.knownanswer import KnownAnswer
from edgesynth.targets.max7800x.vdevice.record import Factory, FrozenRecord, Record
from edgesynth.targets.max7800x.vdevice.regmap import MAPS
from edgesynth.targets.max7800x.vdevice.state import Machine, replay
from edgesynth.targets.max7800x.vdevice.trace import Trace, read_trace

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.vdevice.hazards import Hazard


class KatReport(Record):
    """The known-answer check: words compared, mismatches, the first wrong layer."""

    words: int
    mismatches: int
    first_bad_layer: int | None
    details: list[str] = Factory(list)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0


class RunResult(Record):
    """A whole run: the machine after it, each layer's program and result."""

    machine: Machine
    programs: list[LayerProgram]
    layers: list[LayerResult]
    kat: KatReport | None = None
    output: np.ndarray | None = None
    warnings: list[str] = Factory(list)
    snoop_units: snoop.SnoopUnits | None = None  # the snoop units after the run (MAX78002)


class Sequencer(FrozenRecord):
    """Which layer the accelerator processes after which, from the global and layer
    registers: from the start layer on, each next in number up to LCNT_MAX's last, except
    where a MAX78002 layer's NXTLYR links elsewhere or stops."""

    machine: Machine
    start: int
    last: int
    master: int

    @classmethod
    def of(cls, machine: Machine) -> Sequencer:
        dmap = machine.dmap
        # The quadrant the start sequence enables last is the master; unwritten registers are 0.
        masters = [g for _, g, v in machine.ctrl_history if v & 1] or [0]
        lcnt_reg = dmap.global_regs[0x8]
        value = machine.global_regs.get((masters[-1], 0x8), 0)
        last = lcnt_reg.field("lcnt").get(value)
        start = lcnt_reg.field("layer_start").get(value) if dmap.name == "MAX78002" else 0
        return cls(machine, start, last, masters[0])

    def after(self, layer: int, link_taken: bool | None = None) -> int | None:
        """The layer after `layer`, or None at the end. `link_taken` overrides whether a
        link in NXTLYR is followed (the snoop unit decides it); None: the register does."""
        machine = self.machine
        if machine.dmap.name == "MAX78002":
            g = (active_groups(machine, layer) or [self.master])[0]
            link = machine.reg(g, layer, "NXTLYR")
            if link >> 8 & 1:
                return None
            if link >> 7 & 1 and link_taken is not False:
                return link & 0x7F
        if layer >= self.last or layer + 1 >= machine.dmap.max_layers:
            return None
        return layer + 1


def layer_sequence(machine: Machine) -> list[int]:
    """The layers the accelerator processes, from the registers alone (snoop units aside)."""
    seq = Sequencer.of(machine)
    order: list[int] = []
    seen: set[int] = set()
    layer: int | None = seq.start
    while layer is not None and layer not in seen and layer < machine.dmap.max_layers:
        seen.add(layer)
        if active_groups(machine, layer):
            order.append(layer)
        layer = seq.after(layer)
    return order


def _first_input(machine: Machine, first: LayerProgram) -> None:
    """The first layer reads the FIFOs when CTRL enables them."""
    ctrl = machine.global_fields(min(first.parts), "CTRL")
    first.qupac = bool(ctrl["qupac"])
    if ctrl["ffifo_en"]:
        first.fifo = "fast"
    elif ctrl["fifo_en"]:
        first.fifo = "standard"


def _later_input(prog: LayerProgram) -> None:
    """A later layer streams from its circular buffer with CTRL.stream_en and a buffer size
    in FBUF."""
    prog.streamed = prog.stream_enabled and prog.fbuf > 0


def programs_for(machine: Machine) -> list[LayerProgram]:
    """Every layer the accelerator runs (snoop units aside), interpreted, with where its input
    comes from."""
    programs = [interpret(machine, layer) for layer in layer_sequence(machine)]
    if programs:
        _first_input(machine, programs[0])
    for prog in programs[1:]:
        _later_input(prog)
    return programs


def wrap_for(consumer: LayerProgram | None) -> Wrap | None:
    if consumer is None or not consumer.streamed:
        return None
    quads = frozenset(p // 4 for part in consumer.parts.values() for p in part.processors)
    return Wrap(consumer.read_ptr, consumer.fbuf, quads)


def run(trace: Trace, device: str, record: bool = True) -> RunResult:
    """Every layer the registers enable, run; `record`: keep the access log for `hazards_of`."""
    dmap = MAPS[device]
    machine = replay(trace, dmap, record)
    units = snoop.read_units(machine.global_regs, _snoop_offsets(dmap))
    if units:
        return _run_snooped(machine, units)
    programs = programs_for(machine)
    results = []
    for i, prog in enumerate(programs):
        consumer = programs[i + 1] if i + 1 < len(programs) else None
        results.append(run_layer(machine, prog, wrap_for(consumer), written=False))
    return RunResult(machine, programs, results)


def _run_snooped(machine: Machine, units: snoop.SnoopUnits) -> RunResult:
    """The run layer by layer, each layer's writes shown to the snoop units, which may stop
    the run or decide whether a layer's link is taken."""
    seq = Sequencer.of(machine)
    gated = units.gates_links()
    programs: list[LayerProgram] = []
    results: list[LayerResult] = []
    layer: int | None = seq.start
    notes = units.notes()
    seen: set[int] = set()
    while layer is not None:
        if layer in seen:  # a link back (--snoop-loop): every pass computes the same
            notes.append(
                f"the run loops back to layer {layer} while a snoop unit triggers; the model "
                "ran one pass"
            )
            break
        seen.add(layer)
        if not active_groups(machine, layer):
            layer = seq.after(layer, False if gated else None)
            continue
        prog = interpret(machine, layer)
        if programs:
            _later_input(prog)
        else:
            _first_input(machine, prog)
        # a streamed consumer is the layer that follows when the units do not intervene
        following = seq.after(layer, False if gated else None)
        consumer = None
        if following is not None and active_groups(machine, following):
            consumer = interpret(machine, following)
            _later_input(consumer)
        result = run_layer(machine, prog, wrap_for(consumer))
        programs.append(prog)
        results.append(result)
        if result.written is not None:
            quad, word = np.divmod(result.written, machine.data.words)
            instance, word = snoop.write_order(quad, word, result.output[0].size)
            units.observe(layer, instance, word, machine.data.data[instance, word])
        if units.stop_after(layer):
            break
        layer = seq.after(layer, units.link_taken(layer) if gated else None)
    return RunResult(machine, programs, results, warnings=notes, snoop_units=units)


def _snoop_offsets(dmap: regmap.DeviceMap) -> dict[str, int]:
    return {r.name: o for o, r in dmap.global_regs.items() if r.name.startswith("SNP")}


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
        first_layer = int(min(known, key=order.index) if known else writers[0])
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
    padding = placement.padding
    if padding is not None:
        keep &= ~padding
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
    # check may cover only part of a large output). A slot taken for padding (zero kernels at
    # the end of the last pass) is a channel after all when the check covers its lane.
    masked_out = (checked & ~lane_checked).any(axis=1)
    if padding is not None:
        keep |= padding & checked.any(axis=1) & ~masked_out
    keep &= ~masked_out
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


class RegisterChange(FrozenRecord):
    """A register field a layer's run changed (before -> after)."""

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
