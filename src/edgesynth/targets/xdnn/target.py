"""`XdnnTarget`: the xDNN target behind `edgesynth compile --target xdnn` and `edgesynth run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir.graph import Graph, QType
from edgesynth.proof import Proof
from edgesynth.targets.base import (
    CompileOptions,
    Program,
    Target,
    TensorFormat,
    load_host_layers,
)
from edgesynth.targets.xdnn.files import FILES


class XdnnTarget(Target):
    name: ClassVar[str] = "xdnn"
    summary: ClassVar[str] = (
        "Xilinx xDNN: XN* command list, CSR script image, IMEM map, 16-bit filter image"
    )

    option_keys: ClassVar[tuple[str, ...]] = ("engine", "bits", "fc_on_host")

    def lower(self, graph: Graph, options: CompileOptions) -> Program:
        from edgesynth.targets.xdnn import device as dev
        from edgesynth.targets.xdnn.lower import lower

        opts = options.options
        engine = dev.engine(str(opts.get("engine", dev.DEFAULT_ENGINE)))
        bits = int(opts.get("bits", 8))
        if options.calibration is None:
            raise EdgesynthError("xDNN needs calibration inputs", key="--calibration")
        low = lower(graph, options.calibration, bits, _flag(opts.get("fc_on_host", False)))
        ig = low.graph
        inp = TensorFormat.of(
            low.input_name, ig.tensors[low.input_name].shape, QType(bits, True, low.input_step)
        )
        out = TensorFormat(low.output_name, low.output_shape, bits, True, low.output_step)
        return Program(
            self.name,
            ig,
            low.layers,
            [inp],
            [out],
            list(low.warnings),
            extra={"lowered": low, "engine": engine, "bits": bits},
            host_post=low.host_tail,
            host_layers=low.host_layers,
        )

    def check(self, program: Program) -> None:
        from edgesynth.targets.xdnn.check import check

        errors = check(program.extra["lowered"], program.extra["engine"])
        if errors:
            raise MultipleErrors(errors)

    def plan(self, program: Program) -> None:
        from edgesynth.targets.xdnn.program import plan_program

        plan, warnings = plan_program(program.extra["lowered"], program.extra["engine"])
        program.plan = plan
        program.warnings += warnings

    def simulate(self, program: Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if "folder" in program.extra:  # a loaded program: the functional model runs the files
            return [run_folder(program.extra["folder"], inputs[0])]
        from edgesynth.sim.graph import run

        out = run(program.graph, inputs[0], keep=False)[program.graph.outputs[0]]
        return [out.reshape(len(out), *program.outputs[0].shape)]

    def emit(self, program: Program, folder: Path) -> list[str]:
        from edgesynth.targets.xdnn.emit import emit

        return self.write_manifest(program, Path(folder), emit(program, Path(folder)))

    executor: ClassVar[str | None] = "the xDNN functional model"

    def prove(self, program: Program, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The files in `folder` (script.bin, filters.bin) run on the functional model compute
        what the program's integer graph computes."""
        from edgesynth.proof import DEFECT_REMEDY, compare

        got = run_folder(Path(folder), inputs[0])
        expected = self.expected(program, inputs)
        return compare(expected, got, str(self.executor), "the emitted program", DEFECT_REMEDY)

    def manifest(self, program: Program, files: list[str]) -> dict[str, Any]:
        manifest = super().manifest(program, files)
        manifest["engine"] = program.extra["engine"].name
        manifest["bits"] = program.extra["bits"]
        return manifest

    def load(self, folder: Path, manifest: dict[str, Any]) -> Program:
        inputs = [TensorFormat.from_json(d) for d in manifest["inputs"]]
        outputs = [TensorFormat.from_json(d) for d in manifest["outputs"]]
        return Program(
            self.name,
            Graph(manifest.get("network", "xdnn")),
            [],
            inputs,
            outputs,
            list(manifest.get("warnings", [])),
            extra={"folder": Path(folder)},
            host_post=manifest.get("host_post"),
            host_layers=load_host_layers(folder, manifest),
        )


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


def run_folder(folder: Path, x: np.ndarray) -> np.ndarray:
    """Integer inputs (N, C, H, W) through the functional model on the folder's files."""
    from edgesynth.targets.xdnn.funcmodel import load_machine

    folder = Path(folder)
    try:
        script = (folder / FILES["script"]).read_bytes()
        filters = (folder / FILES["filters"]).read_bytes()
        manifest = json.loads((folder / "compiled.json").read_text())
    except OSError as err:
        raise EdgesynthError(f"{folder}: not a compiled xDNN program ({err.strerror})") from None
    machine = load_machine(script, filters, source=str(folder / FILES["script"]))
    out = machine.run(np.asarray(x, dtype=np.int64))
    shape = manifest["outputs"][0]["shape"]
    return out.reshape(len(out), *shape)
