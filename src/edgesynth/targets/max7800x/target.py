"""MAX78000 and MAX78002 behind the Target interface.

lower: (quantize a float graph) -> fuse into hardware layers -> the vendor's network description
(YAML + synthetic weight/bias files), read back by the same builder `edgesynth izer` uses, so the
device rules, the simulator and the C code generator see exactly what the vendor tool would.
emit writes that description and the MSDK C project generated from it (`project/`, what
`edgesynth izer --config-file network.yaml --prefix project` writes in the emitted folder, with
the known answer of the program's sample: the first calibration input, or the given sample).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.ir import graph as g
from edgesynth.proof import Proof
from edgesynth.targets.base import CompileOptions, Program, Target, TensorFormat, register

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.options import Max7800xOptions

NETWORK_FILE = "network.yaml"
DATASET = "network"
PROJECT = "project"  # the C project's folder inside the emitted folder


def _write_description(folder: Path, desc: Any, sample: np.ndarray) -> list[str]:
    tests = folder / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    (folder / NETWORK_FILE).write_text(desc.yaml_text)
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


def _retold(err: EdgesynthError, model: str, folder: Path) -> EdgesynthError:
    """`err` about the internal description in `folder`, told about the user's model instead
    (the description's lines and files mean nothing to the user; its layers are the model's
    hardware layers, named after the model's nodes)."""
    if isinstance(err, MultipleErrors):
        return MultipleErrors([_retold(e, model, folder) for e in err.errors])
    if err.file is not None and (err.file == NETWORK_FILE or err.file.startswith(str(folder))):
        err.file, err.line = model, None
        err.args = (err.render(),)
    return err


@contextmanager
def _about(model: str, folder: Path) -> Iterator[None]:
    """Errors raised while building from the internal description name the user's model."""
    try:
        yield
    except EdgesynthError as err:
        raise _retold(err, model, folder) from None


class Max7800xTarget(Target):
    device_name: ClassVar[str]

    # -- lower ----------------------------------------------------------------------------
    def lower(self, graph: g.Graph, options: CompileOptions) -> Program:
        from edgesynth.targets.max7800x.device import get_device
        from edgesynth.targets.max7800x.lower import describe, fuse

        device = get_device(self.device_name)
        warnings: list[str] = list(graph.warnings)
        model = str(graph.meta.get("path") or graph.source or graph.name)
        if not graph.is_integer:
            from edgesynth.targets.max7800x.quantize import quantize

            if options.calibration is None:
                raise EdgesynthError(
                    f"{graph.source or graph.name} is a float model: {self.name} needs "
                    "calibration data to quantize it (--calibration DATA.npy, a batch of "
                    "typical inputs)",
                    key="--calibration",
                )
            graph = quantize(graph, options.calibration, device)
            warnings += graph.warnings
        layers = fuse(graph)
        desc = describe(graph, layers, device, arch="test", dataset=DATASET)
        warnings += desc.warnings
        in_t = graph.tensors[graph.inputs[0]]
        sample = options.options.get("sample")
        in_format = TensorFormat.of(in_t.name, in_t.shape, in_t.qtype or g.INT8)
        if sample is None and options.calibration is not None and in_format.scale is not None:
            # the known answer of the generated project: the first calibration input
            first = np.asarray(options.calibration)[:1].reshape(1, *in_t.shape)
            sample = in_format.quantize(first)[0]
        if sample is None:
            sample = np.zeros(in_t.shape, dtype=np.int64)
        net = self._build(desc, np.asarray(sample), model)
        out_t = graph.tensors[graph.outputs[0]]
        return Program(
            target=self.name,
            graph=graph,
            layers=layers,
            inputs=[in_format],
            outputs=[TensorFormat.of(out_t.name, out_t.shape, out_t.qtype or g.INT32)],
            warnings=warnings,
            extra={
                "description": desc,
                "network": net,
                "sample": np.asarray(sample),
                "model": model,
            },
        )

    def _build(self, desc: Any, sample: np.ndarray, model: str) -> Any:
        with tempfile.TemporaryDirectory(prefix="edgesynth-") as tmp:
            folder = Path(tmp)
            _write_description(folder, desc, sample)
            with _about(model, folder):
                return self._load_network(folder)

    def _options(self, folder: Path) -> Max7800xOptions:
        """What the core is told: the vendor's defaults for this device, the description in
        `folder`, edgesynth's own path (not write for write)."""
        from edgesynth.targets.max7800x.build_options import BuildOptions
        from edgesynth.targets.max7800x.device import get_device
        from edgesynth.targets.max7800x.options import Max7800xOptions, ProjectOptions

        return Max7800xOptions(
            build=BuildOptions(device=get_device(self.device_name), base_dir=folder),
            project=ProjectOptions(config_file=NETWORK_FILE),
        )

    def _load_network(self, folder: Path) -> Any:
        from edgesynth.targets.max7800x.pipeline import SynthesisJob, load_network

        net, _ = load_network(SynthesisJob(NETWORK_FILE, self._options(folder)))
        return net

    # -- check, plan, simulate --------------------------------------------------------------
    def check(self, program: Program) -> None:
        from edgesynth.targets.max7800x import rules
        from edgesynth.targets.max7800x.device import get_device

        rules.check_network(program.extra["network"], get_device(self.device_name), None)

    def plan(self, program: Program) -> None:
        net = program.extra["network"]
        program.plan = [
            {
                "layer": layer.name,
                "processors": layer.processors,
                "output_processors": layer.output_processors,
                "in_offset": layer.in_offset,
                "out_offset": layer.out_offset,
            }
            for layer in net.layers
        ]

    def simulate(self, program: Program, inputs: list[np.ndarray]) -> list[np.ndarray]:
        from edgesynth.targets.max7800x.network_sim import simulate

        net = program.extra["network"]
        batch = np.asarray(inputs[0], dtype=np.int64)
        want = program.outputs[0].shape
        outs = []
        for sample in batch:
            out = simulate(net, sample)[-1].output
            outs.append(out.reshape(want))
        return [np.stack(outs) if outs else np.zeros((0, *want), dtype=np.int64)]

    # -- emit, load -----------------------------------------------------------------------
    def emit(self, program: Program, folder: Path) -> list[str]:
        files = _write_description(folder, program.extra["description"], program.extra["sample"])
        with _about(program.extra.get("model", NETWORK_FILE), Path(folder)):
            files += self._write_project(Path(folder), program)
        return self.write_manifest(program, folder, files)

    def _write_project(self, folder: Path, program: Program) -> list[str]:
        """The C project for the description in `folder`, as `edgesynth izer` writes it."""
        from edgesynth.targets.max7800x.codegen import project_files
        from edgesynth.targets.max7800x.pipeline import SynthesisJob, synthesize

        job = SynthesisJob(NETWORK_FILE, self._options(folder), prove_placement=True)
        result = synthesize(job)
        if job.placement is not None:  # the description gets the placement the planner chose
            from edgesynth.targets.max7800x.placement import chosen_values
            from edgesynth.targets.max7800x.placement.yamltext import with_placement

            path = folder / NETWORK_FILE
            text = with_placement(
                path.read_text(), result.network.spec, chosen_values(job.placement), str(path)
            )
            path.write_text(text)
        plan, texts = project_files(result, job.options, PROJECT)
        program.extra["project"] = (result, plan)  # what `prove` runs
        (folder / PROJECT).mkdir(exist_ok=True)
        for name, text in texts.items():
            (folder / PROJECT / name).write_text(text)
        return [f"{PROJECT}/{name}" for name in sorted(texts)]

    # -- the proof --------------------------------------------------------------------------
    def prove(self, program: Program, folder: Path, inputs: list[np.ndarray]) -> Proof | None:
        """The project's writes (`project/`, write for write) on the virtual device leave its
        known answer (the program's sample, simulated) in data memory."""
        from edgesynth.targets.max7800x.proof import prove_project

        result, plan = program.extra["project"]
        remedy = (
            "Nothing was written. edgesynth chose this project's layout, so this is a defect in "
            "edgesynth: please report it with the model; --no-verify writes the project anyway "
            "(unproven)."
        )
        return prove_project(result, plan, self.device_name, remedy)

    def load(self, folder: Path, manifest: dict[str, Any]) -> Program:
        net = self._load_network(Path(folder))
        inputs = [TensorFormat.from_json(t) for t in manifest["inputs"]]
        outputs = [TensorFormat.from_json(t) for t in manifest["outputs"]]
        return Program(
            target=self.name,
            graph=g.Graph(manifest.get("network", "network")),
            layers=[],
            inputs=inputs,
            outputs=outputs,
            warnings=list(manifest.get("warnings", [])),
            extra={"network": net},
        )


@register
class Max78000(Max7800xTarget):
    name = "max78000"
    summary = "Analog Devices MAX78000: 64 processors, 512 KiB data memory (YAML + C project)"
    device_name = "MAX78000"
    executor = "the virtual MAX78000"


@register
class Max78002(Max7800xTarget):
    name = "max78002"
    summary = "Analog Devices MAX78002: 64 processors, 1,280 KiB data memory (YAML + C project)"
    device_name = "MAX78002"
    executor = "the virtual MAX78002"


TARGETS = [Max78000, Max78002]
