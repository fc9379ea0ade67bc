"""The `gap8` target: integer ONNX networks (NEMO, Quantlab, RequantShift) on a PULP/GAP8
cluster as DORY-style tiled C, planned over L3/L2/L1. This module imports quickly; the work is
in the sibling modules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir.graph import Graph, QType
from edgesynth.proof import Proof
from edgesynth.targets.base import CompileOptions, Program, Target, TensorFormat

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


def plan_options(options: CompileOptions) -> Any:
    from edgesynth.targets.pulp.plan import PlanOptions

    Gap8Target().check_option_keys(set(options.options) - {"input_types", "model"})
    return PlanOptions(**{k: v for k, v in options.options.items() if k in PLAN_KEYS})


class Gap8Target(Target):
    name = "gap8"
    summary = "PULP/GAP8 cluster: integer ONNX to DORY-style tiled C (L3/L2/L1, 8 cores)"
    option_keys = (*PLAN_KEYS, "saturate_additions")

    def lower(self, graph: Graph, options: CompileOptions) -> Program:
        from edgesynth.targets.pulp.layers import lower_graph

        if not graph.is_integer:
            raise EdgesynthError(
                f"{graph.source or graph.name}: gap8 runs integer graphs (NEMO, Quantlab or "
                "RequantShift ONNX); this graph has float tensors"
            )
        saturate = bool(options.options.get("saturate_additions", False))
        layers, program_graph, warnings = lower_graph(graph, saturate_additions=saturate)
        return Program(
            target=self.name,
            graph=program_graph,
            layers=layers,
            inputs=[
                TensorFormat.of(t, program_graph.tensors[t].shape, program_graph.tensors[t].qtype)
                for t in program_graph.inputs
            ],
            outputs=[
                TensorFormat.of(t, program_graph.tensors[t].shape, program_graph.tensors[t].qtype)
                for t in program_graph.outputs
            ],
            warnings=[*graph.warnings, *warnings],
            extra={
                "plan_options": plan_options(options),
                "saturate_additions": saturate,
                "model": graph.meta.get("path"),
            },
        )

    def check(self, program: Program) -> None:
        """Every layer's smallest tile must fit L1 (the rest is refused while lowering)."""
        from edgesynth.targets.pulp.device import GAP8
        from edgesynth.targets.pulp.tiler import Region, channel_choices, make_tiling

        l1, _ = program.extra["plan_options"].budgets(GAP8)
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

    def plan(self, program: Program) -> None:
        from edgesynth.targets.pulp.device import GAP8
        from edgesynth.targets.pulp.plan import make_plan

        program.plan = make_plan(program.layers, program.graph, program.extra["plan_options"], GAP8)
        program.warnings += program.plan.warnings

    def simulate(self, program: Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
        from edgesynth.sim.graph import run

        values = run(program.graph, dict(zip(program.graph.inputs, inputs, strict=True)))
        return [values[t] for t in program.graph.outputs]

    def emit(self, program: Program, folder: Path) -> list[str]:
        from edgesynth.targets.pulp.build import LAYOUT
        from edgesynth.targets.pulp.emit import write_sources

        plan = program.plan
        source = program.extra.get("model")
        files = write_sources(plan, folder, program.graph.name, Path(source).name if source else "")
        (folder / PLAN_JSON).write_text(json.dumps(plan.to_json(), indent=1) + "\n")
        (folder / REPORT).write_text(plan.table() + "\n")
        (folder / LAYOUT).write_text(json.dumps(plan.io_layout(), indent=1) + "\n")
        files += [PLAN_JSON, REPORT, LAYOUT]
        if source:
            shutil.copyfile(source, folder / NETWORK_COPY)
            files.append(NETWORK_COPY)
        types = [str(t.qtype) for t in (program.graph.tensors[n] for n in program.graph.inputs)]
        (folder / TARGET_JSON).write_text(
            json.dumps(
                {
                    "network": NETWORK_COPY if source else None,
                    "input_types": types,
                    "options": program.extra["plan_options"].to_json(),
                    "saturate_additions": program.extra.get("saturate_additions", False),
                },
                indent=1,
            )
            + "\n"
        )
        files.append(TARGET_JSON)
        return self.write_manifest(program, folder, files)

    # -- the proof ------------------------------------------------------------------------
    executor = "the host build of the generated C"

    def prove(self, program: Program, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The C in `folder`, built with the host's gcc (warnings as errors) in a copy of the
        folder and run, writes every layer's output exactly as the integer graph computes it."""
        from edgesynth.proof import DEFECT_REMEDY, ProofFailed, first_difference
        from edgesynth.sim.graph import run

        got = _host_run(Path(folder), inputs)
        values = run(program.graph, dict(zip(program.graph.inputs, inputs, strict=True)))
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

    def load(self, folder: Path, manifest: dict[str, Any]) -> Program:
        from edgesynth.targets.pulp.plan import PlanOptions

        folder = Path(folder)
        try:
            saved = json.loads((folder / TARGET_JSON).read_text())
        except (OSError, ValueError) as err:
            raise EdgesynthError(f"{folder / TARGET_JSON}: {err}") from None
        if not saved.get("network"):
            raise EdgesynthError(f"{folder} has no copy of its network; compile it again")
        graph = read_network(folder / saved["network"], parse_types(saved["input_types"]))
        options = CompileOptions(
            options={"saturate_additions": bool(saved.get("saturate_additions", False))}
        )
        program = self.lower(graph, options)
        program.extra["plan_options"] = PlanOptions.from_json(saved["options"])
        return program


def _host_run(folder: Path, inputs: list[np.ndarray]) -> Any:
    """Build the program in a copy of `folder` (nothing is added to it) and run `inputs`."""
    import tempfile

    from edgesynth.targets.pulp.build import build, execute

    if shutil.which("gcc") is None:
        raise EdgesynthError(
            "the proof builds the generated C with the host's gcc, which is not installed "
            "(on Debian: apt-get install gcc); pass --no-verify to write the program unproven"
        )
    with tempfile.TemporaryDirectory(prefix="edgesynth-proof-") as tmp:
        work = Path(tmp) / "program"
        shutil.copytree(folder, work)
        return execute(work, inputs, "host", build(work, "host"))
