"""`edgesynth validate`: a target's bit-exact model against the float model on the user's own
samples (see `edgesynth.validate.core`; the printed text is `edgesynth.validate.text`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.cliargs import add_overwrite, parse_options, positive_float, positive_int
from edgesynth.errors import EdgesynthError

if TYPE_CHECKING:
    from edgesynth.targets.base import Program
    from edgesynth.validate.reference import Reference
    from edgesynth.validate.samples import Samples

CALIBRATION_SAMPLES = 300  # a float model without --calibration: the first samples of --data


def validate_cmd(args: argparse.Namespace) -> int:
    """Validate MODEL (or a compiled folder) on --data; print the metrics, write --json."""
    from edgesynth.outputs import check_output_file, write_file_atomic
    from edgesynth.validate.core import validate
    from edgesynth.validate.text import progress_bar, report_json, report_lines

    inputs = [args.model, args.data, args.labels]
    inputs += [args.checkpoint, args.reference, args.calibration, args.sample_input]
    if args.json is not None:
        check_output_file(args.json, overwrite=args.overwrite, inputs=inputs, option="--json")
    if args.report is not None:
        check_output_file(args.report, overwrite=args.overwrite, inputs=inputs, option="--report")
    notes: list[str] = []
    if args.model.is_dir():
        program, samples = _compiled_folder(args)
        reference = _reference(args, args.reference, program.target)
    else:
        program, samples, reference = _from_model(args, notes)
    if reference is None and samples.labels is None:
        raise EdgesynthError(
            "nothing to compare the target with: give the float model (--reference MODEL.onnx) "
            "or labels (--labels NPY)",
            key="--reference",
        )
    result = validate(
        program,
        reference,
        samples.x,
        samples.labels,
        per_layer=args.per_layer,
        progress=progress_bar(sys.stderr),
        loaded=args.model.is_dir(),
    )
    result.notes = notes
    sources = {
        "model": str(args.model),
        "reference": None if reference is None else reference.source,
        "data": samples.source,
        "labels": _labels_source(args, samples),
    }
    lines = report_lines(result, sources)
    if args.json is not None:  # before the report, which a reader (`| head`) may cut short
        written = write_file_atomic(
            args.json,
            report_json(result, sources),
            overwrite=args.overwrite,
            inputs=inputs,
            option="--json",
        )
        lines.append(f"wrote {written}")
    if args.report is not None:
        from edgesynth.report.cli import validation_page

        page = validation_page(
            program,
            args.model,
            report_json(result, sources),
            args.report,
            overwrite=args.overwrite,
            inputs=inputs,
        )
        lines.append(f"wrote {page}")
    print("\n".join(lines))
    return 0


def _labels_source(args: argparse.Namespace, samples: Samples) -> str | None:
    if args.labels is not None:
        return str(args.labels)
    if samples.labels is None:
        return None
    return f"{samples.source} ({'y' if samples.classes is None else 'class folders'})"


def _reference(args: argparse.Namespace, model: Path | None, target: str) -> Reference | None:
    from edgesynth.validate.reference import reference_device, reference_for

    if model is None:
        return None
    return reference_for(model, args.checkpoint, args.sample_input, reference_device(target))


def _samples(args: argparse.Namespace, shape: tuple[int, ...]) -> Samples:
    from edgesynth.validate.samples import load_labels, load_samples

    samples = load_samples(args.data, shape, mean=args.mean, std=args.std)
    if args.labels is not None:
        samples.labels = load_labels(args.labels, len(samples.x))
    return samples.first(args.limit)


def _compiled_folder(args: argparse.Namespace) -> tuple[Program, Samples]:
    from edgesynth.targets.base import get_target, read_manifest

    manifest = read_manifest(args.model)
    target = get_target(manifest["target"])
    if args.target is not None and get_target(args.target).name != target.name:
        raise EdgesynthError(
            f"{args.model} was compiled for {target.name}, not {args.target}; drop --target "
            "or compile the model for it",
            key="--target",
        )
    for option in ("calibration", "option"):
        if getattr(args, option):
            raise EdgesynthError(
                f"a compiled folder is compiled already: --{option} applies to a model file",
                key=f"--{option}",
            )
    program = target.load(args.model, manifest)
    return program, _samples(args, tuple(program.inputs[0].shape))


def _from_model(
    args: argparse.Namespace, notes: list[str]
) -> tuple[Program, Samples, Reference | None]:
    from edgesynth.flow import compile_to, load_array, load_model
    from edgesynth.targets.base import get_target

    if args.target is None:
        raise EdgesynthError("name the target to validate on (-t NAME)", key="--target")
    target = get_target(args.target)
    options = parse_options(args.option)
    target.check_option_keys(options)
    graph = load_model(
        args.model,
        checkpoint=args.checkpoint,
        sample_input=args.sample_input,
        target=target.name,
    )
    reference = _reference(args, args.reference or args.model, target.name)
    samples = _samples(args, graph.tensors[graph.inputs[0]].shape)
    calibration = None
    if args.calibration is not None:
        calibration = load_array(args.calibration, "calibration data", "--calibration")
    elif not graph.is_integer:
        calibration = _calibration(samples, notes)
    program, _ = compile_to(graph, target.name, calibration=calibration, options=options)
    return program, samples, reference


def _calibration(samples: Samples, notes: list[str]) -> object:
    if samples.x.dtype.kind != "f":
        raise EdgesynthError(
            "a float model is quantized with float samples: --data holds integers; give float "
            "calibration data with --calibration",
            key="--calibration",
        )
    count = min(CALIBRATION_SAMPLES, len(samples.x))
    notes.append(
        f"quantized with the first {count} samples of --data (no --calibration given): "
        "the results may flatter the target"
    )
    return samples.x[:count]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `validate` to the `edgesynth` command line."""
    p = subparsers.add_parser(
        "validate",
        help="a target's bit-exact model against the float model, on your own samples",
        description="Run the float model (ONNX Runtime, or a vendor YAML's training model) and "
        "the target's bit-exact model on the same samples; print per output the top-1 "
        "agreement, the accuracy against --labels, RMSE, MAE, L2 relative error, cosine "
        "similarity, the error's mean and std (in the float model's units) and the "
        "confusion matrix. MODEL: a float .onnx, a vendor .yaml with --checkpoint, or a "
        "folder `edgesynth compile` wrote (with --reference for the float model).",
    )
    p.add_argument("model", type=Path, metavar="MODEL", help="model file or compiled folder")
    p.add_argument("--target", "-t", metavar="NAME", help="the accelerator (for a model file)")
    p.add_argument(
        "--data",
        "-d",
        type=Path,
        required=True,
        metavar="PATH",
        help="samples: .npy (N x input), .npz (x, y) or a folder of images",
    )
    p.add_argument("--labels", type=Path, metavar="NPY", help="one integer class per sample")
    p.add_argument("--limit", type=positive_int, metavar="N", help="use the first N samples")
    p.add_argument(
        "--reference",
        type=Path,
        metavar="MODEL",
        help="the float model to compare with (default: MODEL itself)",
    )
    p.add_argument("--checkpoint", type=Path, metavar="PTH", help="a vendor YAML's weights")
    p.add_argument("--sample-input", type=Path, metavar="NPY", help="a vendor YAML's sample")
    p.add_argument(
        "--calibration",
        "-c",
        type=Path,
        metavar="NPY",
        help="float inputs to quantize a float model with (default: the first "
        f"{CALIBRATION_SAMPLES} samples of --data)",
    )
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="a target option")
    p.add_argument("--mean", type=float, default=0.0, help="images: (pixel/255 - mean) / std")
    p.add_argument("--std", type=positive_float, default=1.0, help="images: see --mean")
    p.add_argument(
        "--per-layer",
        action="store_true",
        help="the metrics for every tensor the float model and the target share, and the "
        "first layer whose error jumps",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="write every number as JSON")
    p.add_argument(
        "--report",
        type=Path,
        metavar="HTML",
        help="also write the target's page (`edgesynth report`) with the metrics, the "
        "confusion matrix and, with --per-layer, the error per layer",
    )
    add_overwrite(p, "the --json and --report files")
    p.set_defaults(handler=validate_cmd)
