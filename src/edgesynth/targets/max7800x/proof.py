"""The proof of a MAX7800x project, run before it is moved into place: the project's own writes
(`plan.trace.plan_trace`, write for write what its C writes) replayed on the virtual device must
leave the known answer in data memory.

`prove_project` returns the Proof (one line) or raises ProofFailed with one message: the first
layer whose output differs from the bit-exact simulator's, the memory hazard that explains it
("layer 3's calcx4 kernels are written over layer 0's kernels"), what the board would do, and
what to do (`remedy`, which the command gives).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from edgesynth.proof import Proof, ProofFailed

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.network_sim import SynthesisResult
    from edgesynth.targets.max7800x.placement.verify import Hazard, KatReport, RunResult
    from edgesynth.targets.max7800x.plan.plan import Plan

IZER_REMEDY = (
    "Nothing was written. Run `edgesynth plan` on the network for a placement that works, or "
    "pass --no-verify to write exactly what the vendor's tool writes (unproven)."
)


def prove_project(result: SynthesisResult, plan: Plan, device: str, remedy: str) -> Proof:
    """Run the project's writes on the virtual `device`; the Proof, or ProofFailed."""
    return prove_run(result, plan, device, remedy)[0]


def prove_run(
    result: SynthesisResult, plan: Plan, device: str, remedy: str, record: bool = False
) -> tuple[Proof, RunResult]:
    """`prove_project`, with the device's run (for a caller that looks further: with `record`
    the run keeps the access log `placement.verify.run_hazards` reads)."""
    from edgesynth.targets.max7800x.placement.verify import run_hazards, run_known_answer

    run, report, known = run_known_answer(plan, device, record)
    executor = f"the virtual {device}"
    if report.ok:
        return Proof(executor, report.words, report.words), run
    if not record:  # the explanation needs the access log: run again, recording
        run, report, known = run_known_answer(plan, device, True)
    raise _failure(result, plan, device, remedy, run, report, run_hazards(plan, run, known))


def _failure(
    result: SynthesisResult,
    plan: Plan,
    device: str,
    remedy: str,
    run: RunResult,
    report: KatReport,
    found: list[Hazard],
) -> ProofFailed:
    """The one message for a run that missed the known answer, in YAML layer numbers."""
    hw_layer = first_failing_layer(run, result, plan)
    if hw_layer is None:
        hw_layer = report.first_bad_layer
    yaml = {h.index + plan.settings.hw_add(h.index): h.index for h in plan.hw}
    calcx4 = {yaml.get(p.layer, p.layer) for p in run.programs if p.calcx4}
    hazards = [_renumbered(h, yaml) for h in found]
    layer = None if hw_layer is None else yaml.get(hw_layer, hw_layer)
    spec = result.network.spec
    label = None
    if layer is not None:
        name = spec.layers[layer].name if 0 <= layer < len(spec.layers) else None
        label = f"layer {layer}" + (f" ({name})" if name else "")
    cause = explain(layer, hazards, calcx4) or vendor_packing(plan, hw_layer, layer)
    return ProofFailed(
        failure_message(
            device,
            report,
            label,
            cause,
            checks=plan.settings.opts.project.generate_kat,
            remedy=remedy,
        ),
        file=spec.path,
    )


def vendor_packing(plan: Plan, hw_layer: int | None, layer: int | None) -> str | None:
    """The vendor's packing of a layer's 1-, 2- or 4-bit kernels when its last input pass is
    partial (`compat.kernel_packing.unit_has_input`), where it left kernels out; else None."""
    processors = plan.settings.kernels.dropped.get(hw_layer) if hw_layer is not None else None
    if not processors:
        return None
    h = next(h for h in plan.hw if h.index == hw_layer)
    listed = ", ".join(map(str, processors[:8])) + (", ..." if len(processors) > 8 else "")
    return (
        f"the vendor's tool packs layer {layer}'s {h.bits}-bit kernels wrong: the last of its "
        f"{h.in_expand} input passes is partial ({h.input_chan} channels, "
        f"{h.in_expand_thresh} a pass), and its packing leaves out or moves the kernels of "
        f"processors {listed} (`edgesynth synth` and `edgesynth compile` pack them whole)"
    )


