"""The `edgesynth` command line: one entry point, one sub-command per job."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from edgesynth.errors import EdgesynthError

app = typer.Typer(
    name="edgesynth",
    help="Take a CNN from PyTorch to ultra-low-power accelerators, bit-exact.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def izer(ctx: typer.Context) -> None:
    """Run with the vendor's ai8xize.py command line, unchanged (try `edgesynth izer --help`)."""
    from edgesynth.targets.max7800x.izer import run_izer

    run_izer(list(ctx.args))


@app.command()
def simulate(
    network: Annotated[Path, typer.Argument(help="YAML network description")],
    checkpoint: Annotated[
        Path | None, typer.Argument(help="quantized checkpoint (omit for `arch: test`)")
    ] = None,
    device: Annotated[str, typer.Option(help="MAX78000 or MAX78002")] = "MAX78000",
    sample_input: Annotated[
        Path | None, typer.Option(help="sample .npy (default: tests/sample_<dataset>.npy)")
    ] = None,
    save: Annotated[
        Path | None, typer.Option(help="folder to save every layer's output as layerNN.npy")
    ] = None,
    output: Annotated[
        Path | None, typer.Option(help="save the network output (int64 .npy)")
    ] = None,
    stop_after: Annotated[int | None, typer.Option(help="stop after this layer")] = None,
    avg_pool_rounding: Annotated[bool, typer.Option(help="round average pooling")] = False,
) -> None:
    """Simulate a network bit-exactly and print a per-layer summary."""
    from edgesynth.targets.max7800x.simulate_cmd import run_simulate

    run_simulate(
        network=network,
        checkpoint=checkpoint,
        device=device,
        sample_input=sample_input,
        save=save,
        output=output,
        stop_after=stop_after,
        avg_pool_rounding=avg_pool_rounding,
    )


@app.command()
def synth(
    network: Annotated[Path, typer.Argument(help="YAML network description")],
    checkpoint: Annotated[
        Path | None, typer.Argument(help="quantized checkpoint (omit for `arch: test`)")
    ] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="project folder to write")] = Path(
        "out/project"
    ),
    device: Annotated[str, typer.Option(help="MAX78000 or MAX78002")] = "MAX78000",
    sample_input: Annotated[
        Path | None, typer.Option(help="sample .npy (default: tests/sample_<dataset>.npy)")
    ] = None,
    softmax: Annotated[bool, typer.Option(help="add the software softmax")] = False,
    fifo: Annotated[bool, typer.Option(help="feed the input through the FIFOs")] = False,
    fast_fifo: Annotated[bool, typer.Option(help="feed the input through the fast FIFO")] = False,
    riscv: Annotated[bool, typer.Option(help="run the network from the RISC-V core")] = False,
    timer: Annotated[int | None, typer.Option(help="time the inference with this timer")] = None,
    known_answer: Annotated[bool, typer.Option(help="generate the known-answer check")] = True,
    unload: Annotated[bool, typer.Option(help="generate cnn_unload()")] = True,
    boost: Annotated[str | None, typer.Option(help="boost circuit port.pin, e.g. 2.5")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace an existing project")] = False,
    verbose: Annotated[bool, typer.Option(help="print the plan")] = False,
    izer_option: Annotated[
        list[str] | None, typer.Option(help="any other vendor option, e.g. --izer-option=--mlator")
    ] = None,
) -> None:
    """Write the MAX78000/MAX78002 C project for a network (native option names)."""
    from edgesynth.targets.max7800x.synth_cmd import SynthOptions, run_synth

    run_synth(
        SynthOptions(
            network=network,
            checkpoint=checkpoint,
            out=out,
            device=device,
            sample_input=sample_input,
            softmax=softmax,
            fifo=fifo,
            fast_fifo=fast_fifo,
            riscv=riscv,
            timer=timer,
            known_answer=known_answer,
            unload=unload,
            boost=boost,
            overwrite=overwrite,
            verbose=verbose,
            izer_options=list(izer_option or []),
        )
    )


@app.command()
def build(
    project: Annotated[Path, typer.Argument(help="a generated project folder")],
    device: Annotated[
        str | None, typer.Option(help="MAX78000 or MAX78002 (default: the project's)")
    ] = None,
    riscv: Annotated[
        bool | None, typer.Option(help="build the RISC-V program too (default: if present)")
    ] = None,
) -> None:
    """Compile a generated project for the chip (Debian cross compilers) and print its size."""
    from edgesynth.targets.max7800x.synth_cmd import run_build

    run_build(project, device=device, riscv=riscv)


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="folder for the demo's files")] = Path("out/demo"),
    device: Annotated[str, typer.Option(help="MAX78000 or MAX78002")] = "MAX78000",
    synthetic: Annotated[
        bool, typer.Option(help="synthesize examples/demo with generated weights instead")
    ] = False,
) -> None:
    """Train, quantize, synthesize and prove the built-in example end to end."""
    from edgesynth.demo import run_synthetic_demo, run_trained_demo

    if synthetic:
        written = run_synthetic_demo(out, device)
    else:
        _mount_optional_apps()
        written = run_trained_demo(out, device)
    typer.echo(f"Demo finished: known-answer output in {written}")


TRAINING_COMMANDS = ("train", "quantize", "fuse-bn", "evaluate")
_mounted = False


def _mount_optional_apps() -> None:
    """Sub-applications owned by the targets and the training package (mounted once)."""
    global _mounted
    if _mounted:
        return
    _mounted = True
    try:
        from edgesynth.targets.gati.cli import app as gati_app

        app.add_typer(gati_app, name="gati", help="Gati FPGA systolic-array target.")
    except ImportError:
        pass
    try:
        from edgesynth.train.cli import register

        register(app)
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors print one message and exit 1, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args and args[0] == "izer":
            # The vendor's command line goes straight to its parser: no typer, no torch.
            from edgesynth.targets.max7800x.izer import run_izer

            run_izer(args[1:])
            return 0
        if not args or args[0] in ("gati", *TRAINING_COMMANDS) or args[0].startswith("-"):
            _mount_optional_apps()
        app(args=args, prog_name="edgesynth", standalone_mode=False)
    except EdgesynthError as err:
        print(f"edgesynth: error: {err.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("edgesynth: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 1
    except Exception as err:  # click usage errors carry their own message
        import click

        if isinstance(err, click.ClickException):
            err.show()
            return 1 if err.exit_code == 2 else err.exit_code
        if isinstance(err, click.exceptions.Abort):
            return 1
        if os.environ.get("EDGESYNTH_DEBUG"):
            raise
        print(
            f"edgesynth: internal error: {type(err).__name__}: {err}\n"
            "This is a bug in edgesynth; rerun with EDGESYNTH_DEBUG=1 for details and report it.",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
