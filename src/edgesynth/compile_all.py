"""`edgesynth compile MODEL -t all` (or `-t NAME,NAME`): one model compiled for every target
that can run it, each into OUT/<target>/ through the one compile path (`flow_cli.
compile_from_args`, the proof included), and one table: per target whether it compiled (or the
rule it breaks), its MACs, the memory its weights and activations take against the chip's
(`Target.summarize`), its latency estimate and, with --data, its top-1 agreement with the float
model (`validate.core`). A target that refuses the network is a row; none compiling is exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgesynth.errors import EdgesynthError, MultipleErrors, UsageError, did_you_mean

if TYPE_CHECKING:
    from edgesynth.targets.base import Program, TargetSummary
    from edgesynth.validate.samples import Samples

ALL = "all"
FORMAT = "edgesynth-compile-all/1"
CompileOne = Callable[[argparse.Namespace, str, dict[str, object]], tuple["Program", list[str]]]
# the `compile` options that name one target's files or keys, refused with a list of targets
ONE_TARGET_OPTIONS = {"option": "--option", "export_integer_onnx": "--export-integer-onnx"}
LIST_OPTIONS = {"data": "--data", "labels": "--labels", "json": "--json"}


def is_target_list(text: str) -> bool:
    """`-t all` or `-t NAME,NAME`: the compile-for-several-targets form."""
    return text.strip().lower() == ALL or "," in text


def target_list(text: str) -> list[str]:
    """The targets `-t` names: every registered one for `all`, else the listed ones in the
    order given (each once). An unknown or empty name is a usage error naming the known ones."""
    from edgesynth.targets.registry import target_names

    known = target_names()
    if text.strip().lower() == ALL:
        return known
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if name not in known:
            what = f"unknown target `{raw.strip()}`" if name else "an empty target name"
            raise UsageError(
                f"argument --target/-t: {what} in `{text}`; the targets are "
                f"{', '.join(known)} (or `{ALL}`)." + did_you_mean(name, known),
                prog="edgesynth compile",
            )
        if name not in names:
            names.append(name)
    return names


def refuse_list_options(args: argparse.Namespace) -> None:
    """--data, --labels and --json fill the table of `-t all` or a list; one target has none."""
    for attr, flag in LIST_OPTIONS.items():
        if getattr(args, attr, None) is not None:
            raise UsageError(
                f"{flag} is for a table of targets (-t {ALL} or -t NAME,NAME), not -t "
                f"{args.target}; `edgesynth validate MODEL -t {args.target} --data ...` "
                "measures one target",
                prog="edgesynth compile",
            )


@dataclass
class Row:
    """One target's line of the table."""

    target: str
    folder: Path | None = None  # where its files are (None: refused)
    error: str | None = None  # the rule it breaks (first line of the message)
    summary: TargetSummary | None = None
    files: int = 0
    agreement: float | None = None  # top-1 agreement with the float model on --data
    accuracy: float | None = None  # against --labels
    float_accuracy: float | None = None  # the float model's, against --labels

    @property
    def compiled(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        summary = self.summary.to_json() if self.summary is not None else {}
        return {
            "target": self.target,
            "compiled": self.compiled,
            "error": self.error,
            "folder": None if self.folder is None else str(self.folder),
            "files": self.files,
            **summary,
            "top1_agreement": self.agreement,
            "accuracy": {"target": self.accuracy, "float": self.float_accuracy},
        }


def compile_all(args: argparse.Namespace, compile_one: CompileOne) -> int:
    """Compile args.model for every target of `-t` into args.output/<target>/ with
    `compile_one` (`flow_cli.compile_from_args`); print the table, write --json; exit 1 when
    no target compiled."""
    from edgesynth.outputs import check_output_file, check_output_folder, write_file_atomic

    names = target_list(args.target)
    for attr, flag in ONE_TARGET_OPTIONS.items():
        if getattr(args, attr, None):
            raise UsageError(
                f"{flag} is for one target: compile with -t NAME to use it",
                prog="edgesynth compile",
            )
    if args.labels is not None and args.data is None:
        raise UsageError("--labels needs --data (the samples they label)", prog="edgesynth compile")
    inputs = [args.model, args.checkpoint, args.calibration, args.sample_input]
    inputs += [args.data, args.labels]
    for folder in [args.output, *(Path(args.output) / name for name in names)]:
        check_output_folder(folder, overwrite=args.overwrite, inputs=inputs, option="--output")
    _check_shared_inputs(args)
    if args.json is not None:
        check_output_file(args.json, overwrite=args.overwrite, inputs=inputs, option="--json")
    page = _report_file(args, inputs)
    rows, programs = [], {}
    for name in names:
        row, program = _compile_one(args, name, compile_one)
        rows.append(row)
        if program is not None:
            programs[name] = program
    samples = None
    if args.data is not None and programs:
        samples = _measure(args, rows, programs)
    if args.json is not None:
        text = json.dumps(_json(args, rows, samples), indent=1) + "\n"
        write_file_atomic(args.json, text, overwrite=args.overwrite, inputs=inputs, option="--json")
    print("\n".join(table_lines(args, rows, samples)))
    if args.json is not None:
        print(f"wrote {args.json}")
    if page is not None and programs:
        print(f"wrote {_write_report(args, rows, page, inputs)}")
    if not programs:
        raise EdgesynthError(_none_compiled(args, rows))
    return 0


def _none_compiled(args: argparse.Namespace, rows: list[Row]) -> str:
    """Why exit 1: no target compiled; one reason when every target gave the same."""
    names = ", ".join(r.target for r in rows)
    reasons = {r.error for r in rows}
    if len(reasons) == 1:
        return (
            f"no target of {names} can run {args.model}, each for the same reason: {reasons.pop()}"
        )
    return f"no target of {names} can run {args.model}: the table names the rule each one breaks"


def _check_shared_inputs(args: argparse.Namespace) -> None:
    """What every target reads alike is refused once, before any target: a missing model,
    --data or --labels, an unreadable calibration file (the model's own content is each
    target's to judge; the samples are read once the first target gives their shape)."""
    from edgesynth.flow import load_array

    for path, flag in [(args.model, None), (args.data, "--data"), (args.labels, "--labels")]:
        if path is not None and not Path(path).exists():
            raise EdgesynthError("no such file", file=str(path), key=flag)
    if args.calibration is not None:
        load_array(args.calibration, "calibration data", "--calibration")


def _compile_one(
    args: argparse.Namespace, name: str, compile_one: CompileOne
) -> tuple[Row, Program | None]:
    """One target through the one compile path into OUT/<name>/; a refusal is the row's rule."""
    from edgesynth.targets.base import get_target

    one = argparse.Namespace(**vars(args))
    one.output = Path(args.output) / name
    print(f"edgesynth: compiling for {name} ...", file=sys.stderr)
    try:
        program, files = compile_one(one, name, {})
    except EdgesynthError as err:
        return Row(name, error=first_line(err)), None
    summary = get_target(name).summarize(program)
    return Row(name, folder=one.output, summary=summary, files=len(files)), program


def first_line(err: EdgesynthError) -> str:
    """The rule an error names, on one line: a list of problems gives its first and a count."""
    if isinstance(err, MultipleErrors) and err.errors:
        more = len(err.errors) - 1
        first = err.errors[0].render().splitlines()[0]
        return first + (f" (and {more} more)" if more else "")
    lines = [line for line in err.render().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


# -- the page (--report) ------------------------------------------------------------------------


def _report_file(args: argparse.Namespace, inputs: list) -> Path | None:
    """`--report`: OUT/report.html, checked before any target compiles."""
    if not getattr(args, "report", False):
        return None
    from edgesynth.report.cli import checked_page

    return checked_page(args.output, overwrite=args.overwrite, inputs=inputs)


def _write_report(args: argparse.Namespace, rows: list[Row], page: Path, inputs: list) -> Path:
    """The compiled targets' page, with the table's rows (memory, latency, agreement)."""
    from edgesynth.report.cli import folder_page
    from edgesynth.report.model import Report

    results = Report(title="", targets=[])
    results.comparison = [r.to_json() for r in rows]
    results.refused = {r.target: r.error for r in rows if r.error is not None}
    return folder_page(args.output, page, overwrite=args.overwrite, inputs=inputs, results=results)


# -- the float model's agreement ----------------------------------------------------------------


def _measure(args: argparse.Namespace, rows: list[Row], programs: dict[str, Program]) -> Samples:
    """Each compiled target's top-1 agreement with the float model (and accuracy with --labels)
    on --data: `validate.core` on the program's bit-exact model."""
    from edgesynth.validate.core import validate
    from edgesynth.validate.reference import reference_device, reference_for
    from edgesynth.validate.samples import load_labels, load_samples

    first = next(iter(programs.values()))
    samples = load_samples(args.data, tuple(first.inputs[0].shape))
    if args.labels is not None:
        samples.labels = load_labels(args.labels, len(samples.x))
    references: dict[str, Any] = {}
    for row in rows:
        program = programs.get(row.target)
        if program is None:
            continue
        device = reference_device(row.target)
        if device not in references:
            references[device] = reference_for(
                args.model, args.checkpoint, args.sample_input, device
            )
        out = validate(program, references[device], samples.x, samples.labels).outputs[0]
        row.agreement = out.agreement
        row.accuracy, row.float_accuracy = out.accuracy("target"), out.accuracy("float")
    return samples


# -- the table --------------------------------------------------------------------------------


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def _memory(used: int | None, capacity: int | None, memory: str | None) -> str:
    if used is None:
        return "-"
    where = f" {memory}" if memory else ""
    if not capacity:
        return f"{_size(used)}{where}"
    return f"{_size(used)} of {_size(capacity)}{where} ({100 * used / capacity:.1f}%)"


def _latency(s: TargetSummary) -> tuple[str, str]:
    if s.cycles is None:
        return "-", "-"
    seconds = s.seconds
    if seconds is None or not s.clock_hz:
        return f"{s.cycles:,}", "-"
    return f"{s.cycles:,}", f"{1000 * seconds:.3f} ms at {s.clock_hz / 1e6:g} MHz"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _cells(row: Row, measured: bool) -> list[str]:
    s = row.summary
    assert s is not None
    cycles, time = _latency(s)
    cells = [
        row.target,
        "compiled",
        "-" if s.macs is None else f"{s.macs:,}",
        _memory(s.weight_bytes, s.weight_capacity, s.weight_memory),
        _memory(s.activation_bytes, s.activation_capacity, s.activation_memory),
        cycles,
        time,
    ]
    if measured:
        cells += [_percent(row.agreement), _percent(row.accuracy)]
    return cells


def table_lines(args: argparse.Namespace, rows: list[Row], samples: Samples | None) -> list[str]:
    """The table as printed: one line per target, a refused one with the rule it breaks."""
    head = ["target", "result", "MACs", "weights", "activations", "cycles", "time"]
    measured = samples is not None
    if measured:
        head += ["top-1 agreement", "accuracy"]
    body = [_cells(r, measured) for r in rows if r.compiled]
    widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
    widths[0] = max([widths[0], *(len(r.target) for r in rows)])

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    compiled = iter(body)
    lines = [f"{args.model} on {len(rows)} targets (folders in {args.output}):", line(head)]
    for row in rows:
        if row.compiled:
            lines.append(line(next(compiled)))
        else:
            lines.append(f"{row.target.ljust(widths[0])}  refused: {row.error}")
    if samples is not None:
        lines.append(_measured_note(samples, rows))
    lines.append(
        "memory: used of the chip's capacity (no capacity: the board's memory); cycles and "
        "time: the target's own estimate at its nominal clock; -: the target gives none"
    )
    return lines


def _measured_note(samples: Samples, rows: list[Row]) -> str:
    note = (
        f"top-1 agreement: the target's bit-exact model against the float model on "
        f"{len(samples.x)} samples of {samples.source}"
    )
    floats = {r.float_accuracy for r in rows if r.float_accuracy is not None}
    if floats:
        note += f"; accuracy against the labels (the float model: {_percent(floats.pop())})"
    return note


def _json(args: argparse.Namespace, rows: list[Row], samples: Samples | None) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "model": str(args.model),
        "output": str(args.output),
        "data": None if samples is None else samples.source,
        "samples": None if samples is None else len(samples.x),
        "targets": [r.to_json() for r in rows],
    }