def _renumbered(hazard: Hazard, yaml: dict[int, int]) -> Hazard:
    """The hazard with YAML layer numbers (hidden hardware layers shift the numbers)."""
    from dataclasses import replace

    culprit = None if hazard.culprit is None else yaml.get(hazard.culprit, hazard.culprit)
    return replace(hazard, layer=yaml.get(hazard.layer, hazard.layer), culprit=culprit)


def first_failing_layer(run: RunResult, result: SynthesisResult, plan: Plan) -> int | None:
    """The first hardware layer, in run order, whose output on the device differs from the
    simulator's output of its YAML layer (layers whose shapes cannot be compared are passed)."""
    expected = {r.index + plan.settings.hw_add(r.index): r.output for r in result.layers}
    for layer in run.layers:
        want = expected.get(layer.layer)
        if want is None or want.shape != layer.output.shape:
            continue
        if not np.array_equal(want, layer.output):
            return layer.layer
    return None


def failure_message(
    device: str,
    report: KatReport,
    layer: str | None,
    hazard: str | None,
    *,
    checks: bool,
    remedy: str,
) -> str:
    """The one message for a project that misses its known answer."""
    where = f"{layer} is the first to compute wrong values" if layer is not None else ""
    cause = hazard or "no memory hazard explains it"
    head = (
        f"the project misses its known answer on the virtual {device} "
        f"({report.mismatches} of {report.words} words differ)"
    )
    if checks:
        board = (
            "On the board, the known-answer check fails (main() prints *** FAIL ***) and every "
            "inference computes wrong outputs."
        )
    else:
        board = (
            "On the board, every inference computes wrong outputs, and nothing checks them "
            "(--no-kat)."
        )
    return f"{head}: {where}{': ' if where else ''}{cause}. {board} {remedy}"


def explain(layer: int | None, hazards: list[Hazard], calcx4: set[int]) -> str | None:
    """The hazard behind `layer`'s wrong output, phrased for the user; None without one."""
    if not hazards:
        return None
    mine = [h for h in hazards if layer in (h.layer, h.culprit)]
    chosen = mine or hazards
    first = chosen[0]
    same = [h for h in chosen if (h.kind, h.layer, h.culprit) == (first.kind, first.layer,
                                                                     first.culprit)]  # fmt: skip
    victim = layer if layer in (first.layer, first.culprit) else first.layer
    return hazard_phrase(first.kind, victim, _other(first, victim), same, calcx4)


def _other(hazard: Hazard, victim: int | None) -> int | None:
    return hazard.culprit if hazard.layer == victim else hazard.layer


_WHERE = r"processor (\d+), words ([\d\-, ]+?)\)"  # (compiled on a failure only: re's cache)


def _kernel_places(hazards: list[Hazard]) -> str:
    """ "processors 16, 32 and 48, kernel words 4-6" from the hazards' messages."""
    found = [m.groups() for h in hazards if (m := re.search(_WHERE, h.message))]
    if not found:
        return ""
    processors = [p for p, _ in found]
    words = sorted({w for _, w in found})
    names = ", ".join(processors[:-1]) + " and " + processors[-1] if len(found) > 1 else found[0][0]
    noun = "processors" if len(found) > 1 else "processor"
    return f" ({noun} {names}, kernel words {'; '.join(words)})"


def _detail(message: str, layer: int | None) -> str:
    return re.sub(rf"^layer {layer}:? ", "", message)


def hazard_phrase(
    kind: str, victim: int | None, other: int | None, hazards: list[Hazard], calcx4: set[int]
) -> str:
    """One hazard kind in the user's terms: who wrote over what `victim` needed."""

    def kernels(layer: int | None) -> str:
        return f"layer {layer}'s {'calcx4 ' if layer in calcx4 else ''}kernels"

    if kind == "overlapping kernel blocks":
        return f"{kernels(other)} are written over {kernels(victim)}{_kernel_places(hazards)}"
    if kind == "overlapping bias blocks":
        return f"layer {other}'s bias is written over layer {victim}'s bias"
    if kind == "clobbered input":
        return (
            f"layer {other}'s output is written over data layer {victim} still reads: "
            + "; ".join(h.message for h in hazards)
        )
    if kind == "unwritten input":
        details = "; ".join(_detail(h.message, victim) for h in hazards)
        return f"layer {victim}'s input is never written in full: {details}"
    if kind == "unwritten kernels":
        return f"layer {victim}'s kernels are never loaded: " + "; ".join(
            _detail(h.message, victim) for h in hazards
        )
    return "; ".join(f"{h.kind}: {h.message}" for h in hazards)
