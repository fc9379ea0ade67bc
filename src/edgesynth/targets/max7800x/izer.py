"""`edgesynth izer`: the vendor's ai8xize.py command line, run by edgesynth."""

from __future__ import annotations

import sys
from pathlib import Path

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.outputs import output_folder
from edgesynth.sim.simulate import SimOptions
from edgesynth.targets.max7800x.build import BuildOptions
from edgesynth.targets.max7800x.izer_args import (
    IzerOptions,
    codegen_only_options_used,
    option_rule_errors,
    parse_izer_args,
)
from edgesynth.targets.max7800x.pipeline import SynthesisJob, SynthesisResult, synthesize


def job_from_options(opts: IzerOptions, base_dir: Path | None = None) -> SynthesisJob:
    build = BuildOptions(
        device=opts.device_spec,
        checkpoint=opts.checkpoint_file,
        sample_input=opts.sample_input,
        stop_after=opts.stop_after,
        start_layer=opts.start_layer or 0,
        no_bias=list(opts.no_bias or ()),
        output_width=opts.output_width,
        skip_checkpoint_layers=opts.skip_checkpoint_layers or 0,
        skip_yaml_layers=opts.skip_yaml_layers or 0,
        reshape_inputs=opts.reshape_inputs,
        input_offset=opts.input_offset,
        ignore_streaming=opts.ignore_streaming,
        streaming_layers=list(opts.streaming_layers or ()),
        base_dir=base_dir or Path("."),
        ignore_activation=opts.ignore_activation,
        ignore_bn=opts.ignore_bn,
        zero_sram=opts.zero_sram or opts.pretend_zero_sram,
        weight_input=opts.weight_input,
        bias_input=opts.bias_input,
        synthesize_input=opts.synthesize_input,
        synthesize_words=opts.synthesize_words,
        input_csv_format=opts.input_csv_format,
    )
    sim = SimOptions(
        avg_pool_rounding=opts.avg_pool_rounding,
        simple1b=opts.simple1b,
        reshape_inputs=opts.reshape_inputs,
        legacy_test=opts.legacy_test,
    )
    return SynthesisJob(opts.config_file, build, sim, rules=opts)


def refuse_until_codegen(opts: IzerOptions) -> None:
    """izer writes only the known-answer output today; a run that asks for nothing it can
    write is refused instead of exiting 0 with nothing written.

    Replaced by the C code generation (written on another branch), which makes izer write
    the C project in TEST_DIR/PREFIX like the vendor tool.
    """
    if not opts.result_numpy:
        raise EdgesynthError(
            "edgesynth izer currently writes only the known-answer output "
            "(TEST_DIR/PREFIX/NAME.npy, C code generation is not there yet); ask for it with "
            "--sample-numpy-filename NAME."
        )
    if not opts.generate_kat:
        raise EdgesynthError(
            "--no-kat turns the known-answer output off, and that output is all edgesynth izer "
            "writes today (C code generation is not there yet); drop --no-kat."
        )


def izer_inputs(opts: IzerOptions) -> list[Path | str | None]:
    """The files a run reads (relative to the working directory, as the vendor resolves
    them): the YAML, checkpoint, sample and synthetic weights, and the implicit `tests/`."""
    return [
        opts.config_file,
        opts.checkpoint_file,
        opts.sample_input,
        opts.weight_input,
        opts.bias_input,
        Path("tests"),
    ]


def run_izer(argv: list[str]) -> SynthesisResult:
    opts = parse_izer_args(argv)
    problems = option_rule_errors(opts)
    if problems:
        raise problems[0] if len(problems) == 1 else MultipleErrors(problems)
    refuse_until_codegen(opts)
    name = Path(opts.result_numpy)
    if name.is_absolute() or ".." in name.parts:
        raise EdgesynthError(
            f"`{opts.result_numpy}` must be a file name inside TEST_DIR/PREFIX.",
            key="--sample-numpy-filename",
        )
    # The vendor refuses an existing TEST_DIR/PREFIX unless --overwrite: checked before work.
    folder = output_folder(
        Path(opts.test_dir or ".") / opts.prefix,
        overwrite=opts.overwrite,
        inputs=izer_inputs(opts),
        option="--test-dir/--prefix",
        empty_ok=False,
    )
    result = synthesize(job_from_options(opts))

    if opts.verbose:
        from rich.console import Console

        from edgesynth.targets.max7800x.simulate_cmd import summary_table

        Console(width=None if sys.stdout.isatty() else 120).print(summary_table(result))
    ignored = codegen_only_options_used(opts)
    if ignored:
        print(
            "note: accepted, no effect until C code generation exists: " + ", ".join(ignored),
            file=sys.stderr,
        )
    with folder as out:
        written = out.write_npy(opts.result_numpy, result.output)
    print(f"Known-answer output ({'x'.join(map(str, result.output.shape))}) -> {written}")
    return result
