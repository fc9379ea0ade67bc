"""`edgesynth izer`: the vendor's ai8xize.py command line, run by edgesynth."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.outputs import output_folder
from edgesynth.targets.max7800x.build_options import BuildOptions
from edgesynth.targets.max7800x.commands.izer_args import (
    IzerOptions,
    option_rule_errors,
    parse_izer_args,
)
from edgesynth.targets.max7800x.commands.option_names import VENDOR, OptionNames
from edgesynth.targets.max7800x.network_sim import SimOptions
from edgesynth.targets.max7800x.options import Max7800xOptions, PlanOptions, ProjectOptions
from edgesynth.targets.max7800x.pipeline import SynthesisJob, SynthesisResult, synthesize
from edgesynth.targets.max7800x.plan.plan import Plan
from edgesynth.targets.max7800x.rules.options import RuleOptions
from edgesynth.targets.max7800x.rules.text import layer_name


def core_options(
    opts: IzerOptions, base_dir: Path | None = None, names: OptionNames = VENDOR
) -> Max7800xOptions:
    """The vendor's command line, mapped once into what the core is told; `base_dir` is where
    relative file names resolve, `names` how messages spell the options."""
    return Max7800xOptions(
        build=_build_options(opts, base_dir or Path("."), names),
        sim=SimOptions(
            avg_pool_rounding=opts.avg_pool_rounding,
            simple1b=opts.simple1b,
            reshape_inputs=opts.reshape_inputs,
            legacy_test=opts.legacy_test,
        ),
        rules=_rule_options(opts),
        plan=_plan_options(opts),
        project=_project_options(opts),
        write_for_write=opts.write_for_write,
    )


def _build_options(opts: IzerOptions, base_dir: Path, names: OptionNames) -> BuildOptions:
    return BuildOptions(
        device=opts.device_spec,
        checkpoint=opts.checkpoint_file,
        sample_input=opts.sample_input,
        stop_after=opts.stop_after,
        start_layer=opts.start_layer,
        no_bias=list(opts.no_bias),
        output_width=opts.output_width,
        skip_checkpoint_layers=opts.skip_checkpoint_layers,
        skip_yaml_layers=opts.skip_yaml_layers,
        reshape_inputs=opts.reshape_inputs,
        input_offset=opts.input_offset,
        ignore_streaming=opts.ignore_streaming,
        streaming_layers=list(opts.streaming_layers or ()),
        base_dir=base_dir,
        ignore_activation=opts.ignore_activation,
        ignore_bn=opts.ignore_bn,
        test_bist=opts.test_bist and (opts.zero_sram or opts.pretend_zero_sram),
        weight_input=opts.weight_input,
        bias_input=opts.bias_input,
        synthesize_input=opts.synthesize_input,
        synthesize_words=opts.synthesize_words,
        input_csv_format=opts.input_csv_format,
        names=names,
    )


def _rule_options(opts: IzerOptions) -> RuleOptions:
    return RuleOptions(
        fifo=opts.fifo,
        fast_fifo=opts.fast_fifo,
        fast_fifo_quad=opts.fast_fifo_quad,
        start_layer=opts.start_layer,
        avg_pool_rounding=opts.avg_pool_rounding,
        simple1b=opts.simple1b,
        calcx4=opts.calcx4,
        rd_ahead=opts.rd_ahead,
        link_layer=opts.link_layer,
        fifo_go=opts.fifo_go,
        one_shot=opts.one_shot,
        pipeline=opts.pipeline,
        pll=opts.pll,
        riscv=opts.riscv,
        deepsleep=opts.deepsleep,
        allow_streaming=opts.allow_streaming,
        max_proc=opts.max_proc,
        repeat_layers=opts.repeat_layers,
        ignore_bias_groups=opts.ignore_bias_groups,
        overwrite_ok=opts.overwrite_ok,
        no_error_stop=opts.no_error_stop,
        ignore_hw_limits=opts.ignore_hw_limits,
        increase_start=opts.increase_start,
        increase_delta1=opts.increase_delta1,
        increase_delta2=opts.increase_delta2,
        override_start=opts.override_start,
        override_rollover=opts.override_rollover,
        override_delta1=opts.override_delta1,
        override_delta2=opts.override_delta2,
    )


def _plan_options(opts: IzerOptions) -> PlanOptions:
    return PlanOptions(
        weight_start=opts.weight_start,
        legacy_kernels=opts.legacy_kernels,
        no_deduplicate_weights=opts.no_deduplicate_weights,
        mexpress=opts.mexpress,
        zero_sram=opts.zero_sram,
        write_zero_registers=opts.write_zero_registers,
        init_tram=opts.init_tram,
        powerdown=opts.powerdown,
        ext_rdy=opts.ext_rdy,
        snoop_loop=opts.snoop_loop,
        ready_sel=opts.ready_sel,
        ready_sel_fifo=opts.ready_sel_fifo,
        ready_sel_aon=opts.ready_sel_aon,
        debug_new_streaming=opts.debug_new_streaming,
        max_count=opts.max_count,
    )


def _project_options(opts: IzerOptions) -> ProjectOptions:
    return ProjectOptions(
        config_file=opts.config_file,
        c_filename=opts.c_filename,
        api_filename=opts.api_filename,
        weight_filename=opts.weight_filename,
        sample_filename=opts.sample_filename,
        result_filename=opts.result_filename,
        log=opts.log,
        log_filename=opts.log_filename,
        board_name=opts.board_name,
        define=opts.define,
        balance_speed=opts.balance_speed,
        clock_divider=opts.clock_divider,
        clock_trim=opts.clock_trim,
        enable_delay=opts.enable_delay,
        boost=opts.boost,
        wfi=opts.wfi,
        riscv_flash=opts.riscv_flash,
        riscv_cache=opts.riscv_cache,
        riscv_debug=opts.riscv_debug,
        riscv_exclusive=opts.riscv_exclusive,
        softmax=opts.softmax,
        unload=opts.unload,
        generate_kat=opts.generate_kat,
        timer=opts.timer,
        energy=opts.energy,
        fifo_wait=opts.fifo_wait,
        fixed_input=opts.fixed_input,
        forever=opts.forever,
        stop_start=opts.stop_start,
        mlator=opts.mlator,
        unroll_mlator=opts.unroll_mlator,
        new_kernel_loader=opts.new_kernel_loader,
        verify_writes=opts.verify_writes,
        verify_kernels=opts.verify_kernels,
        debugwait=opts.debugwait,
    )


def job_from_options(
    opts: IzerOptions, base_dir: Path | None = None, names: OptionNames = VENDOR
) -> SynthesisJob:
    """The synthesis `opts` asks for; a placement edgesynth chooses is proven on the device."""
    options = core_options(opts, base_dir, names)
    return SynthesisJob(opts.config_file, options, prove_placement=True)


def refuse_empty_run(opts: IzerOptions) -> None:
    """A run that would write nothing is refused instead of exiting 0 with nothing written.

    The vendor's RTL-simulation outputs (--rtl, --rtl-preload) are not generated; such a run
    writes only the known-answer output, so it must ask for it.
    """
    if opts.embedded_code:
        return
    if not opts.result_numpy or not opts.generate_kat:
        raise EdgesynthError(
            "RTL simulation files (--rtl/--rtl-preload) are not generated by edgesynth, so this "
            "run would write nothing; drop the RTL option to get the C project, or ask for the "
            "known-answer output with --sample-numpy-filename NAME (and without --no-kat)."
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


def plan_izer(argv: list[str]) -> tuple[SynthesisResult, Plan]:
    """What `edgesynth izer ARGV` synthesizes and the project it plans (every write the C
    makes), without writing anything; relative paths resolve against the working folder."""
    from edgesynth.targets.max7800x.plan.plan import make_plan

    job = job_from_options(parse_izer_args(argv))
    result = synthesize(job)
    return result, make_plan(result, job.options)


def prove(result: SynthesisResult, plan: Plan, device: str, verify: bool = True) -> None:
    """Run the project's writes on the virtual device before anything is written: print the
    proof's line, or raise ProofFailed (nothing is written). `--no-verify` skips it, warned."""
    from edgesynth.proof import unproven
    from edgesynth.targets.max7800x.proof import IZER_REMEDY, prove_project

    if not verify:
        executor = f"the virtual {device}"
        print(f"edgesynth: warning: {unproven('the project', executor)}", file=sys.stderr)
        return
    print(prove_project(result, plan, device, IZER_REMEDY).line)


