"""What `edgesynth device decode | run` do, as plain functions (`decode_trace`, `run_device`);
`vdevice/cli.py` declares the command line and calls them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import check_output_file, output_folder, save_npy_atomic
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.recorder.record import compiler, record_project
from edgesynth.targets.max7800x.vdevice import cycles
from edgesynth.targets.max7800x.vdevice.decode import describe
from edgesynth.targets.max7800x.vdevice.knownanswer import KnownAnswer, load_kat
from edgesynth.targets.max7800x.vdevice.record import Factory, Record
from edgesynth.targets.max7800x.vdevice.regmap import MAPS
from edgesynth.targets.max7800x.vdevice.report import layer_line
from edgesynth.targets.max7800x.vdevice.runner import (
    RunResult,
    check_kat,
    first_divergent_layer,
    hazards_of,
    network_output,
    register_diff,
    run,
)
from edgesynth.targets.max7800x.vdevice.state import replay
from edgesynth.targets.max7800x.vdevice.trace import Trace, read_trace
from edgesynth.wording import plural

# A devtrace-style recorder script to use instead of edgesynth's own (recorder/).
RECORDER_ENV = "EDGESYNTH_DEVTRACE"


def detect_device(trace: Trace) -> str:
    """MAX78000 or MAX78002, from where the firmware's quadrant control writes go (MAX78000
    first: its control registers are nothing on a MAX78002, while MAX78002's first one is
    MAX78000 data memory)."""
    for name, dmap in MAPS.items():
        controls = [dmap.group_address(g) for g in range(4)]
        if np.isin(trace.addr, controls).any():
            return name
    raise EdgesynthError(
        "cannot tell the device from the trace (no write to a quadrant's control register); "
        "give --device MAX78000 or MAX78002",
        file=trace.source,
    )


def _device(trace: Trace, device: str | None) -> str:
    if device is None:
        return detect_device(trace)
    name = get_device(device).name
    try:
        seen = detect_device(trace)
    except EdgesynthError:
        return name
    if seen != name:
        raise EdgesynthError(
            f"`--device {device}`: this trace drives a {seen} (its first control write goes to "
            f"0x{MAPS[seen].group_base:08x}); use --device {seen}",
            file=trace.source,
        )
    return name


def decode_trace(
    trace_path: str | Path,
    device: str | None = None,
    memories: bool = True,
    contents: bool = False,
) -> str:
    """The accelerator state the trace leaves behind, by register and field name."""
    trace = read_trace(trace_path)
    machine = replay(trace, MAPS[_device(trace, device)])
    return "\n".join(describe(machine, memories=memories, contents=contents))


class DeviceRun(Record):
    """What `device run` found: the run itself, its report lines and whether it passed."""

    result: RunResult
    lines: list[str] = Factory(list)
    ok: bool = True
    output: np.ndarray | None = None


def find_project(folder: Path) -> tuple[Path, str | None]:
    """The generated project in `folder`: the folder itself when it holds cnn.c, else the one
    folder inside it that does (`compile -t max78000 -o DIR` writes DIR/project), with a note."""
    if not folder.is_dir():
        raise EdgesynthError(
            "no such folder" if not folder.exists() else "not a folder", file=str(folder)
        )
    if (folder / "cnn.c").is_file():
        return folder, None
    inner = sorted(p.parent for p in folder.glob("*/cnn.c"))
    if len(inner) == 1:
        return inner[0], f"note: {folder} holds no cnn.c; running the project in {inner[0]}"
    if inner:
        names = ", ".join(str(p) for p in inner)
        raise EdgesynthError(
            f"not a generated project: no cnn.c here, and several projects inside ({names}); "
            "name one of them",
            file=str(folder),
        )
    raise EdgesynthError(
        "not a generated project: no cnn.c here or in a folder inside; give the folder "
        "`edgesynth synth -o` or `edgesynth izer` wrote (for `edgesynth compile -t max78000 "
        "-o DIR`, DIR/project)",
        file=str(folder),
    )


def record_trace(project: Path, recorder: Path | None = None) -> Trace:
    """Compile a generated project on this PC and record its writes: with edgesynth's own
    recorder, or with a devtrace-style `run.sh PROJECT TRACE` (--recorder, $EDGESYNTH_DEVTRACE)."""
    if not (project / "cnn.c").is_file():
        raise EdgesynthError("not a generated project: no cnn.c", file=str(project))
    override = recorder or (
        Path(os.environ[RECORDER_ENV]) if os.environ.get(RECORDER_ENV) else None
    )
    with tempfile.TemporaryDirectory(prefix="edgesynth-trace-") as tmp:
        out = Path(tmp) / "project.trace"
        if override is None:
            record_project(project, out)
        else:
            _run_script(override, project, out)
        return read_trace(out)


def _run_script(script: Path, project: Path, out: Path) -> None:
    if not script.is_file():
        raise EdgesynthError(
            f"the recorder is missing: {script} (from --recorder or {RECORDER_ENV})"
        )
    compiler()
    done = subprocess.run(
        ["bash", str(script), str(project), str(out)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not out.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise EdgesynthError(
            "recording the project's writes failed: " + " | ".join(tail), file=str(project)
        )


def run_device(
    *,
    trace: str | Path | None = None,
    project: str | Path | None = None,
    device: str | None = None,
    kat: str | Path | None = None,
    output: str | Path | None = None,
    layers: str | Path | None = None,
    recorder: str | Path | None = None,
    reference: str | Path | None = None,
    overwrite: bool = False,
) -> DeviceRun:
    """Replay a trace (or a project's recorded writes), run every layer, check, write files."""
    if (trace is None) == (project is None):
        raise EdgesynthError("give either a project folder or --trace TRACE")
    inputs = [trace, project, kat, reference]
    layers_plan = (
        output_folder(layers, overwrite=overwrite, inputs=inputs, option="--layers")
        if layers is not None
        else None
    )
    if output is not None:
        check_output_file(output, overwrite=overwrite, inputs=inputs, option="--output")
    known: KnownAnswer | None = None
    note = None
    if project is not None:
        project, note = find_project(Path(project))
        recorded = record_trace(project, Path(recorder) if recorder else None)
        header = project / "sampleoutput.h"
        if kat is None and header.is_file():
            kat = header
    else:
        recorded = read_trace(trace)
    if kat is not None:
        known = load_kat(kat)
    name = _device(recorded, device)
    result = run(recorded, name)
    report = DeviceRun(result)
    lines = report.lines
    if note:
        lines.append(note)
    lines.append(
        f"{name}: {plural(len(recorded), 'write')}, {plural(len(result.layers), 'layer')} run"
    )
    estimates = cycles.estimate_all(result.programs, result.layers)
    for prog, layer, cyc in zip(result.programs, result.layers, estimates, strict=True):
        lines.append(layer_line(prog, layer, cyc))
    if estimates:
        lines.append(f"estimated total: ~{cycles.total_cycles(estimates)} cycles with start-up")
    if result.snoop_units:
        lines.extend(result.snoop_units.lines())
    if known is not None:
        check = check_kat(result, known)
        result.kat = check
        if check.ok:
            lines.append(f"known answer: all {check.words} words match")
        else:
            report.ok = False
            lines.append(
                f"known answer: {check.mismatches} of {check.words} words differ; the first layer "
                f"that wrote a differing word is layer {check.first_bad_layer}"
            )
            lines.extend(f"  {d}" for d in check.details)
    if reference is not None:
        _compare(lines, read_trace(reference), result, name)
    lines.extend(f"note: {w}" for w in result.warnings)
    hazards = hazards_of(result, known)
    for hazard in hazards:
        label = "note" if hazard.is_note else "hazard"
        lines.append(f"{label}: {hazard.kind}: {hazard.message}")
    if result.layers:
        last = result.layers[-1]
        report.output = network_output(result, known)
        shape = "x".join(str(s) for s in report.output.shape)
        lines.append(f"output of layer {last.layer}: {shape}")
        if output is not None:
            written = save_npy_atomic(
                output, report.output, overwrite=overwrite, inputs=inputs, option="--output"
            )
            lines.append(f"wrote {written}")
    if layers_plan is not None and result.layers:
        with layers_plan as folder:
            for layer in result.layers:
                # what the layer computed and wrote (read back at the end of the run, a later
                # layer may have overwritten it, or a streaming layer's circular buffer holds
                # only its last rows)
                folder.write_npy(f"layer{layer.layer:02d}.npy", layer.output.astype(np.int64))
        lines.append(f"wrote every layer's output to {layers}/")
    return report


def _compare(lines: list[str], reference_trace: Trace, result: RunResult, name: str) -> None:
    """Differences from a known-good trace of the same network: registers and first layer."""
    reference = run(reference_trace, name)
    changes = register_diff(reference.machine, result.machine)
    layer = first_divergent_layer(reference, result)
    lines.append(
        f"reference: {len(changes)} register fields differ"
        + (f"; layer {layer} is the first whose output differs" if layer is not None else "")
    )
    lines.extend(f"  {c}" for c in changes[:20])


# ---------------------------------------------------------------------------------------------
# argparse
# ---------------------------------------------------------------------------------------------
