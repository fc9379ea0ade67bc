"""MAX78000 and MAX78002 behind the Target interface.

lower: (quantize a float graph) -> fuse into hardware layers -> the vendor's network description
(the YAML document and synthetic weights/biases, in memory) -> the hardware layers (`Network`),
made by the builder `edgesynth izer` uses, so the device rules, the simulator and the C code
generator see exactly what the vendor tool would. Nothing is written.
check: the device rules, where the description places every layer (else the placer checks
its placement by every rule, in plan).
plan: the placement, chosen where the description leaves it out (`placement/`, the one call of
the placer), the device rules on the placed network, its known answer, and every write of the C
project (`plan/plan.py`).
emit writes the description (`network.yaml` with the chosen placement, `tests/*.npy`) and the
MSDK C project of the plan (`project/`, what `edgesynth izer --config-file network.yaml
--prefix project` writes in the emitted folder), whose known answer is the program's sample: the
first calibration input, or the given sample.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.proof import Proof
from edgesynth.targets.base import (
    CompileOptions,
    Program,
    Target,
    TargetSummary,
    TensorFormat,
    graph_macs,
)

if TYPE_CHECKING:
    from edgesynth.ir.fusion import Pattern, TreePattern
    from edgesynth.ir.numformat import NumberFormat
    from edgesynth.targets.max7800x.cpu.program import CpuProgram
    from edgesynth.targets.max7800x.cpu.split import Split
    from edgesynth.targets.max7800x.description.network import Network
    from edgesynth.targets.max7800x.lower import Description, HwLayer
    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.pipeline import Built
    from edgesynth.targets.max7800x.placement import Placement
    from edgesynth.targets.max7800x.plan.plan import Plan
    from edgesynth.targets.report_model import TargetReport

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.options import Max7800xOptions

NETWORK_FILE = "network.yaml"
DATASET = "network"
PROJECT = "project"  # the C project's folder inside the emitted folder
RISCV_NOTE = (
    "  --riscv: the RISC-V core runs the accelerator and project/cpu_part.c (main_riscv.c; "
    "the Makefile's RISC-V sources); the estimates above are the Cortex-M4's"
)


def synthesis_options(
    device_name: str, base_dir: Path = Path("."), cpu_part: bool = False, riscv: bool = False
) -> Max7800xOptions:
    """What the core is told for a compiled program: the vendor's defaults for this device,
    `network.yaml` as the description (in `base_dir` when read back), edgesynth's own path
    (not write for write): the one place a compiled program's options are made. `riscv`
    (`compile --riscv`): the RISC-V core runs the network, as `synth --riscv` has it."""
    from edgesynth.targets.max7800x.description.assemble_options import BuildOptions
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.targets.max7800x.options import Max7800xOptions, ProjectOptions
    from edgesynth.targets.max7800x.rules.options import RuleOptions

    project = ProjectOptions(config_file=NETWORK_FILE, riscv_flash=riscv, riscv_cache=riscv)
    return Max7800xOptions(
        build=BuildOptions(device=get_device(device_name), base_dir=base_dir),
        rules=RuleOptions(riscv=riscv),
        project=project,
        cpu_part=cpu_part,
    )


@dataclass
class Max7800xPlan:
    """What `plan` decides: the placement, and every write of the C project."""

    placement: Placement | None  # what edgesynth chose (None: the description places it all)
    result: SynthesisResult  # the placed network, its sample and every layer's output
    project: Plan  # every write the C project makes (what emit renders and prove runs)


@dataclass(kw_only=True)
class Max7800xProgram(Program):
    """A network lowered for MAX78000/MAX78002. `layers` are the fused graph operators
    (`lower.HwLayer`), `network` the hardware layers they describe."""

    layers: list[HwLayer]  # the fused graph operators (empty: loaded from a folder)
    network: Network | None  # the hardware layers; placed once `plan` ran (None: --cpu-only)
    sample: np.ndarray  # the known answer's input (int64)
    options: Max7800xOptions
    model: str = ""  # the user's model, as messages name it
    built: Built | None = None  # how `network` was built (None: loaded from a folder)
    description: Description | None = None  # what emit writes (None: loaded from a folder)
    plan: Max7800xPlan | None = None
    cpu: CpuProgram | None = None  # the layers after the accelerator's, on the Cortex-M4
    then: Max7800xProgram | None = None  # the accelerator's program after the Cortex-M4 part
    float_graph: g.Graph | None = None  # the float network it was lowered from (a split ...
    compile_options: CompileOptions | None = None  # ... placement refuses is made again)
    cpu_only: bool = False  # --cpu-only: `cpu` is the whole network, no accelerator layers


def _write_description(
    folder: Path, desc: Description, sample: np.ndarray, placement: Placement | None
) -> list[str]:
    """`network.yaml` (with the keys edgesynth chose) and the synthetic `tests/*.npy`."""
    from edgesynth.targets.max7800x.lower import entry_lines

    text = desc.yaml_text
    if placement is not None:  # the description gets the placement the planner chose
        from edgesynth.targets.max7800x.placement import chosen_values
        from edgesynth.targets.max7800x.placement.yamltext import with_keys

        text = with_keys(text, entry_lines(text), chosen_values(placement), NETWORK_FILE)
    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    (folder / NETWORK_FILE).write_text(text)
    files = [NETWORK_FILE]
    # one array alone is read as the layers stacked along its first axis
    weights = desc.weights if len(desc.weights) > 1 else [np.array(desc.weights)]
    _save_arrays(tests / f"weights_{DATASET}.npy", weights)
    files.append(f"tests/weights_{DATASET}.npy")
    if desc.biases:
        _save_arrays(tests / f"bias_{DATASET}.npy", desc.biases)
        files.append(f"tests/bias_{DATASET}.npy")
    np.save(tests / f"sample_{DATASET}.npy", sample.astype(np.int64))
    files.append(f"tests/sample_{DATASET}.npy")
    return files


def _save_arrays(path: Path, arrays: list[np.ndarray]) -> None:
    """Several arrays in one file, one `np.save` after the other (the vendor's format)."""
    with open(path, "wb") as handle:
        for a in arrays:
            np.save(handle, np.asarray(a, dtype=np.int64))


def _input_format(graph: g.Graph) -> TensorFormat:
    """The (quantized) `graph`'s input as the accelerator reads it (8-bit unless it says)."""
    t = graph.tensors[graph.inputs[0]]
    return TensorFormat.of(t.name, t.shape, t.qtype or g.INT8)


def _output_format(graph: g.Graph) -> TensorFormat:
    """The (quantized) `graph`'s output as the accelerator leaves it (32-bit unless it says)."""
    t = graph.tensors[graph.outputs[0]]
    return TensorFormat.of(t.name, t.shape, t.qtype or g.INT32)


def _sample(graph: g.Graph, options: CompileOptions) -> np.ndarray:
    """The known answer's input of the (quantized) `graph`."""
    in_format = _input_format(graph)
    return _known_answer_input(in_format, options, in_format.shape)


def _known_answer_input(
    in_format: TensorFormat, options: CompileOptions, shape: tuple[int, ...]
) -> np.ndarray:
    """The given sample, else the first calibration input (quantized), else zeros."""
    sample = options.options.get("sample")
    if sample is None and options.calibration is not None and in_format.scale is not None:
        first = np.asarray(options.calibration)[:1].reshape(1, *shape)
        sample = in_format.quantize(first)[0]
    if sample is None:
        sample = np.zeros(shape, dtype=np.int64)
    return np.asarray(sample)


def _simulate_network(program: Max7800xProgram, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The program's hardware layers on the simulator, one sample of the batch at a time."""
    from edgesynth.targets.max7800x.network_sim import simulate

    batch = np.asarray(inputs[0], dtype=np.int64)
    want = program.outputs[0].shape
    if program.network is None:  # --cpu-only
        from edgesynth.targets.max7800x.cpu.simulate import simulate as run_alone

        assert program.cpu is not None
        return [run_alone(program.cpu, batch).reshape(len(batch), *want)]
    outs = []
    for sample in batch:
        out = simulate(program.network, sample)[-1].output
        if program.cpu is not None:
            from edgesynth.targets.max7800x.cpu.simulate import simulate as run_cpu

            out = run_cpu(program.cpu, out[None])[0]
        if program.then is not None:  # the accelerator again, on the CPU part's result
            shape = program.then.inputs[0].shape
            out = _simulate_network(program.then, [out.reshape(1, *shape)])[0][0]
        outs.append(out.reshape(want))
    return [np.stack(outs) if outs else np.zeros((0, *want), dtype=np.int64)]


class Max7800xTarget(Target[Max7800xProgram, Max7800xProgram]):
    device_name: ClassVar[str]
    takes_sample: ClassVar[bool] = True  # the project's known answer: --sample-input's array
    compile_flags: ClassVar[tuple[str, ...]] = ("cpu_only", "riscv")

    def number_format(self) -> NumberFormat:
        from edgesynth.targets.max7800x.device import get_device

        return get_device(self.device_name).number_format

    def fusion_patterns(self) -> tuple[Pattern, ...]:
        from edgesynth.targets.max7800x.lower import FUSION_PATTERNS

        return FUSION_PATTERNS

    def read_patterns(self) -> tuple[TreePattern, ...]:
        from edgesynth.targets.max7800x.lower import READ_PATTERNS

        return READ_PATTERNS

    # -- lower ----------------------------------------------------------------------------
    def lower(self, graph: g.Graph, options: CompileOptions) -> Max7800xProgram:
        from edgesynth.ir.passes import fuse_gated_activations
        from edgesynth.targets.max7800x.copies import with_copies
        from edgesynth.targets.max7800x.cpu.split import find_split
        from edgesynth.targets.max7800x.device import get_device
        from edgesynth.targets.max7800x.lower import describe, fuse

        if options.options.get("cpu_only"):
            return self._lower_cpu_only(graph, options)
        device = get_device(self.device_name)
        if not graph.is_integer:
            if options.calibration is None:
                raise EdgesynthError(
                    f"{graph.source or graph.name} is a float model: {self.name} needs "
                    "calibration data to quantize it (--calibration DATA.npy, a batch of "
                    "typical inputs)",
                    key="--calibration",
                )
            graph = fuse_gated_activations(graph)  # x x sigmoid(x): one Cortex-M4 table
            return self.lower_float(graph, options, find_split(graph, device))
        model = str(graph.meta.get("path") or graph.source or graph.name)
        layers = with_copies(graph, fuse(graph, device), device)
        desc = describe(graph, layers, device, arch="test", dataset=DATASET)
        riscv = bool(options.options.get("riscv"))
        synthesis = synthesis_options(self.device_name, riscv=riscv)
        built = self._build(desc, _sample(graph, options), model, synthesis)
        return Max7800xProgram(
            target=self.name,
            graph=graph,
            layers=layers,
            inputs=[_input_format(graph)],
            outputs=[_output_format(graph)],
            warnings=[*graph.warnings, *desc.warnings],
            notes=[],
            network=built.network,
            sample=built.sample,
            options=synthesis,
            model=model,
            built=built,
            description=desc,
        )

    def lower_float(
        self, graph: g.Graph, options: CompileOptions, split: Split | None, whole: bool = True
    ) -> Max7800xProgram:
        """A float `graph` lowered: its accelerator part (all of it, or `split`'s prefix, split
        earlier where the accelerator refuses an operator), and the Cortex-M4 part of a split
        (`whole`: its notes name the whole network on the Cortex-M4, --cpu-only's estimate)."""
        from edgesynth.targets.max7800x.cpu.alone import whole_note
        from edgesynth.targets.max7800x.cpu.back import back_notes
        from edgesynth.targets.max7800x.cpu.hook import cpu_notes, cpu_output
        from edgesynth.targets.max7800x.device import get_device

        device = get_device(self.device_name)
        part = self._accelerator_part(graph, split, options)
        quantized, layers, desc, built, synthesis, split = part
        cpu, then, notes = None, None, []
        if split is not None:
            split, cpu, then = self._cpu_side(graph, split, options, (quantized, built))
            notes = cpu_notes(split, cpu, device)
            if whole:
                notes += whole_note(graph, options.calibration, device)
            if options.options.get("riscv"):
                notes.append(RISCV_NOTE)
            if then is not None:
                notes += back_notes(split)
        return Max7800xProgram(
            target=self.name,
            graph=quantized,
            layers=layers,
            inputs=[_input_format(quantized)],
            outputs=(
                then.outputs
                if then is not None
                else [cpu_output(cpu, graph)]
                if cpu is not None
                else [_output_format(quantized)]
            ),
            warnings=[*graph.warnings, *quantized.warnings, *desc.warnings],
            notes=notes,
            network=built.network,
            sample=built.sample,
            options=synthesis,
            model=str(graph.meta.get("path") or graph.source or graph.name),
            built=built,
            description=desc,
            cpu=cpu,
            then=then,
            float_graph=graph,
            compile_options=options,
        )

    def _cpu_side(
        self, graph: g.Graph, split: Split, options: CompileOptions, first: tuple[g.Graph, Built]
    ) -> tuple[Split, CpuProgram, Max7800xProgram | None]:
        """The CPU part of `split` and, where the accelerator can take the network back after
        it, the accelerator's later program (`first`: the first part, quantized, and built; not
        with --riscv, whose project runs the CPU part to the end)."""
        from functools import partial

        from edgesynth.targets.max7800x.cpu.back import lower_back
        from edgesynth.targets.max7800x.cpu.hook import cpu_part
        from edgesynth.targets.max7800x.cpu.split import with_return
        from edgesynth.targets.max7800x.device import get_device

        device = get_device(self.device_name)
        back = None if options.options.get("riscv") else with_return(graph, split, device)
        if back is not None:
            lower = partial(self.lower_float, whole=False)
            try:
                return (back, *lower_back(lower, device, graph, back, options, first))
            except EdgesynthError:  # the accelerator cannot take it back: the CPU part runs on
                pass
        quantized = first[0]
        return split, cpu_part(graph, split, options.calibration, quantized, device), None

    def _lower_cpu_only(self, graph: g.Graph, options: CompileOptions) -> Max7800xProgram:
        """--cpu-only: the whole float network as the Cortex-M4's program (`cpu/alone.py`),
        with the estimate of the same network compiled for the accelerator beside it."""
        from edgesynth.targets.max7800x.cpu.alone import alone_notes, cycles, lower_whole
        from edgesynth.targets.max7800x.cpu.hook import cpu_output
        from edgesynth.targets.max7800x.device import get_device

        model = str(graph.meta.get("path") or graph.source or graph.name)
        if graph.is_integer or options.calibration is None:
            what = "an integer network" if graph.is_integer else "given no --calibration data"
            raise EdgesynthError(
                f"{model}: --cpu-only quantizes a float model with calibration data "
                f"(--calibration DATA.npy, a batch of typical inputs); this one is {what}",
                key="--cpu-only",
            )
        cpu = lower_whole(graph, options.calibration, get_device(self.device_name))
        in_t = graph.tensors[graph.inputs[0]]
        in_format = TensorFormat.of(in_t.name, in_t.shape, g.QType(8, True, cpu.in_scale))
        side = self._accelerator_side(graph, options, cycles(cpu))
        return Max7800xProgram(
            target=self.name,
            graph=graph,
            layers=[],
            inputs=[in_format],
            outputs=[cpu_output(cpu, graph)],
            warnings=list(graph.warnings),
            notes=alone_notes(cpu, self.device_name, side),
            network=None,
            sample=_known_answer_input(in_format, options, in_t.shape).astype(np.int64),
            options=synthesis_options(self.device_name, cpu_part=True),
            model=model,
            cpu=cpu,
            cpu_only=True,
        )

    def _accelerator_side(self, graph: g.Graph, options: CompileOptions, cpu_cycles: int) -> str:
        """The line --cpu-only prints for the same network compiled without it."""
        from edgesynth.targets.max7800x.cpu.alone import accelerator_line, refused_line

        rest = {k: v for k, v in options.options.items() if k != "cpu_only"}
        try:
            program = self.compile(graph, CompileOptions(options.calibration, rest))
        except EdgesynthError as err:
            return refused_line(err.message.splitlines()[0])
        summary = self.summarize(program)
        return accelerator_line(summary.cycles, summary.clock_hz, cpu_cycles, self.device_name)

    def _accelerator_part(
        self, graph: g.Graph, split: Split | None, options: CompileOptions
    ) -> tuple[g.Graph, list[HwLayer], Description, Built, Max7800xOptions, Split | None]:
        """The float `graph`'s accelerator part (all of it, or `split`'s prefix) quantized,
        fused, described and built, and checked by the device rules no placement changes. Where
        the lowering or those rules refuse an operator the Cortex-M4 part can run, the network
        splits there instead."""
        from edgesynth.targets.max7800x import rules
        from edgesynth.targets.max7800x.copies import with_copies
        from edgesynth.targets.max7800x.cpu.split import split_at_refusal
        from edgesynth.targets.max7800x.device import get_device
        from edgesynth.targets.max7800x.lower import describe, fuse
        from edgesynth.targets.max7800x.quantize import quantize

        device = get_device(self.device_name)
        model = str(graph.meta.get("path") or graph.source or graph.name)
        while True:
            part = quantize(graph if split is None else split.prefix, options.calibration, device)
            layers: list[HwLayer] = []
            try:
                layers = with_copies(part, fuse(part, device), device)
                desc = describe(part, layers, device, arch="test", dataset=DATASET)
                riscv = bool(options.options.get("riscv"))
                synthesis = synthesis_options(self.device_name, cpu_part=split is not None,
                                              riscv=riscv)  # fmt: skip
                built = self._build(desc, _sample(part, options), model, synthesis)
                found = rules.geometry_violations(built.network, device, synthesis.rules)
                if found:
                    raise found[0] if len(found) == 1 else MultipleErrors(found)
                return part, layers, desc, built, synthesis, split
            except EdgesynthError as err:
                earlier = split_at_refusal(graph, err, [x.nodes for x in layers], device)
                if earlier is None or (split and len(earlier.suffix) <= len(split.suffix)):
                    raise
                split = earlier

    def _build(
        self, desc: Description, sample: np.ndarray, model: str, options: Max7800xOptions
    ) -> Built:
        """The hardware layers of `desc`, in the order the vendor's front end checks them (the
        description, then the sample, then the weights); problems name the user's model."""
        from edgesynth.frontends.npy import checked_sample
        from edgesynth.targets.max7800x import rules
        from edgesynth.targets.max7800x.description.yamlcfg import spec_from_document
        from edgesynth.targets.max7800x.pipeline import prepare

        spec = spec_from_document(desc.document, model)
        rules.check_spec(spec, options.build.device)
        known = checked_sample(np.asarray(sample).astype(np.int64), model)
        weights = [np.asarray(w, dtype=np.int64) for w in desc.weights]
        biases = [np.asarray(b, dtype=np.int64) for b in desc.biases]
        return prepare(
            spec, known, options.build, synthetic_weights=(weights, model), synthetic_bias=biases
        )

    # -- check, plan, simulate --------------------------------------------------------------
    def check(self, program: Program) -> None:
        """Every device rule, on a description that places every layer it runs (the keys the
        user gave). Where edgesynth chooses the placement, the rules no placement changes
        (kernel sizes, padding, strides, dilation) here, and the placer checks its choice by
        every rule (`plan`), its refusals (a tensor no memory holds) first."""
        from edgesynth.targets.max7800x import rules
        from edgesynth.targets.max7800x.placement import needs_placement

        program = _own(program)
        if program.cpu_only:
            return
        built = program.built
        device, options = program.options.build.device, program.options.rules
        if built is not None and needs_placement(built.spec, built.network.order):
            found = rules.geometry_violations(program.network, device, options)
            if found:
                raise found[0] if len(found) == 1 else MultipleErrors(found)
            return
        rules.check_network(program.network, device, options)

    def plan(self, program: Program) -> None:
        """Place what the description leaves out (checking the keys it gives), then plan the
        project: the one place the placer runs."""
        from edgesynth.targets.max7800x.network_sim import SynthesisResult, simulate
        from edgesynth.targets.max7800x.pipeline import place_network
        from edgesynth.targets.max7800x.plan.plan import make_plan

        program = _own(program)
        if program.cpu_only:
            return
        if program.built is None:
            raise EdgesynthError(f"{program.model}: a loaded program cannot be planned again")
        opts = program.options
        # A placement the placer chooses, it checks by every device rule; one the description
        # gives in full, `check` checked.
        try:
            net, placement = place_network(program.built, opts, prove=True)
        except EdgesynthError as err:
            net, placement = self._place_earlier_split(program, err)
            opts = program.options
        result = SynthesisResult(net, program.sample, simulate(net, program.sample, opts.sim))
        program.network = net
        program.plan = Max7800xPlan(placement, result, make_plan(result, opts))
        if program.cpu is not None:
            from edgesynth.targets.max7800x.cpu.hook import accelerator_note

            program.notes[2:2] = accelerator_note(program.plan.project, opts, self.device_name)
        if program.then is not None:  # the accelerator's program after the Cortex-M4 part
            then = program.then
            self.check(then)
            self.plan(then)
            assert then.plan is not None
            estimate = accelerator_note(then.plan.project, then.options, self.device_name)
            program.notes += [f"  {line}" for line in [*estimate, *then.notes]]

    def _place_earlier_split(
        self, program: Max7800xProgram, err: EdgesynthError
    ) -> tuple[Network, Placement | None]:
        """Where placement refuses a float network's accelerator part (`err`), the longest
        prefix that places, the Cortex-M4 part running the rest: `program` becomes that split
        (its placed network returned). No such split: `err` stands."""
        from edgesynth.targets.max7800x.cpu.split import placement_splits
        from edgesynth.targets.max7800x.device import get_device
        from edgesynth.targets.max7800x.pipeline import place_network

        source, options = program.float_graph, program.compile_options
        if source is None or options is None:
            raise err
        device = get_device(self.device_name)
        for split in placement_splits(source, [x.nodes for x in program.layers], err, device):
            try:
                shorter = self.lower_float(source, options, split)
                placed = place_network(shorter.built, shorter.options, prove=True)
            except EdgesynthError:  # it does not place either, or the Cortex-M4 part does not fit
                continue
            for f in fields(shorter):
                setattr(program, f.name, getattr(shorter, f.name))
            return placed
        raise err

    def simulate(self, program: Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return _simulate_network(_own(program), inputs)

    # -- the summary ----------------------------------------------------------------------
    def summarize(self, program: Program) -> TargetSummary:
        """Kernel memory and data memory used against the chip's, and the vendor's latency
        estimate (MAX78000 only) at the CNN clock the project runs; with a Cortex-M4 part, the
        two estimates one after the other, in cycles of the Cortex-M4's clock."""
        from edgesynth.targets.max7800x.emit.project import clocking
        from edgesynth.targets.max7800x.summary import data_memory_used, kernel_memory

        program = _own(program)
        if program.cpu_only:
            from edgesynth.targets.max7800x.cpu.alone import alone_summary

            assert program.cpu is not None
            return alone_summary(program.cpu, graph_macs(program.graph), self.device_name)
        plan = _planned(program)
        device = program.options.build.device
        used, capacity = kernel_memory(plan.project)
        latency = plan.project.latency
        clock = clocking(program.options, self.device_name)
        cycles, clock_hz = (
            (None, None) if latency is None else (latency.total, round(clock.mhz * 1_000_000))
        )
        if program.cpu is not None and cycles is not None and clock_hz is not None:
            from edgesynth.targets.max7800x.cpu.hook import split_latency

            cycles, clock_hz = split_latency(cycles, clock_hz, program.cpu, self.device_name)
        summary = TargetSummary(
            macs=graph_macs(program.graph),
            weight_bytes=used,
            weight_capacity=capacity,
            weight_memory="kernel memory",
            activation_bytes=data_memory_used(plan.placement, device),
            activation_capacity=device.data_memory_bytes,
            activation_memory="data memory",
            cycles=cycles,
            clock_hz=clock_hz,
        )
        if program.then is None:
            return summary
        return _then(summary, self.summarize(program.then))

    def report_data(self, folder: Path, manifest: dict[str, Any]) -> TargetReport:
        """The folder read back and planned again: layers, data, kernel and bias memory, latency
        (`report_data.collect`)."""
        from edgesynth.targets.max7800x.report_data import collect

        return collect(self, folder, manifest)

    # -- emit, load -----------------------------------------------------------------------
    def emit(self, program: Program, folder: Path) -> list[str]:
        """The description and the C project of the planned program (nothing is planned)."""
        from edgesynth.targets.max7800x.codegen import render_project

        program = _own(program)
        folder = Path(folder)
        if program.cpu_only:
            return self.write_manifest(program, folder, self._emit_cpu_only(program, folder))
        plan = _planned(program)
        assert program.description is not None  # a planned program was lowered
        files = _write_description(folder, program.description, program.sample, plan.placement)
        back = program.then is not None
        options = replace(program.options, cpu_back=True) if back else program.options
        texts = render_project(plan.project, options, PROJECT)
        if program.cpu is not None:
            from edgesynth.targets.max7800x.cpu.hook import emit_cpu_part

            files += emit_cpu_part(
                program.cpu, plan.result.output, folder, texts, self.device_name, back
            )
        if program.then is not None:  # the accelerator's program after the Cortex-M4 part
            files += self._emit_segment(program, folder, texts)
        (folder / PROJECT).mkdir(exist_ok=True)
        for name, text in texts.items():
            (folder / PROJECT / name).write_text(text)
        files += [f"{PROJECT}/{name}" for name in sorted(texts)]
        return self.write_manifest(program, folder, files)

    def _emit_segment(
        self, program: Max7800xProgram, folder: Path, texts: dict[str, str]
    ) -> list[str]:
        """The accelerator's program after the Cortex-M4 part: its own folder (`segment2/`,
        whose project runs it alone on its known answer's input), and in the first project
        its driver and the code that hands it the CPU part's result (`cpu/segment.py`)."""
        from edgesynth.targets.max7800x.cpu.back import SEGMENT
        from edgesynth.targets.max7800x.cpu.segment import render_segment

        then = program.then
        assert then is not None and then.plan is not None and program.float_graph is not None
        (folder / SEGMENT).mkdir(exist_ok=True)
        files = [f"{SEGMENT}/{name}" for name in self.emit(then, folder / SEGMENT)]
        softmax = isinstance(program.float_graph.nodes[-1], g.Softmax)
        wide = then.outputs[0].bits == 32
        second = folder / SEGMENT / PROJECT
        files_of = render_segment(
            then.plan.project, then.plan.result, second, self.device_name, (wide, softmax)
        )
        texts.update(files_of)
        return files

    def _emit_cpu_only(self, program: Max7800xProgram, folder: Path) -> list[str]:
        """--cpu-only's project (`cpu/alone.py`) and the CPU program's files."""
        from edgesynth.targets.max7800x.cpu.alone import project_texts

        assert program.cpu is not None
        board = program.options.project.board_name
        texts = project_texts(program.cpu, program.sample, self.device_name, board)
        (folder / PROJECT).mkdir(exist_ok=True)
        for name, text in texts.items():
            (folder / PROJECT / name).write_text(text)
        return program.cpu.save(folder) + [f"{PROJECT}/{name}" for name in sorted(texts)]

    # -- the proof --------------------------------------------------------------------------
    def prove(self, program: Program, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The project's writes (`project/`, write for write) on the virtual device leave its
        known answer (the program's sample, simulated) in data memory; with a Cortex-M4 part,
        its C built for this PC equals its simulator on the accelerator's output
        (`cpu/host.py`)."""
        from edgesynth.targets.max7800x.proof import prove_run

        program = _own(program)
        if program.cpu_only:
            return self._prove_cpu_only(program, Path(folder))
        plan = _planned(program)
        remedy = (
            "Nothing was written. edgesynth chose this project's layout, so this is a defect in "
            "edgesynth: please report it with the model; --no-verify writes the project anyway "
            "(unproven)."
        )
        proof, run = prove_run(plan.result, plan.project, self.device_name, remedy)
        if program.cpu is not None:
            from edgesynth.targets.max7800x.cpu.hook import prove_cpu

            proof = replace(proof, more=(prove_cpu(program.cpu, Path(folder) / PROJECT, run),))
        if program.then is not None:  # its known answer's input is the CPU part's known answer
            from edgesynth.targets.max7800x.cpu.back import SEGMENT

            later = self.prove(program.then, Path(folder) / SEGMENT, inputs)
            assert later is not None
            proof = replace(proof, matched=proof.matched + later.matched,
                            total=proof.total + later.total)  # fmt: skip
        return proof

    def _prove_cpu_only(self, program: Max7800xProgram, folder: Path) -> Proof:
        """--cpu-only: the project's cpu_part.c built for this PC equals the simulator on the
        known answer's input (and pseudo-random inputs)."""
        from edgesynth.proof import DEFECT_REMEDY
        from edgesynth.targets.max7800x.cpu.host import prove_cpu_part

        assert program.cpu is not None
        return prove_cpu_part(program.cpu, folder / PROJECT, program.sample, DEFECT_REMEDY,
                              "the known answer's input")  # fmt: skip

    def load(self, folder: Path, manifest: dict[str, Any]) -> Max7800xProgram:
        """The program an emitted folder holds, for `edgesynth run` (its `network.yaml`)."""
        from edgesynth.targets.max7800x.cpu.program import CpuProgram
        from edgesynth.targets.max7800x.pipeline import SynthesisJob, load_network

        options = synthesis_options(self.device_name, base_dir=Path(folder))
        inputs = [TensorFormat.from_json(t) for t in manifest["inputs"]]
        outputs = [TensorFormat.from_json(t) for t in manifest["outputs"]]
        cpu = CpuProgram.load(Path(folder))
        net, sample, alone = None, np.zeros(0, np.int64), cpu is not None
        if not (alone and not (Path(folder) / NETWORK_FILE).is_file()):  # else --cpu-only
            net, sample = load_network(SynthesisJob(NETWORK_FILE, options))
            alone = False
        return Max7800xProgram(
            target=self.name,
            graph=g.Graph(manifest.get("network", "network")),
            layers=[],
            inputs=inputs,
            outputs=outputs,
            warnings=list(manifest.get("warnings", [])),
            network=net,
            sample=sample,
            options=options,
            model=str(folder),
            cpu=cpu,
            then=_load_segment(self, Path(folder)),
            cpu_only=alone,
        )

    def run(self, loaded: Max7800xProgram, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The network of the loaded description on the simulator."""
        return _simulate_network(_own(loaded), inputs)


def _then(first: TargetSummary, later: TargetSummary) -> TargetSummary:
    """A program and the accelerator's program after its Cortex-M4 part: the MACs of both, the
    larger memory use (the second configuration replaces the first), the estimates one after
    the other (in the first's clock)."""
    cycles = None
    if first.cycles is not None and later.cycles is not None and first.clock_hz and later.clock_hz:
        cycles = first.cycles + round(later.cycles * first.clock_hz / later.clock_hz)
    return replace(
        first,
        macs=(first.macs or 0) + (later.macs or 0),
        weight_bytes=max(first.weight_bytes or 0, later.weight_bytes or 0),
        activation_bytes=max(first.activation_bytes or 0, later.activation_bytes or 0),
        cycles=cycles,
        clock_hz=first.clock_hz if cycles is not None else None,
    )


def _load_segment(target: Max7800xTarget, folder: Path) -> Max7800xProgram | None:
    """The accelerator's program after the Cortex-M4 part, where the folder holds one."""
    import json

    from edgesynth.targets.base import MANIFEST
    from edgesynth.targets.max7800x.cpu.back import SEGMENT

    manifest = folder / SEGMENT / MANIFEST
    if not manifest.is_file():
        return None
    return target.load(folder / SEGMENT, json.loads(manifest.read_text()))


def _own(program: Program) -> Max7800xProgram:
    if not isinstance(program, Max7800xProgram):
        raise TypeError(f"not a MAX7800x program: {type(program).__name__}")
    return program


def _planned(program: Max7800xProgram) -> Max7800xPlan:
    if program.plan is None:
        raise ValueError("the program is not planned: run `plan` first (`Target.compile` does)")
    return program.plan


class Max78000(Max7800xTarget):
    name = "max78000"
    summary = "Analog Devices MAX78000: 64 processors, 512 KiB data memory (YAML + C project)"
    device_name = "MAX78000"
    executor = "the virtual MAX78000"


class Max78002(Max7800xTarget):
    name = "max78002"
    summary = "Analog Devices MAX78002: 64 processors, 1,280 KiB data memory (YAML + C project)"
    device_name = "MAX78002"
    executor = "the virtual MAX78002"