@dataclass(frozen=True)
class ProjectRun:
    """How one run writes its project, beside what the core is told: the folder, the files it
    reads, how messages spell the options, and what it prints."""

    folder: Path  # the project folder (TEST_DIR/PREFIX, or -o)
    name: str  # the project's name, as its files cite it (PREFIX)
    inputs: list[Path | str | None]  # the files the run reads (never overwritten)
    names: OptionNames
    overwrite: bool = False
    verbose: bool = False
    verify: bool = True  # prove the project on the virtual device first
    warn_zero: bool = True  # warn of layers whose output is all zero for the sample
    embedded_code: bool = True  # write the C project
    result_numpy: str | None = None  # also write the known answer as .npy (a name in folder)
    ignored: tuple[str, ...] = ()  # given options the generator does not act on


def with_vendor_options(
    options: Max7800xOptions, extra: list[str]
) -> tuple[Max7800xOptions, IzerOptions | None]:
    """`options` with the vendor options `extra` (`synth`/`plan --izer-option`), and `extra`
    as the vendor reads it (None: none given): its option-only refusals are raised and its
    remarks printed, and every field it changes from the vendor's defaults replaces the one in
    `options` (what it asks of the run: `vendor_run`)."""
    if not extra:
        return options, None
    required = ["--device", options.device.name, "--config-file", options.project.config_file]
    required += ["--test-dir", ".", "--prefix", "p"]
    given = parse_izer_args(required + list(extra))
    # the vendor's option-only refusals, with what the native options turned on
    native = {"riscv": options.rules.riscv, "fifo": options.rules.fifo}
    native |= {"fast_fifo": options.rules.fast_fifo}
    checked = replace(given, **{key: getattr(given, key) or on for key, on in native.items()})
    if checked.timer is None:
        checked = replace(checked, timer=options.project.timer)
    problems = option_rule_errors(checked)
    if problems:
        raise problems[0] if len(problems) == 1 else MultipleErrors(problems)
    for remark in given.warnings:
        print(f"edgesynth: warning: {remark}", file=sys.stderr)
    base = options.build.base_dir
    changed = core_options(given, base, options.build.names)
    default = core_options(parse_izer_args(required), base, options.build.names)
    groups = {}
    for group in ("build", "sim", "rules", "plan", "project"):
        ours, theirs, vendor = (getattr(o, group) for o in (options, changed, default))
        update = {
            f.name: getattr(theirs, f.name)
            for f in fields(theirs)
            if getattr(theirs, f.name) != getattr(vendor, f.name)
        }
        groups[group] = replace(ours, **update)
    return replace(options, **groups), given  # type: ignore[arg-type]


