"""`edgesynth synth` of a YAML whose trailing layers are marked `cpu: true`
(`description/cpu_marks.py`): the accelerator runs the layers before them (as `--stop-after`
the last unmarked layer), the project's cpu_part.c the marked ones (`cpu/from_layers.py`),
on the accelerator's output; the known answer is the CPU part's result. The proof runs the
project's writes on the virtual device, then builds cpu_part.c for this PC and compares it
with the CPU part's simulator on the device's output, value for value.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.cpu.program import CpuProgram
    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.options import Max7800xOptions
    from edgesynth.targets.max7800x.plan.plan import Plan

PROOF_FILES = ("cpu_part.c", "cpu_part.h", "softmax.c")


@dataclass
class CpuLayers:
    """The marked layers of a synth run, and (once rendered) their CPU program and result."""

    first: int  # the first layer marked `cpu: true`
    softmax: bool  # --softmax: the project's softmax runs on the CPU part's result
    program: CpuProgram | None = field(default=None, init=False)
    output: np.ndarray | None = field(default=None, init=False)  # the known answer's result

    def add_files(self, result: SynthesisResult, options: Max7800xOptions, files: dict[str, str],
                  name: str) -> None:  # fmt: skip
        """Lower the marked layers (`result.network` holds their weights), check them against
        the chip's memory and add cpu_part.c/.h to the project's `files`."""
        from edgesynth.targets.max7800x.cpu.emit import render_cpu_part
        from edgesynth.targets.max7800x.cpu.from_layers import lower_layers
        from edgesynth.targets.max7800x.cpu.memory import check_memory
        from edgesynth.targets.max7800x.cpu.simulate import simulate

        device = options.device.name
        program, shape = lower_layers(result.network, self.first, self.softmax)
        check_memory(program, device, result.network.layers[self.first - 1].name)
        out = simulate(program, np.asarray(result.output)[None])[0]
        expected = out if options.project.generate_kat else None
        files.update(render_cpu_part(program, name, device, expected))
        self.program, self.output = program, out.reshape(shape)
        core = "RISC-V core" if options.rules.riscv else "Cortex-M4"
        print(_partition_line(result, self.first, program, device, core))

    def prove(self, result: SynthesisResult, plan: Plan, files: dict[str, str], device: str
              ) -> None:  # fmt: skip
        """The virtual device's run of the project's writes, then the host build of its
        cpu_part.c on the device's output (both lines printed; ProofFailed: nothing written)."""
        from edgesynth.targets.max7800x.cpu.host import prove_cpu_part
        from edgesynth.targets.max7800x.placement.verify import run_output
        from edgesynth.targets.max7800x.proof import IZER_REMEDY, prove_run

        assert self.program is not None
        proof, run = prove_run(result, plan, device, IZER_REMEDY)
        print(proof.line)
        with tempfile.TemporaryDirectory(prefix="edgesynth-cpu-") as tmp:
            for name in PROOF_FILES:
                (Path(tmp) / name).write_text(files[name])
            cpu = prove_cpu_part(self.program, Path(tmp), run_output(run), IZER_REMEDY)
        print(cpu.line)


def with_cpu_layers(options: Max7800xOptions) -> tuple[Max7800xOptions, CpuLayers | None]:
    """`options` for the description's accelerator layers, and its marked layers (None: no
    layer is marked; `options` as they are)."""
    from edgesynth.targets.max7800x.description.cpu_marks import cpu_run
    from edgesynth.targets.max7800x.description.yamlcfg import load_spec

    build = options.build
    path = Path(options.project.config_file)
    try:
        spec = load_spec(path if path.is_absolute() else build.base_dir / path)
    except EdgesynthError:
        return options, None  # the run refuses it where it did (after the output folder's check)
    spec.path = options.project.config_file
    first = cpu_run(spec)
    if first is None:
        return options, None
    given = [opt for opt, value in (("--stop-after", build.stop_after),
             ("--skip-yaml-layers", build.skip_yaml_layers), ("--start-layer", build.start_layer),
             ("--output-width", build.output_width)) if value]  # fmt: skip
    if given:
        raise EdgesynthError(
            f"{given[0]} and layers marked `cpu: true` both choose the layers the accelerator "
            "runs: give one of them",
            file=spec.path,
            key=given[0],
        )
    if not options.project.unload:
        raise EdgesynthError(
            "the layers marked `cpu: true` read the accelerator's output through cnn_unload(): "
            "drop --no-unload",
            file=spec.path,
            key="--no-unload",
        )
    build = replace(build, stop_after=first - 1, cpu_layers=True)
    project = replace(options.project, softmax=False)  # cpu_part.c runs it, on its result
    cpu = CpuLayers(first, bool(options.project.softmax))
    return replace(options, build=build, project=project, cpu_part=True), cpu


def _partition_line(
    result: SynthesisResult, first: int, program: CpuProgram, device: str, core: str
) -> str:
    """Which layers run where, and the CPU part's estimated cycles (the Cortex-M4's model)."""
    from edgesynth.targets.max7800x.cpu.emit import estimate

    layers = result.network.layers
    cycles = sum(c.cycles for c in estimate(program))
    cpu = ", ".join(layer.name for layer in layers[first:])
    runs = "layer 0" if first == 1 else f"layers 0 to {first - 1}"
    return (
        f"{device}: CNN accelerator runs {runs}; the {core} (cpu_part.c) "
        f"runs {cpu}: ~{cycles:,} Cortex-M4 cycles (an instruction-count estimate)"
    )
