"""Training-side commands: `train`, `quantize`, `fuse-bn`, `evaluate`.

`register(app)` mounts them on the main `edgesynth` application; `app` holds them too, for
tests and for running this module on its own. Every user error raises EdgesynthError, which
the main entry point prints as one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Hardware-faithful training, quantization and evaluation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

Device = Annotated[str, typer.Option(help="MAX78000 or MAX78002")]


@app.callback()
def _group() -> None:
    """Hardware-faithful training, quantization and evaluation."""


def evaluate(
    checkpoint: Annotated[Path, typer.Option(help="checkpoint (.pth.tar)")],
    sample_input: Annotated[Path, typer.Option(help="sample .npy (C x H x W or C x L, int8)")],
    output: Annotated[Path | None, typer.Option(help="write the network output (.npy)")] = None,
    device: Device = "MAX78000",
    eight_bit: Annotated[
        bool, typer.Option("--8-bit", "-8", help="compute the chip's integers (8-bit mode)")
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="architecture (default: checkpoint arch)")
    ] = None,
    avg_pool_rounding: Annotated[bool, typer.Option(help="round average pooling")] = False,
) -> None:
    """Run one sample through the training-side model, as the synthesizer's known-answer test.

    The output is C x H x W like the corpus' expected_output.npy: int64 with --8-bit,
    float64 (training scale) without.
    """
    from edgesynth.ir.npyfile import load_sample
    from edgesynth.outputs import save_npy_atomic
    from edgesynth.quant.checkpoint import read_checkpoint
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.train.evaluate import model_for_checkpoint, run_sample
    from edgesynth.train.models import get_model_info

    dev = get_device(device).name
    sample = load_sample(sample_input)
    ck = read_checkpoint(checkpoint)
    net, name = model_for_checkpoint(
        ck, sample_shape=tuple(sample.shape), device=dev, model=model, source=str(checkpoint)
    )
    out = run_sample(
        net,
        sample,
        dims=get_model_info(name).dims,
        eight_bit=eight_bit,
        device=dev,
        avg_pool_rounding=avg_pool_rounding,
    )
    flat = out.reshape(out.shape[0], -1)
    mode = "8-bit" if eight_bit else "float"
    typer.echo(f"{name} on {dev} ({mode}): output {'x'.join(map(str, out.shape))}")
    if flat.shape[1] == 1:
        typer.echo(f"  values: {flat[:, 0].tolist()}  (class {int(flat[:, 0].argmax())})")
    if output is not None:
        written = save_npy_atomic(output, out)
        typer.echo(f"  written: {written}")


COMMANDS = {"evaluate": evaluate}
for _name, _fn in COMMANDS.items():
    app.command(_name)(_fn)


def register(main_app: typer.Typer) -> None:
    """Mount the training commands on the main `edgesynth` application."""
    for name, fn in COMMANDS.items():
        main_app.command(name)(fn)