def vendor_run(run: ProjectRun, vendor: IzerOptions) -> ProjectRun:
    """`run` with what the vendor options given ask of it (`--izer-option=--no-warn-zero`,
    `--sample-numpy-filename NAME`...), refused where it would write nothing."""
    from edgesynth.targets.max7800x.codegen import ignored_options

    refuse_empty_run(vendor)
    _check_result_numpy(vendor)
    return replace(
        run,
        overwrite=run.overwrite or vendor.overwrite,
        verbose=run.verbose or vendor.verbose,
        verify=run.verify and not vendor.no_verify,
        warn_zero=not vendor.no_warn_zero,
        embedded_code=vendor.embedded_code,
        result_numpy=vendor.result_numpy,
        ignored=tuple(ignored_options(vendor)),
    )


def _check_result_numpy(opts: IzerOptions) -> None:
    """`--sample-numpy-filename` names a file inside the project folder."""
    if opts.result_numpy:
        name = Path(opts.result_numpy)
        if name.is_absolute() or ".." in name.parts:
            raise EdgesynthError(
                f"`{opts.result_numpy}` must be a file name inside TEST_DIR/PREFIX.",
                key="--sample-numpy-filename",
            )


def write_project(options: Max7800xOptions, run: ProjectRun) -> SynthesisResult:
    """Synthesize the network `options` describe and write its project as `run` says (the
    output folder refused before any work where it exists without --overwrite)."""
    from edgesynth.targets.max7800x.codegen import project_files

    folder = output_folder(
        run.folder,
        overwrite=run.overwrite,
        inputs=run.inputs,
        option=run.names.output,
        empty_ok=False,
    )
    job = SynthesisJob(options.project.config_file, options, prove_placement=True)
    result = synthesize(job)
    if run.warn_zero:  # as the vendor's tool warns (unless --no-warn-zero)
        _warn_zero_layers(result)
    plan = None
    files: dict[str, str] = {}
    if run.embedded_code:
        plan, files = project_files(result, options, run.name)
    if run.verbose:
        _print_summary(result, plan)
    if run.ignored:
        print(
            "note: accepted, no effect on the embedded project: " + ", ".join(run.ignored),
            file=sys.stderr,
        )
    if plan is not None:
        prove(result, plan, options.device.name, run.verify)
    with folder as out:
        for filename, text in files.items():
            out.write_text(filename, text)
        known_answer = None
        if run.result_numpy and options.project.generate_kat:
            known_answer = out.write_npy(run.result_numpy, result.output)
    if files:
        print(f"Project ({len(files)} files) -> {folder.path}")
    if known_answer is not None:
        shape = "x".join(map(str, result.output.shape))
        print(f"Known-answer output ({shape}) -> {known_answer}")
    return result


