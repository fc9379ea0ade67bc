"""Proof of a placement: run the writes the generated project makes on the virtual device.

`device_check(plan)` replays the plan's writes (`plan.trace.plan_trace`: byte for byte what the
generated C writes, checked against the vendor's traces on the corpus) into the virtual device,
which interprets every layer from its registers alone, and reports whether the known-answer words
match and which memory hazards the run had (a layer overwriting data a later layer still reads,
a read of memory nobody wrote, overlapping kernel or bias blocks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.vdevice.record import Record

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.vdevice.hazards import Hazard
    from edgesynth.targets.max7800x.vdevice.knownanswer import KnownAnswer
    from edgesynth.targets.max7800x.vdevice.runner import KatReport, RunResult


class DeviceCheck(Record):
    ok: bool  # the known answer matches and there is no hazard
    kat_ok: bool
    hazards: list[str]
    output: np.ndarray  # the final layer's output read back from data memory
    details: list[str]


def run_plan(plan: Plan, device: str, record: bool = True) -> RunResult:
    """The plan's writes (what its generated project writes) run on the virtual device;
    `record`: keep the access log the hazard analysis needs."""
    from edgesynth.targets.max7800x.plan.trace import plan_trace
    from edgesynth.targets.max7800x.vdevice.runner import run
    from edgesynth.targets.max7800x.vdevice.trace import from_phases

    return run(from_phases(plan_trace(plan)), device, record)


def known_answer(plan: Plan) -> KnownAnswer:
    """The words the plan's project checks (its sampleoutput.h), as the device reads them."""
    from edgesynth.targets.max7800x.vdevice.knownanswer import from_blocks

    blocks = plan.kat
    return from_blocks(
        np.array([b.address for b in blocks], dtype=np.int64),
        np.array([b.mask for b in blocks], dtype=np.uint32),
        np.array([b.words.size for b in blocks], dtype=np.int64),
        np.concatenate([b.words for b in blocks]) if blocks else np.zeros(0, np.uint32),
    )


def run_known_answer(
    plan: Plan, device: str, record: bool = True
) -> tuple[RunResult, KatReport, KnownAnswer]:
    """The plan's writes run on the device, and its known answer checked against the run."""
    from edgesynth.targets.max7800x.vdevice.runner import check_kat

    result = run_plan(plan, device, record)
    known = known_answer(plan)
    return result, check_kat(result, known), known


def run_output(result: RunResult) -> np.ndarray:
    """The network's output as the run left it in data memory (what a CPU part reads)."""
    from edgesynth.targets.max7800x.vdevice.runner import network_output

    return network_output(result)


def run_hazards(plan: Plan, result: RunResult, known: KnownAnswer) -> list[Hazard]:
    """The run's memory hazards, less notes and reads of state kept between inferences."""
    from edgesynth.targets.max7800x.vdevice.runner import hazards_of

    kept = _kept_between_runs(plan)
    return [
        h for h in hazards_of(result, known) if not h.is_note and not _reads_kept_state(h, kept)
    ]


def device_check(plan: Plan, device: str) -> DeviceCheck:
    from edgesynth.targets.max7800x.vdevice.runner import check_kat, network_output

    result = run_plan(plan, device)
    known = known_answer(plan)
    report = check_kat(result, known)
    hazards = [f"{h.kind}: {h.message}" for h in run_hazards(plan, result, known)]
    return DeviceCheck(
        ok=report.ok and not hazards,
        kat_ok=report.ok,
        hazards=hazards,
        output=network_output(result, known),
        details=list(report.details),
    )


def _kept_between_runs(plan: Plan) -> tuple[np.ndarray, int, int] | None:
    """The data buffer's memory instances and words: state carried from one inference to the
    next, which a single run reads before anything wrote it."""
    from edgesynth.targets.max7800x.placement.buffers import buffer_of, buffer_words

    spec = plan.settings.net_spec
    buffer = buffer_of(spec)
    if buffer is None:
        return None
    device = plan.settings.chip.device
    instances = {p // device.processors_sharing_memory
                 for p in range(device.processors) if buffer.processors >> p & 1}  # fmt: skip
    first = buffer.offset // 4
    return np.array(sorted(instances)), first, first + buffer_words(buffer, spec)


def _reads_kept_state(hazard, kept) -> bool:  # type: ignore[no-untyped-def]
    """An unwritten-input read entirely inside the data buffer (its earlier contents)."""
    if kept is None or hazard.kind != "unwritten input" or hazard.where is None:
        return False
    instances, low, high = kept
    quad, word = hazard.where
    return bool(np.isin(quad, instances).all() and ((word >= low) & (word < high)).all())
