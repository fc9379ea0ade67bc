"""The `gap8` target: integer ONNX networks (NEMO, Quantlab, RequantShift) on a PULP/GAP8
cluster as DORY-style tiled C, planned over L3/L2/L1. This module imports quickly; the work is
in the sibling modules."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
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
from edgesynth.targets.pulp.quantize import PTQ_KEYS

if TYPE_CHECKING:  # what the steps import when they run
    from collections.abc import Callable

    from edgesynth.ir.fusion import Pattern
    from edgesynth.ir.numformat import NumberFormat
    from edgesynth.targets.pulp.lower import PulpLayer
    from edgesynth.targets.pulp.plan import Plan, PlanOptions
    from edgesynth.targets.report_model import TargetReport

TARGET_JSON = "pulp.json"
NETWORK_COPY = "network.onnx"
PLAN_JSON = "plan.json"
REPORT = "report.txt"


def parse_types(types: list[str] | None) -> list[QType] | None:
    from edgesynth.frontends.onnx_int import parse_type

    return [parse_type(t) for t in types] if types else None


def read_network(path: Path, input_types: list[QType] | None = None) -> Graph:
    """The integer graph of an ONNX file (warnings in `graph.warnings`)."""
    from edgesynth.frontends.onnx_int import load_integer_onnx

    net = load_integer_onnx(path, input_types)
    net.graph.source = f"{path} ({net.dialect})"
    net.graph.meta["path"] = str(path)
    return net.graph


PLAN_KEYS = ("l1", "l2", "code_reserve", "double_buffer", "prefetch", "tiles")


def plan_options(options: CompileOptions) -> PlanOptions:
    from edgesynth.targets.pulp.plan import PlanOptions

    Gap8Target().check_option_keys(set(options.options) - {"input_types", "model", "quantized"})
    if not options.options.get("quantized"):
        given = sorted(set(options.options) & set(PTQ_KEYS))
        if given:
            raise EdgesynthError(
                f"{', '.join(given)}: quantizer options are for a float model (with "
                "--calibration); this network is already integer",
                key="--option",
            )
    return PlanOptions(**{k: v for k, v in options.options.items() if k in PLAN_KEYS})


@dataclass(frozen=True)
class Gap8Options:
    """The target options: the planner's (memory budgets, buffering, forced tiles) and whether
    additions saturate to their storage."""

    plan: PlanOptions
    saturate_additions: bool = False

    @classmethod
    def of(cls, options: CompileOptions) -> Gap8Options:
        return cls(plan_options(options), bool(options.options.get("saturate_additions", False)))


@dataclass(kw_only=True)
class Gap8Program(Program):
    """An integer network lowered for GAP8: its fused layers, its options, the ONNX file it came
    from (copied beside the C) and (after `plan`) its tiling and memory plan."""

    layers: list[PulpLayer]
    options: Gap8Options
    model: Path | None = None
    integer_onnx: bytes | None = None  # a float model quantized here: its RequantShift ONNX
    plan: Plan | None = None


@dataclass(kw_only=True)
class Gap8Loaded(Program):
    """An emitted program read back: the folder of its C sources and the layout of what the
    built program writes (layout.json: each layer's output tensor, shape and storage)."""

    folder: Path
    layout: dict[str, Any]


def _formats(graph: Graph, names: list[str]) -> list[TensorFormat]:
    formats = []
    for name in names:
        tensor = graph.tensors[name]
        assert tensor.qtype is not None  # an integer graph
        formats.append(TensorFormat.of(name, tensor.shape, tensor.qtype))
    return formats


class Gap8Target(Target[Gap8Program, Gap8Loaded]):
    name = "gap8"
    summary = (
        "PULP/GAP8 cluster: integer ONNX (or float, quantized here) to DORY-style tiled C "
        "(L3/L2/L1, 8 cores)"
    )
    option_keys = (*PLAN_KEYS, "saturate_additions", *PTQ_KEYS)
    graph_kinds = ("integer", "float")
    exports_integer_onnx = True

    def number_format(self) -> NumberFormat:
        from edgesynth.targets.pulp.device import NUMBER_FORMAT

        return NUMBER_FORMAT

    def fusion_patterns(self) -> tuple[Pattern, ...]:
        from edgesynth.targets.pulp.lower import FUSION_PATTERNS

        return tuple(FUSION_PATTERNS.values())

    def lower(self, graph: Graph, options: CompileOptions) -> Gap8Program:
        from edgesynth.targets.pulp.lower import lower_graph

        integer_onnx = None
        if not graph.is_integer:
            if options.calibration is None:
                raise EdgesynthError(
                    f"{graph.source or graph.name}: gap8 runs integer graphs (NEMO, Quantlab or "
                    "RequantShift ONNX); this graph has float tensors: pass --calibration "
                    "CAL.npy (float inputs, N x input) to quantize it"
                )
            from edgesynth.targets.pulp.quantize import quantize

            graph, integer_onnx = quantize(graph, options.calibration, options.options)
            options = CompileOptions(options.calibration, {**options.options, "quantized": True})
        opts = Gap8Options.of(options)
        layers, program_graph, warnings = lower_graph(
            graph, saturate_additions=opts.saturate_additions
        )
        model = graph.meta.get("path") if integer_onnx is None else None
        return Gap8Program(
            target=self.name,
            graph=program_graph,
            inputs=_formats(program_graph, program_graph.inputs),
            outputs=_formats(program_graph, program_graph.outputs),
            warnings=[*graph.warnings, *warnings],
            layers=layers,
            options=opts,
            model=Path(model) if model else None,
            integer_onnx=integer_onnx,
        )

    def check(self, program: Gap8Program) -> None:
        """Every layer's smallest tile must fit L1 (the rest is refused while lowering)."""
        from edgesynth.targets.pulp.device import GAP8
        from edgesynth.targets.pulp.tiler import Region, channel_choices, make_tiling

        l1, _ = program.options.plan.budgets(GAP8)
        errors = []
        for layer in program.layers:
            region = Region(layer.cout, layer.out_shape[1])
            first = channel_choices(layer, layer.cout)[0]
            smallest = make_tiling(layer, region, first, 1, 1, double=False)
            if smallest.l1_bytes > l1:
                errors.append(
                    EdgesynthError(
                        f"ONNX node {layer.name}: its smallest tile needs {smallest.l1_bytes} "
                        f"bytes of L1 ({smallest.in_c} input channels); {l1} are available"
                    )
                )
        if errors:
            raise MultipleErrors(errors)

    def plan(self, program: Gap8Program) -> None:
        from edgesynth.targets.pulp.device import GAP8
        from edgesynth.targets.pulp.plan import make_plan

        plan = make_plan(program.layers, program.graph, program.options.plan, GAP8)
        program.plan = plan
        program.warnings += plan.warnings

    def summarize(self, program: Gap8Program) -> TargetSummary:
        """The plan's figures: the weights' L3 image against L3, the L2 peak (activations and
        the weights staged there) against the L2 data budget, the cycle estimate at the
        cluster's clock."""
        from edgesynth.targets.pulp.device import GAP8

        plan = planned(program, program.plan)
        return TargetSummary(
            macs=graph_macs(program.graph),
            weight_bytes=plan.memory.weights_bytes,
            weight_capacity=GAP8.l3_bytes,
            weight_memory="L3",
            activation_bytes=plan.memory.l2_peak,
            activation_capacity=plan.l2_budget,
            activation_memory="L2",
            cycles=plan.total_cycles,
            clock_hz=GAP8.frequency_hz,
        )

    def report_data(self, folder: Path, manifest: dict[str, Any]) -> TargetReport:
        """plan.json's layers, tiles and L1/L2/L3 use (`report_data.collect`)."""
        from edgesynth.targets.pulp.report_data import collect

        return collect(folder, manifest)

    def simulate(self, program: Gap8Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The program's integer graph (the layers compute it exactly; `prove` builds the C
        and compares every layer)."""
        from edgesynth.sim.graph import run

        values = run(program.graph, dict(zip(program.graph.inputs, inputs, strict=True)))
        return [values[t] for t in program.graph.outputs]

    def emit(self, program: Gap8Program, folder: Path) -> list[str]:
        from edgesynth.targets.pulp.emit import write_sources
        from edgesynth.targets.pulp.executor.build import LAYOUT

        plan = planned(program, program.plan)
        source = program.model
        quantized = program.integer_onnx
        name = f"{program.graph.name}.onnx" if quantized is not None else ""
        files = write_sources(plan, folder, program.graph.name, source.name if source else name)
        (folder / PLAN_JSON).write_text(json.dumps(plan.to_json(), indent=1) + "\n")
        (folder / REPORT).write_text(plan.table() + "\n")
        (folder / LAYOUT).write_text(json.dumps(plan.io_layout(), indent=1) + "\n")
        files += [PLAN_JSON, REPORT, LAYOUT]
        if source:
            shutil.copyfile(source, folder / NETWORK_COPY)
        elif quantized is not None:
            (folder / NETWORK_COPY).write_bytes(quantized)
        if source or quantized is not None:
            files.append(NETWORK_COPY)
        types = [
            str(t.qtype.with_scale(None))
            for t in (program.graph.tensors[n] for n in program.graph.inputs)
        ]
        (folder / TARGET_JSON).write_text(
            json.dumps(
                {
                    "network": NETWORK_COPY if source or quantized is not None else None,
                    "input_types": types,
                    "options": program.options.plan.to_json(),
                    "saturate_additions": program.options.saturate_additions,
                },
                indent=1,
            )
            + "\n"
        )
        files.append(TARGET_JSON)
        return self.write_manifest(program, folder, files)

    # -- the proof ------------------------------------------------------------------------
    executor = "the host build of the generated C"

    def prove(self, program: Gap8Program, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The C in `folder`, built with the host's gcc (warnings as errors, the executable
        outside the folder) and run, writes every layer's output exactly as the integer graph
        computes it."""
        from edgesynth.proof import DEFECT_REMEDY, ProofFailed, first_difference
        from edgesynth.sim.graph import run

        unproven = "; pass --no-verify to write the program unproven"
        got, values = _host_run(  # the simulator runs while gcc compiles
            Path(folder),
            inputs,
            f"the proof {NO_GCC}{unproven}",
            lambda: run(program.graph, dict(zip(program.graph.inputs, inputs, strict=True))),
        )
        compared = 0
        for entry, output in zip(got.layout["layers"], got.outputs[0], strict=True):
            want = np.asarray(values[entry["tensor"]])[0].reshape(output.shape)
            if not np.array_equal(want, output):
                raise ProofFailed(
                    f"ONNX node {entry['name']} (layer {entry['index']}) of the generated C, "
                    f"built and run on the host, does not compute the simulator's answer: "
                    f"{first_difference(want, output)}. {DEFECT_REMEDY}"
                )
            compared += output.size
        return Proof(str(self.executor), compared, compared, "values")

    def load(self, folder: Path, manifest: dict[str, Any]) -> Gap8Loaded:
        """The emitted folder: its layout (what the built C writes) and the manifest's formats."""
        from edgesynth.targets.pulp.executor.build import read_layout

        folder = Path(folder)
        return Gap8Loaded(
            target=self.name,
            graph=Graph(manifest.get("network", "gap8")),
            inputs=[TensorFormat.from_json(t) for t in manifest["inputs"]],
            outputs=[TensorFormat.from_json(t) for t in manifest["outputs"]],
            warnings=list(manifest.get("warnings", [])),
            host_post=manifest.get("host_post"),
            folder=folder,
            layout=read_layout(folder),
        )

    def run(self, loaded: Gap8Loaded, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The emitted C, built with the host's gcc (the executable outside the folder) and run: the
        outputs of the layers that store the graph's outputs."""
        simulated = "; `edgesynth pulp simulate` gives the integer reference without it"
        result, _ = _host_run(loaded.folder, inputs, f"running a gap8 program {NO_GCC}{simulated}")
        index = {entry["tensor"]: i for i, entry in enumerate(loaded.layout["layers"])}
        outs = []
        for fmt in loaded.outputs:
            if fmt.name not in index:
                raise EdgesynthError(
                    f"{loaded.folder / 'layout.json'}: no layer stores the output `{fmt.name}`"
                )
            per_sample = [s[index[fmt.name]] for s in result.outputs]
            shape = (len(per_sample), *fmt.shape)
            outs.append(np.array(per_sample, dtype=np.int64).reshape(shape))
        return outs


NO_GCC = (
    "builds the generated C with the host's gcc, which is not installed "
    "(on Debian: apt-get install gcc)"
)


def _host_run(
    folder: Path,
    inputs: list[np.ndarray],
    without_gcc: str,
    meanwhile: Callable[[], Any] = lambda: None,
) -> tuple[Any, Any]:
    """Build the program in `folder` (the executable in a temporary folder: nothing is added to
    `folder`) and run `inputs`; `meanwhile` runs while the compiler works. Returns the run's
    result and what `meanwhile` returned. `without_gcc`: the message when the host has no gcc."""
    import tempfile

    from edgesynth.targets.pulp.executor.build import execute, start_build

    if shutil.which("gcc") is None:
        raise EdgesynthError(without_gcc)
    with tempfile.TemporaryDirectory(prefix="edgesynth-proof-") as tmp:
        pending = start_build(folder, "host", binary=Path(tmp) / "network_host")
        try:
            also = meanwhile()
        except BaseException:  # an error or Ctrl-C: no compiler left running
            pending.cancel()
            raise
        binary = pending.wait()
        return execute(folder, inputs, "host", binary), also