def _warn_zero_layers(result: SynthesisResult) -> None:
    for layer in result.layers:
        if not layer.output.any():
            print(
                f"edgesynth: warning: layer {layer_name(result.network.layers[layer.index])}: "
                "all output values for the given sample input are zero; the known-answer "
                "test may not be meaningful.",
                file=sys.stderr,
            )


def _print_summary(result: SynthesisResult, plan: Plan | None) -> None:
    from rich.console import Console

    from edgesynth.targets.max7800x.commands.simulate_cmd import summary_table

    Console(width=None if sys.stdout.isatty() else 120).print(summary_table(result))
    if plan is not None:
        from edgesynth.targets.max7800x.plan.report import render_table

        print(render_table(plan))


def run_izer(
    argv: list[str], names: OptionNames = VENDOR, write_for_write: bool = True
) -> SynthesisResult:
    """Run the vendor command line `argv`; messages spell options as `names` says. `edgesynth
    izer` runs it write for write (the vendor's project, its firmware defects included);
    `write_for_write` false: edgesynth's own path. (`edgesynth synth` makes its options
    itself and calls `write_project`.)"""
    opts = replace(parse_izer_args(argv), write_for_write=write_for_write)
    problems = option_rule_errors(opts)
    if problems:
        raise problems[0] if len(problems) == 1 else MultipleErrors(problems)
    refuse_empty_run(opts)
    for remark in opts.warnings:  # the vendor's non-fatal remarks about the command line
        print(f"edgesynth: warning: {remark}", file=sys.stderr)
    _check_result_numpy(opts)
    from edgesynth.targets.max7800x.codegen import ignored_options

    # The vendor refuses an existing TEST_DIR/PREFIX unless --overwrite: checked before work.
    run = ProjectRun(
        folder=Path(opts.test_dir or ".") / opts.prefix,
        name=opts.prefix,
        inputs=izer_inputs(opts),
        names=names,
        overwrite=opts.overwrite,
        verbose=opts.verbose,
        verify=not opts.no_verify,
        warn_zero=not opts.no_warn_zero,
        embedded_code=opts.embedded_code,
        result_numpy=opts.result_numpy,
        ignored=tuple(ignored_options(opts)),
    )
    return write_project(core_options(opts, names=names), run)
