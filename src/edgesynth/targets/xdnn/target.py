"""`XdnnTarget`: the xDNN target behind `edgesynth compile --target xdnn` and `edgesynth run`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
    load_host_layers,
    planned,
)
from edgesynth.targets.xdnn.files import FILES

if TYPE_CHECKING:  # what the steps import when they run
    from edgesynth.ir.fusion import Pattern
    from edgesynth.ir.numformat import NumberFormat
    from edgesynth.targets.report_model import TargetReport
    from edgesynth.targets.xdnn.device import Engine
    from edgesynth.targets.xdnn.imem import ImemPlan
    from edgesynth.targets.xdnn.layers import XLayer
    from edgesynth.targets.xdnn.lower import Lowered


@dataclass(frozen=True)
class XdnnOptions:
    """The target options: the engine, the number width, and whether the trailing
    fully-connected layers run on the host."""

    engine: Engine
    bits: int = 8
    fc_on_host: bool = False

    @classmethod
    def of(cls, options: dict[str, Any]) -> XdnnOptions:
        from edgesynth.targets.xdnn import device as dev

        return cls(
            dev.engine(str(options.get("engine", dev.DEFAULT_ENGINE))),
            int(options.get("bits", 8)),
            _flag(options.get("fc_on_host", False)),
        )


@dataclass(kw_only=True)
class XdnnProgram(Program):
    """A float network lowered for xDNN: its fused, quantized layers (with the concatenations
    and the quantization file), its options and (after `plan`) its image-memory plan."""

    lowered: Lowered
    options: XdnnOptions
    plan: ImemPlan | None = None

    @property
    def layers(self) -> list[XLayer]:
        return self.lowered.layers


@dataclass(kw_only=True)
class XdnnLoaded(Program):
    """An emitted program read back: the script and filter images the functional model runs."""

    script: bytes
    filters: bytes
    source: str  # the script's path, for messages


class XdnnTarget(Target[XdnnProgram, XdnnLoaded]):
    name: ClassVar[str] = "xdnn"
    summary: ClassVar[str] = (
        "Xilinx xDNN: XN* command list, CSR script image, IMEM map, 16-bit filter image"
    )

    option_keys: ClassVar[tuple[str, ...]] = ("engine", "bits", "fc_on_host")
    graph_kinds: ClassVar[tuple[str, ...]] = ("float",)

    def number_format(self) -> NumberFormat:
        from edgesynth.targets.xdnn.device import NUMBER_FORMAT

        return NUMBER_FORMAT

    def fusion_patterns(self) -> tuple[Pattern, ...]:
        from edgesynth.targets.xdnn.lower import FUSION_PATTERNS

        return tuple(FUSION_PATTERNS.values())

    def lower(self, graph: Graph, options: CompileOptions) -> XdnnProgram:
        from edgesynth.targets.xdnn.lower import lower

        opts = XdnnOptions.of(options.options)
        if options.calibration is None:
            raise EdgesynthError("xDNN needs calibration inputs", key="--calibration")
        low = lower(graph, options.calibration, opts.bits, opts.fc_on_host)
        ig = low.graph
        inp = TensorFormat.of(
            low.input_name, ig.tensors[low.input_name].shape, QType(opts.bits, True, low.input_step)
        )
        out = TensorFormat(low.output_name, low.output_shape, opts.bits, True, low.output_step)
        return XdnnProgram(
            target=self.name,
            graph=ig,
            inputs=[inp],
            outputs=[out],
            warnings=list(low.warnings),
            host_post=low.host_tail,
            host_layers=low.host_layers,
            lowered=low,
            options=opts,
        )

    def check(self, program: XdnnProgram) -> None:
        from edgesynth.targets.xdnn.check import check

        errors = check(program.lowered, program.options.engine)
        if errors:
            raise MultipleErrors(errors)

    def plan(self, program: XdnnProgram) -> None:
        from edgesynth.targets.xdnn.plan import plan_program

        plan, warnings = plan_program(program.lowered, program.options.engine)
        program.plan = plan
        program.warnings += warnings

    def summarize(self, program: XdnnProgram) -> TargetSummary:
        """The filter image (weights and per-channel blocks, in the board's DDR: no capacity
        here) and the image memory the plan uses against the engine's. The sources give no
        cycle model."""
        from edgesynth.targets.xdnn.filters import pack_filters

        plan = planned(program, program.plan)
        filters, _ = pack_filters(program.lowered.layers)
        return TargetSummary(
            macs=graph_macs(program.graph),
            weight_bytes=len(filters),
            weight_memory="DDR",
            activation_bytes=_covered(plan),
            activation_capacity=plan.engine.imem_bytes,
            activation_memory="image memory",
        )

    def report_data(self, folder: Path, manifest: dict[str, Any]) -> TargetReport:
        """program.json's layers and imem_map.json's regions (`report_data.collect`)."""
        from edgesynth.targets.xdnn.report_data import collect

        return collect(folder, manifest)

    def simulate(self, program: XdnnProgram, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The program's integer graph (the functional model running the emitted files computes
        it exactly; `prove` and the tests compare them)."""
        from edgesynth.sim.graph import run

        out = run(program.graph, inputs[0], keep=False)[program.graph.outputs[0]]
        return [out.reshape(len(out), *program.outputs[0].shape)]

    def emit(self, program: XdnnProgram, folder: Path) -> list[str]:
        from edgesynth.targets.xdnn.emit import emit

        plan = planned(program, program.plan)
        opts = program.options
        files = emit(program.lowered, plan, opts.engine, opts.bits, Path(folder))
        return self.write_manifest(program, Path(folder), files)

    def load(self, folder: Path, manifest: dict[str, Any]) -> XdnnLoaded:
        """script.bin and filters.bin read back, with the manifest's formats and host layers."""
        script, filters = read_images(Path(folder))
        return XdnnLoaded(
            target=self.name,
            graph=Graph(manifest.get("network", "xdnn")),
            inputs=[TensorFormat.from_json(d) for d in manifest["inputs"]],
            outputs=[TensorFormat.from_json(d) for d in manifest["outputs"]],
            warnings=list(manifest.get("warnings", [])),
            host_post=manifest.get("host_post"),
            host_layers=load_host_layers(folder, manifest),
            script=script,
            filters=filters,
            source=str(Path(folder) / FILES["script"]),
        )

    def run(self, loaded: XdnnLoaded, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The functional model running the loaded script on the loaded filters."""
        shape = loaded.outputs[0].shape
        return [execute(loaded.script, loaded.filters, inputs[0], shape, loaded.source)]

    executor: ClassVar[str | None] = "the xDNN functional model"

    def prove(self, program: XdnnProgram, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The files in `folder` (script.bin, filters.bin) run on the functional model compute
        what the program's integer graph computes."""
        from edgesynth.proof import DEFECT_REMEDY, compare, side_by_side

        got, expected = side_by_side(
            lambda: run_folder(Path(folder), inputs[0]), lambda: self.expected(program, inputs)
        )
        return compare(expected, got, str(self.executor), "the emitted program", DEFECT_REMEDY)

    def manifest(self, program: XdnnProgram, files: list[str]) -> dict[str, Any]:
        manifest = super().manifest(program, files)
        manifest["engine"] = program.options.engine.name
        manifest["bits"] = program.options.bits
        return manifest


def _covered(plan: ImemPlan) -> int:
    """Bytes of image memory the plan's tensors cover (overlapping ranges counted once)."""
    covered, end = 0, 0
    for start, stop in sorted((p.address, p.end) for p in plan.placements.values()):
        covered += max(0, stop - max(start, end))
        end = max(end, stop)
    return covered


def _flag(value: object) -> bool:
    """An option given on the command line as text (`--option fc_on_host=1`) or a bool."""
    if isinstance(value, str):
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off", ""):
            return False
        raise EdgesynthError(
            f"`{value}` is not a yes/no value (1, 0, true, false).", key="fc_on_host"
        )
    return bool(value)


def read_images(folder: Path) -> tuple[bytes, bytes]:
    """(script.bin, filters.bin) of a compiled folder."""
    try:
        return (folder / FILES["script"]).read_bytes(), (folder / FILES["filters"]).read_bytes()
    except OSError as err:
        raise EdgesynthError(f"{folder}: not a compiled xDNN program ({err.strerror})") from None


def execute(
    script: bytes, filters: bytes, x: np.ndarray, shape: tuple[int, ...], source: str
) -> np.ndarray:
    """Integer inputs (N, C, H, W) through the functional model on a script and filter image;
    the outputs shaped (N, *shape)."""
    from edgesynth.targets.xdnn.executor.machine import load_machine

    machine = load_machine(script, filters, source=source)
    out = machine.run(np.asarray(x, dtype=np.int64))
    return out.reshape(len(out), *shape)


def run_folder(folder: Path, x: np.ndarray) -> np.ndarray:
    """Integer inputs (N, C, H, W) through the functional model on the folder's files."""
    folder = Path(folder)
    script, filters = read_images(folder)
    try:
        manifest = json.loads((folder / "compiled.json").read_text())
    except OSError as err:
        raise EdgesynthError(f"{folder}: not a compiled xDNN program ({err.strerror})") from None
    shape = tuple(manifest["outputs"][0]["shape"])
    return execute(script, filters, x, shape, str(folder / FILES["script"]))
