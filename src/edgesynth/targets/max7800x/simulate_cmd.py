"""`edgesynth simulate`: the friendly front end to the bit-exact simulator."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from edgesynth.errors import EdgesynthError
from edgesynth.ir.network import Layer
from edgesynth.outputs import save_npy_atomic, staged_directory
from edgesynth.sim.simulate import SimOptions
from edgesynth.targets.max7800x.build import BuildOptions
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.pipeline import SynthesisJob, SynthesisResult, synthesize


def describe_operation(layer: Layer) -> str:
    parts = []
    if layer.operands > 1 and not layer.pool_first:
        parts.append(f"{layer.eltwise}x{layer.operands}")
    if layer.pool_type:
        parts.append(
            f"{layer.pool_type}pool {layer.pool[0]}x{layer.pool[1]}/{layer.pool_stride[0]}"
        )
    elif layer.pool_stride != (1, 1):
        parts.append(f"subsample /{layer.pool_stride[0]}")
    if layer.operands > 1 and layer.pool_first:
        parts.append(f"{layer.eltwise}x{layer.operands}")
    if layer.flatten:
        parts.append("flatten")
    if layer.operation != "none":
        k = layer.kernel_size
        kernel = f"{k[0]}" if layer.is_1d else f"{k[0]}x{k[1]}"
        parts.append(f"{layer.operation} {kernel}" if layer.operation != "linear" else "linear")
    elif not parts:
        parts.append("passthrough")
    if layer.activation:
        parts.append(layer.activation)
    return ", ".join(parts)


def summary_table(result: SynthesisResult) -> Table:
    table = Table(title=f"{result.network.spec.path} on {result.network.device}")
    for column in ("#", "name", "input", "operation", "output", "bits", "shift", "min", "max"):
        table.add_column(column, justify="right" if column in ("#", "min", "max") else "left")
    for item in result.layers:
        layer = result.network.layers[item.index]
        in_shape = f"{layer.in_channels}x{layer.in_dim[0]}x{layer.in_dim[1]}"
        out = item.output
        table.add_row(
            str(layer.index),
            layer.spec.name or "",
            in_shape,
            describe_operation(layer),
            "x".join(str(d) for d in out.shape) + (" (32-bit)" if layer.output_width == 32 else ""),
            "bin" if layer.binary else str(layer.quantization) if layer.has_weights else "-",
            str(layer.output_shift) if layer.has_weights else "-",
            str(int(out.min())),
            str(int(out.max())),
        )
    return table


def project_folder(network: Path) -> Path:
    """Where the implicit `tests/...` files of a network live.

    The vendor resolves them against the working directory; the friendly command looks beside
    the YAML first (the vendor's `networks/` + `tests/` layout), then in the working directory.
    """
    for folder in (network.resolve().parent.parent, network.resolve().parent, Path.cwd()):
        if (folder / "tests").is_dir():
            return folder
    return Path.cwd()


def run_simulate(
    *,
    network: Path,
    checkpoint: Path | None,
    device: str,
    sample_input: Path | None,
    save: Path | None,
    output: Path | None,
    stop_after: int | None,
    avg_pool_rounding: bool,
) -> SynthesisResult:
    opts = BuildOptions(
        device=get_device(device),
        checkpoint=str(checkpoint.resolve()) if checkpoint else None,
        sample_input=str(sample_input.resolve()) if sample_input else None,
        stop_after=stop_after,
        base_dir=project_folder(network),
    )
    config = str(network.resolve())
    job = SynthesisJob(config, opts, SimOptions(avg_pool_rounding=avg_pool_rounding))
    result = synthesize(job)
    Console(width=None if sys.stdout.isatty() else 120).print(summary_table(result))
    if save is not None:
        if save.exists() and not save.is_dir():
            raise EdgesynthError(f"--save needs a folder, but {save} is a file.")
        with staged_directory(save) as folder:
            for item in result.layers:
                np.save(folder / f"layer{item.index:02d}.npy", item.output)
    if output is not None:
        save_npy_atomic(output, result.output)
    return result
