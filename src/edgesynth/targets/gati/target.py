"""`GatiTarget`: the Gati FPGA behind the `Target` interface (registered as `gati`).

    lower     float graph: fold (ir.passes), fuse into Gati layers, check, calibrate and quantize
              (CompileOptions.calibration); integer graph: fuse and map exactly where Gati can,
              with a warning where it cannot (`lower_integer`)
    check     every violated hardware rule at once (MultipleErrors)
    plan      DRAM layout, instructions and the DWP stream (`compiler.compile_model`)
    simulate  the functional model running the DWP stream (bit-exact; equals
              sim.graph.run(program.graph, x), which the tests prove)
    emit      what `edgesynth gati compile` writes, plus compiled.json
    load      the program rebuilt from program.dwp and report.json (`readback`)

Target options (`CompileOptions.options`): `dispatch` (node or tensor names whose layer output
is also sent back), `on_chip_acc_bytes` (the partial-sum buffer assumed for OnChipAcc).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.graph import Graph, QType
from edgesynth.proof import Proof
from edgesynth.targets.base import (
    CompileOptions,
    Program,
    Target,
    TargetSummary,
    TensorFormat,
    graph_macs,
    planned,
)
from edgesynth.targets.gati import device

if TYPE_CHECKING:  # what the steps import when they run
    from edgesynth.ir.fusion import Pattern
    from edgesynth.ir.numformat import NumberFormat
    from edgesynth.targets.gati.layers import GatiLayer, GatiModel
    from edgesynth.targets.gati.plan import CompiledProgram
    from edgesynth.targets.report_model import TargetReport


@dataclass(frozen=True)
class GatiOptions:
    """The target options (`CompileOptions.options`) the plan takes."""

    dispatch: tuple[str, ...] = ()  # node or tensor names whose output is also sent back
    on_chip_acc_bytes: int = device.ON_CHIP_ACC_BYTES  # the partial-sum buffer OnChipAcc assumes

    @classmethod
    def of(cls, options: dict[str, Any]) -> GatiOptions:
        return cls(
            tuple(options.get("dispatch", ())),
            int(options.get("on_chip_acc_bytes", device.ON_CHIP_ACC_BYTES)),
        )


@dataclass
class GatiPlan:
    """The planned program: DRAM layout, instructions and DWP stream, and the host's contract
    (report.json's `host`: input regions, dispatched outputs)."""

    compiled: CompiledProgram
    host: dict[str, Any]


@dataclass(kw_only=True)
class GatiProgram(Program):
    """A network lowered for Gati: its quantized layers, its options and (after `plan`) its
    instructions and stream."""

    model: GatiModel
    options: GatiOptions = field(default_factory=GatiOptions)
    from_integer: bool = False  # lowered from an integer graph (inexact max pools are warnings)
    sample: np.ndarray | None = None  # the known answer's input (a calibrated float model)
    plan: GatiPlan | None = None

    @property
    def layers(self) -> list[GatiLayer]:
        return self.model.layers


@dataclass(kw_only=True)
class GatiLoaded(Program):
    """An emitted program read back: its DWP stream, the host's contract and the layers the
    stream encodes."""

    model: GatiModel
    stream: bytes
    host: dict[str, Any]

    @property
    def layers(self) -> list[GatiLayer]:
        return self.model.layers


def _formats(
    model: GatiModel, graph: Graph, input_scale: float | None
) -> tuple[list[TensorFormat], list[TensorFormat]]:
    """The program's int8 input and its last layer's output (8 or 32 bits)."""
    chain = model.chain
    inp = TensorFormat.of(chain.input_name, chain.input_shape, QType(8, True, input_scale))
    out_name = graph.outputs[0]
    qtype = graph.tensors[out_name].qtype
    assert qtype is not None
    last = model.layers[-1]
    out = TensorFormat.of(out_name, graph.tensors[out_name].shape, qtype.with_scale(last.out_scale))
    return [inp], [out]


def _execute(
    stream: bytes, host: dict[str, Any], inputs: list[np.ndarray], program: Program
) -> list[np.ndarray]:
    """The last layer's integers for integer input batches, from the functional model running
    `stream` (`host` says where the inputs go and the outputs come from; `program` gives their
    formats)."""
    from edgesynth.targets.gati.executor.machine import GatiMachine
    from edgesynth.targets.gati.host import decode_dispatched, input_streams

    if len(inputs) != 1:
        raise EdgesynthError(f"the Gati program takes one input, not {len(inputs)}")
    fmt = program.inputs[0]
    xq = np.asarray(inputs[0])
    if tuple(xq.shape[1:]) != fmt.shape or xq.ndim != len(fmt.shape) + 1:
        raise EdgesynthError(
            f"input has shape {xq.shape}; the program takes (N, {', '.join(map(str, fmt.shape))})"
        )
    if not np.issubdtype(xq.dtype, np.integer) or xq.min() < -128 or xq.max() > 127:
        raise EdgesynthError("the Gati program takes int8 inputs (integers in -128..127)")
    machine = GatiMachine(stream)
    ints = decode_dispatched(host, machine.run(input_streams(host, xq.astype(np.int64))))
    final = next(o for o in host["outputs"] if o["final"])
    out = ints[final["layer"]]
    return [out.reshape(out.shape[0], *program.outputs[0].shape)]


class GatiTarget(Target[GatiProgram, GatiLoaded]):
    name: ClassVar[str] = "gati"
    summary: ClassVar[str] = (
        "Gati FPGA: 8 engines of 9x8 PEs and a 1x32 FC engine; 256-bit instructions and a DRAM "
        "Write Protocol stream"
    )
    option_keys: ClassVar[tuple[str, ...]] = ("dispatch", "on_chip_acc_bytes")

    def number_format(self) -> NumberFormat:
        from edgesynth.targets.gati.device import NUMBER_FORMAT

        return NUMBER_FORMAT

    def fusion_patterns(self) -> tuple[Pattern, ...]:
        from edgesynth.targets.gati.lower import FUSION_PATTERNS

        return FUSION_PATTERNS

    # -- lower ----------------------------------------------------------------------------
    def lower(self, graph: Graph, options: CompileOptions) -> GatiProgram:
        from edgesynth.targets.gati.check import check_all
        from edgesynth.targets.gati.emit import require_float
        from edgesynth.targets.gati.lower import fuse
        from edgesynth.targets.gati.lower_integer import lower_integer
        from edgesynth.targets.gati.program_graph import integer_graph
        from edgesynth.targets.gati.quantize import quantize

        fused = fuse(graph)
        sample = None
        if fused.graph.is_integer:
            model = lower_integer(fused)
            input_scale = fused.graph.tensors[fused.chain.input_name].qtype.scale  # type: ignore[union-attr]
        else:
            check_all(fused.chain)
            if options.calibration is None:
                raise EdgesynthError(
                    "a float model needs calibration data to be quantized for Gati "
                    "(--calibration CAL.npy: a few hundred inputs)",
                    file=graph.source or None,
                )
            require_float(options.calibration, "calibration data", key="--calibration")
            model = quantize(fused.chain, options.calibration)
            sample = np.asarray(options.calibration)[:1]
            input_scale = model.input_scale
        hw_graph = integer_graph(model)
        inputs, outputs = _formats(model, hw_graph, input_scale)
        return GatiProgram(
            target=self.name,
            graph=hw_graph,
            inputs=inputs,
            outputs=outputs,
            warnings=[w for gl in model.layers for w in gl.warnings],
            host_post=model.chain.host_post,
            model=model,
            options=GatiOptions.of(options.options),
            from_integer=fused.graph.is_integer,
            sample=sample,
        )

    # -- check, plan ----------------------------------------------------------------------
    def check(self, program: GatiProgram) -> None:
        from edgesynth.targets.gati.check import check_all

        chain = program.model.chain
        tolerated = [[] for _ in chain.layers] if program.from_integer else None
        check_all(chain, tolerated)  # an integer graph's inexact max pools are warnings

    def plan(self, program: GatiProgram) -> None:
        from edgesynth.targets.gati.host import host_contract
        from edgesynth.targets.gati.plan import compile_model

        opts = program.options
        compiled = compile_model(program.model, opts.dispatch, opts.on_chip_acc_bytes)
        program.plan = GatiPlan(compiled, host_contract(compiled))

    # -- simulate -------------------------------------------------------------------------
    def simulate(self, program: GatiProgram, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The last layer's integers for integer input batches, from the functional model
        running the planned program's DWP stream."""
        plan = planned(program, program.plan)
        return _execute(plan.compiled.stream, plan.host, inputs, program)

    # -- the summary ----------------------------------------------------------------------
    def summarize(self, program: GatiProgram) -> TargetSummary:
        """The report's cycle estimate; weights (and biases) and activations (inputs, outputs,
        partial sums) as the DRAM regions place them. The DRAM is the board's (no capacity
        here), and the seed names no clock."""
        from edgesynth.targets.gati.report import layer_cycles

        compiled = planned(program, program.plan).compiled
        weights = sum(r.size for r in compiled.regions if r.kind in ("weights", "bias"))
        data = sum(
            r.size for r in compiled.regions if r.kind not in ("weights", "bias", "instructions")
        )
        return TargetSummary(
            macs=graph_macs(program.graph),
            weight_bytes=weights,
            weight_memory="DRAM",
            activation_bytes=data,
            activation_memory="DRAM",
            cycles=sum(layer_cycles(c) for c in compiled.layers),
        )

    def report_data(self, folder: Path, manifest: dict[str, Any]) -> TargetReport:
        """report.json's layers and DRAM layout (`report_data.collect`)."""
        from edgesynth.targets.gati.report_data import collect

        return collect(folder, manifest)

    # -- emit, load, run ------------------------------------------------------------------
    def emit(self, program: GatiProgram, folder: Path) -> list[str]:
        """program.bin, program.dwp, report.json (+ sample.dwp and sample_expected.dwp for a
        calibrated float model) and compiled.json, into the (staging) `folder`."""
        from edgesynth.targets.gati.emit import write_files

        plan = planned(program, program.plan)
        _, files = write_files(plan.compiled, Path(folder), program.sample)
        return self.write_manifest(program, Path(folder), files)

    def load(self, folder: Path, manifest: dict[str, Any]) -> GatiLoaded:
        """program.dwp and report.json read back (the layers decoded from the stream)."""
        from edgesynth.targets.gati.emit import load_outputs
        from edgesynth.targets.gati.executor.readback import read_model
        from edgesynth.targets.gati.program_graph import integer_graph

        stream, host = load_outputs(folder)
        model = read_model(stream, host, str(folder))
        return GatiLoaded(
            target=self.name,
            graph=integer_graph(model),
            inputs=[TensorFormat.from_json(t) for t in manifest["inputs"]],
            outputs=[TensorFormat.from_json(t) for t in manifest["outputs"]],
            warnings=list(manifest.get("warnings", [])),
            host_post=manifest.get("host_post"),
            model=model,
            stream=stream,
            host=host,
        )

    def run(self, loaded: GatiLoaded, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The functional model running the loaded DWP stream."""
        return _execute(loaded.stream, loaded.host, inputs, loaded)

    # -- the proof ------------------------------------------------------------------------
    executor: ClassVar[str | None] = "the Gati functional model"

    def prove(self, program: GatiProgram, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The files in `folder` (program.dwp, report.json) read back and run on the
        functional model compute what the program's integer graph computes."""
        from edgesynth.proof import DEFECT_REMEDY, compare
        from edgesynth.targets.base import read_manifest

        loaded = self.load(Path(folder), read_manifest(Path(folder)))
        got = self.run(loaded, inputs)[0]
        expected = self.expected(program, inputs)
        return compare(expected, got, str(self.executor), "the emitted program", DEFECT_REMEDY)
