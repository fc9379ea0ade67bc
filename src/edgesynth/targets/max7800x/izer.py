"""`edgesynth izer`: the vendor's ai8xize.py command line, run by edgesynth."""

from __future__ import annotations

import sys
from pathlib import Path

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.outputs import save_npy_atomic
from edgesynth.sim.simulate import SimOptions
from edgesynth.targets.max7800x.build import BuildOptions
from edgesynth.targets.max7800x.izer_args import (
    IzerOptions,
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


def run_izer(argv: list[str]) -> SynthesisResult:
    opts = parse_izer_args(argv)
    problems = option_rule_errors(opts)
    if problems:
        raise problems[0] if len(problems) == 1 else MultipleErrors(problems)
    result = synthesize(job_from_options(opts))

    from edgesynth.targets.max7800x.codegen import ignored_options, write_project

    written = write_project(result, opts)
    if opts.verbose:
        from rich.console import Console

        from edgesynth.targets.max7800x.simulate_cmd import summary_table

        Console(width=None if sys.stdout.isatty() else 120).print(summary_table(result))
        if written is not None:
            from edgesynth.targets.max7800x.plan.report import render_table

            print(render_table(written.plan))
    ignored = ignored_options(opts)
    if ignored:
        print(
            "note: accepted, no effect on the embedded project: " + ", ".join(ignored),
            file=sys.stderr,
        )
    if written is not None:
        print(f"Project ({len(written.files)} files) -> {written.folder}")
    elif opts.result_numpy and opts.generate_kat:
        if not opts.prefix:
            raise EdgesynthError("--sample-numpy-filename needs --prefix (the output folder name).")
        folder = Path(opts.test_dir or ".") / opts.prefix
        saved = save_npy_atomic(folder / opts.result_numpy, result.output)
        print(f"Known-answer output ({'x'.join(map(str, result.output.shape))}) -> {saved}")
    return result
