"""`edgesynth plan NET.yaml [CHECKPOINT] --device D [-o PLANNED.yaml] [--picture MAP.png]`.

Loads the network (placing every layer whose YAML leaves the placement out), checks it with the
device rules, plans the project as `synth` would, runs the project's writes on the virtual
device, and prints the data-memory, kernel-memory and bias-memory maps and the latency
estimate. `-o` writes the YAML with the chosen keys added (the user's lines kept as written).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import check_output_file, write_file_atomic

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.options import Max7800xOptions
    from edgesynth.targets.max7800x.plan.plan import Plan


@dataclass
class PlanOptions:
    network: Path
    checkpoint: Path | None
    device: str = "MAX78000"
    sample_input: Path | None = None
    output: Path | None = None
    picture: Path | None = None
    report: Path | None = None  # the HTML page (`edgesynth report`)
    overwrite: bool = False
    device_check: bool = True
    izer_options: tuple[str, ...] = ()


def _core_options(o: PlanOptions) -> Max7800xOptions:
    """What the core is told: the vendor's defaults for the device on edgesynth's own path,
    with the `--izer-option`s (read by `izer`)."""
    from edgesynth.targets.max7800x.commands.izer import with_vendor_options
    from edgesynth.targets.max7800x.commands.option_names import NATIVE
    from edgesynth.targets.max7800x.description.assemble_options import BuildOptions
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.targets.max7800x.options import Max7800xOptions, ProjectOptions

    options = Max7800xOptions(
        build=BuildOptions(
            device=get_device(o.device),
            checkpoint=None if o.checkpoint is None else str(o.checkpoint),
            sample_input=None if o.sample_input is None else str(o.sample_input),
            names=NATIVE,
        ),
        project=ProjectOptions(config_file=str(o.network)),
    )
    return with_vendor_options(options, list(o.izer_options))[0]


def _check_outputs(o: PlanOptions) -> None:
    inputs = [o.network, o.checkpoint, o.sample_input]
    for path, option, suffixes in (
        (o.output, "-o", (".yaml", ".yml")),
        (o.picture, "--picture", (".png", ".svg", ".pdf")),
        (o.report, "--report", (".html", ".htm")),
    ):
        if path is None:
            continue
        check_output_file(path, overwrite=o.overwrite, inputs=inputs, option=option)
        if path.suffix.lower() not in suffixes:
            raise EdgesynthError(f"{path}: name a {' or '.join(suffixes)} file.", key=option)


def _prove(result: SynthesisResult, plan: Plan, placed: bool, o: PlanOptions) -> str:
    """The proof line: the project's writes on the virtual device reproduce the known answer
    (ProofFailed otherwise) and have no memory hazard."""
    from edgesynth.targets.max7800x.placement.verify import known_answer, run_hazards
    from edgesynth.targets.max7800x.proof import prove_run

    device = result.network.device
    if placed:
        remedy = (
            "edgesynth placed this network, so this is a defect: please report it with this "
            "YAML; --no-verify skips the check."
        )
    else:
        remedy = (
            "Leave out `processors`, `output_processors`, `in_offset` and `out_offset` so that "
            "edgesynth places the layers, or pass --no-verify to skip the check."
        )
    proof, run = prove_run(result, plan, device, remedy, record=True)
    hazards = run_hazards(plan, run, known_answer(plan))
    if hazards:
        raise EdgesynthError(
            "the virtual device finds a memory hazard in the project: "
            + "; ".join(f"{h.kind}: {h.message}" for h in hazards[:5])
            + f". {remedy}",
            file=str(o.network),
        )
    return f"{proof.line}; no memory hazard"


def run_plan(o: PlanOptions) -> list[str]:
    """Plan the network; returns the report lines (also printed)."""
    from edgesynth.targets.max7800x.network_sim import simulate
    from edgesynth.targets.max7800x.pipeline import (
        SynthesisJob,
        SynthesisResult,
        check_network,
        load_network,
    )
    from edgesynth.targets.max7800x.placement import chosen_values, report
    from edgesynth.targets.max7800x.placement.yamltext import with_placement
    from edgesynth.targets.max7800x.plan.plan import make_plan

    _check_outputs(o)
    options = _core_options(o)
    job = SynthesisJob(options.project.config_file, options, prove_placement=True)
    net, sample = load_network(job)
    check_network(net, job)
    result = SynthesisResult(net, sample, simulate(net, sample, job.sim))
    plan = make_plan(result, job.options)
    placement = job.placement

    lines: list[str] = []
    if placement is None:
        lines.append(f"{o.network}: the YAML places every layer; nothing to choose.")
    else:
        chosen = sum(1 for keys in placement.chosen.values() if keys)
        state = "optimal" if placement.solution.optimal else "best found within the search effort"
        lines.append(
            f"{o.network}: placed {chosen} of {len(net.order)} layers ({state}; "
            f"{len(placement.problem.blocks)} tensors in data memory)."
        )
        lines += report.memory_map(placement)
        lines += [f"snoop: {d.describe()}: placed so." for d in placement.problem.decisions]
    lines += report.kernel_map(plan)
    lines += report.bias_map(plan)
    lines += report.latency_lines(plan)
    if o.device_check:
        lines.append(_prove(result, plan, placement is not None, o))
    if o.output is not None:
        values = chosen_values(placement) if placement is not None else {}
        text = Path(o.network).read_text()
        written = write_file_atomic(
            o.output,
            with_placement(text, net.spec, values, str(o.network)),
            overwrite=o.overwrite,
            inputs=[o.network, o.checkpoint, o.sample_input],
            option="-o",
        )
        lines.append(f"wrote {written}")
    if o.picture is not None and placement is not None:
        from edgesynth.targets.max7800x.placement.picture import draw

        lines.append(f"wrote {draw(placement, plan, o.picture, overwrite=o.overwrite)}")
    if o.report is not None:
        from edgesynth.targets.max7800x.report_data import write_page

        inputs = [o.network, o.checkpoint, o.sample_input]
        page = write_page(
            result, job.options, o.report, network=o.network, overwrite=o.overwrite, inputs=inputs
        )
        lines.append(f"wrote {page}")
    print("\n".join(lines))
    return lines
