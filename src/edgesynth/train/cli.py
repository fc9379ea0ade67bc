"""Training-side commands: `train`, `quantize`, `fuse-bn`, `evaluate`.

`register(app)` mounts them on the main `edgesynth` application; `app` holds them too, for
tests and for running this module on its own. Every user error raises EdgesynthError, which
the main entry point prints as one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgesynth.train import defaults

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
    device: Device = defaults.DEVICE,
    eight_bit: Annotated[
        bool, typer.Option("--8-bit", "-8", help="compute the chip's integers (8-bit mode)")
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="architecture (default: checkpoint arch)")
    ] = None,
    avg_pool_rounding: Annotated[bool, typer.Option(help="round average pooling")] = False,
    network: Annotated[
        Path | None,
        typer.Option(help="build the model from this YAML description instead of `arch`"),
    ] = None,
) -> None:
    """Run one sample through the training-side model, as the synthesizer's known-answer test.

    The output is C x H x W like the corpus' expected_output.npy: int64 with --8-bit,
    float64 (training scale) without.
    """
    from edgesynth.ir.npyfile import load_sample
    from edgesynth.outputs import save_npy_atomic
    from edgesynth.quant.checkpoint import read_checkpoint
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.train.evaluate import model_for_checkpoint, model_for_network, run_sample
    from edgesynth.train.models import get_model_info

    dev = get_device(device).name
    sample = load_sample(sample_input)
    if network is not None:
        net = model_for_network(network, checkpoint, sample_input, dev)
        name, dims = str(network), sample.ndim - 1
    else:
        ck = read_checkpoint(checkpoint)
        net, name = model_for_checkpoint(
            ck, sample_shape=tuple(sample.shape), device=dev, model=model, source=str(checkpoint)
        )
        dims = get_model_info(name).dims
    out = run_sample(
        net,
        sample,
        dims=dims,
        eight_bit=eight_bit,
        device=dev,
        avg_pool_rounding=avg_pool_rounding,
    )
    flat = out.reshape(out.shape[0], -1)
    mode = "8-bit" if eight_bit else "float"
    typer.echo(f"{name} on {dev} ({mode}): output {'x'.join(map(str, out.shape))}")
    if flat.shape[1] == 1:
        values = flat[:, 0].tolist()
        shown = str(values) if len(values) <= 32 else f"{str(values[:16])[:-1]}, ...]"
        typer.echo(f"  values: {shown}  (class {int(flat[:, 0].argmax())})")
    if output is not None:
        written = save_npy_atomic(output, out)
        typer.echo(f"  written: {written}")


def train(
    model: Annotated[str | None, typer.Option(help="architecture (default: the dataset's)")] = None,
    dataset: Annotated[str, typer.Option(help="digits | mnist | mnist-test-split | synthetic")] = (
        "digits"
    ),
    data: Annotated[Path | None, typer.Option(help="dataset folder (MNIST: the IDX files)")] = None,
    device: Device = defaults.DEVICE,
    epochs: Annotated[int, typer.Option(help="epochs to train")] = defaults.EPOCHS,
    batch_size: Annotated[
        int, typer.Option("--batch-size", "-b", help="mini-batch size")
    ] = defaults.BATCH_SIZE,
    lr: Annotated[
        float, typer.Option("--lr", help="initial learning rate (cosine decay)")
    ] = defaults.LEARNING_RATE,
    optimizer: Annotated[str, typer.Option(help="adam or sgd")] = defaults.OPTIMIZER,
    weight_decay: Annotated[float, typer.Option(help="weight decay")] = defaults.WEIGHT_DECAY,
    qat_policy: Annotated[
        str | None,
        typer.Option(help="QAT policy YAML, or None to disable (default: QAT for the last 40%)"),
    ] = None,
    out_dir: Annotated[Path, typer.Option(help="folder for run folders")] = Path("logs"),
    name: Annotated[str | None, typer.Option(help="run folder name (default: date-time)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue from this checkpoint")] = None,
    deterministic: Annotated[bool, typer.Option(help="seed everything, deterministic ops")] = (
        False
    ),
    seed: Annotated[int | None, typer.Option(help="random seed")] = None,
    evaluate_only: Annotated[
        bool, typer.Option("--evaluate", "-e", help="only evaluate --checkpoint on the test set")
    ] = False,
    checkpoint: Annotated[Path | None, typer.Option(help="checkpoint for --evaluate")] = None,
    eight_bit: Annotated[
        bool, typer.Option("--8-bit", "-8", help="--evaluate in 8-bit mode (chip integers)")
    ] = False,
    save_sample: Annotated[
        int | None, typer.Option(help="write test item N as sample_<dataset>.npy")
    ] = None,
    yaml_template: Annotated[
        Path | None, typer.Option(help="write the YAML network description here")
    ] = None,
    simulate: Annotated[
        int, typer.Option(help="after QAT, run N test images through the simulator")
    ] = 0,
    tensorboard: Annotated[bool, typer.Option(help="log to TensorBoard in the run folder")] = (
        False
    ),
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
    augment: Annotated[
        bool | None, typer.Option(help="random shifts/rotations (default: per dataset)")
    ] = None,
    avg_pool_rounding: Annotated[bool, typer.Option(help="round average pooling")] = False,
    use_bias: Annotated[
        bool | None, typer.Option(help="give the model's convolutions a bias")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads for torch")] = None,
    train_limit: Annotated[
        int | None, typer.Option(help="train on the first N items only (quick experiments)")
    ] = None,
) -> None:
    """Train a model with hardware-faithful layers; QAT, quantization and checks follow."""
    from edgesynth.train.command import TrainArgs, train_main

    train_main(
        TrainArgs(
            model=model,
            dataset=dataset,
            data=data,
            device=device,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            optimizer=optimizer,
            weight_decay=weight_decay,
            qat_policy=qat_policy,
            out_dir=out_dir,
            name=name,
            resume=resume,
            deterministic=deterministic,
            seed=seed,
            evaluate=evaluate_only,
            checkpoint=checkpoint,
            eight_bit=eight_bit,
            save_sample=save_sample,
            yaml_template=yaml_template,
            simulate=simulate,
            tensorboard=tensorboard,
            progress=progress,
            augment=augment,
            avg_pool_rounding=avg_pool_rounding,
            use_bias=use_bias,
            threads=threads,
            train_limit=train_limit,
        ),
        log=typer.echo,
    )


def quantize(
    input: Annotated[Path, typer.Argument(help="trained checkpoint (.pth.tar)")],
    output: Annotated[Path, typer.Argument(help="quantized checkpoint to write")],
    device: Device = defaults.DEVICE,
    clip_method: Annotated[
        str | None,
        typer.Option(
            help="SCALE, MAX, AVGMAX, AVG or STDDEV (default: QAT layers as trained, "
            "float layers SCALE)"
        ),
    ] = None,
    scale: Annotated[float | None, typer.Option(help="factor for SCALE (default 0.85)")] = None,
    stddev: Annotated[float | None, typer.Option(help="deviations for STDDEV (default 2)")] = None,
    weight_bits: Annotated[
        int | None, typer.Option(help="weight bits for layers that do not say (default 8)")
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option("--config-file", "-c", help="network YAML whose `quantization` wins"),
    ] = None,
) -> None:
    """Quantize a checkpoint for the chip (QAT as trained, or post-training clipping)."""
    from edgesynth.quant.files import quantize_file, yaml_layer_bits
    from edgesynth.quant.ptq import DEFAULT_SCALE, DEFAULT_STDDEV, QuantizeOptions
    from edgesynth.targets.max7800x.device import get_device

    dev = get_device(device)
    method = clip_method.upper() if clip_method else None
    opts = QuantizeOptions(
        clip_method=method,
        scale=DEFAULT_SCALE if scale is None else scale,
        stddev=DEFAULT_STDDEV if stddev is None else stddev,
        weight_bits=weight_bits,
        layer_bits=yaml_layer_bits(config_file) if config_file else None,
        allowed_bits=dev.weight_bits,
    )
    if scale is not None and method != "SCALE":
        typer.echo("note: --scale only applies to --clip-method SCALE")
    reports = quantize_file(input, output, opts)
    for r in reports:
        clipped = f", {r.clipped}/{r.total} weights clipped" if r.clipped else ""
        typer.echo(
            f"  {r.name}: {r.method}, {r.weight_bits}-bit, output_shift {r.output_shift}{clipped}"
        )
    typer.echo(f"Quantized {len(reports)} layers for {dev.name}: {output}")


def fuse_bn(
    input: Annotated[Path, typer.Argument(help="checkpoint with batchnorm layers")],
    output: Annotated[Path, typer.Argument(help="checkpoint to write, batchnorm folded")],
    out_arch: Annotated[
        str | None, typer.Option("--out-arch", help="arch name to record (default: same)")
    ] = None,
) -> None:
    """Fold batchnorm into the preceding convolutions of a (non-QAT) checkpoint."""
    from edgesynth.quant.files import fuse_file

    count = fuse_file(input, output, out_arch)
    typer.echo(f"Folded {count} batchnorm layers: {output}")


COMMANDS = {"train": train, "quantize": quantize, "fuse-bn": fuse_bn, "evaluate": evaluate}
for _name, _fn in COMMANDS.items():
    app.command(_name)(_fn)


def register(main_app: typer.Typer) -> None:
    """Mount the training commands on the main `edgesynth` application."""
    for name, fn in COMMANDS.items():
        main_app.command(name)(fn)
