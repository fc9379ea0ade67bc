"""`edgesynth simulate`: the friendly front end to the bit-exact simulator."""

from __future__ import annotations

from pathlib import Path

from edgesynth.errors import EdgesynthError
from edgesynth.outputs import check_output_file, output_folder, save_npy_atomic
from edgesynth.targets.max7800x.commands.option_names import NATIVE
from edgesynth.targets.max7800x.commands.text_table import Justify, print_table
from edgesynth.targets.max7800x.description.assemble import BuildOptions
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.network_sim import SimOptions
from edgesynth.targets.max7800x.options import Max7800xOptions
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


SUMMARY_COLUMNS: tuple[tuple[str, Justify], ...] = tuple(
    (name, "right" if name in ("#", "min", "max") else "left")
    for name in ("#", "name", "input", "operation", "output", "bits", "shift", "min", "max")
)


def summary_rows(result: SynthesisResult) -> list[tuple[str, ...]]:
    """One row per layer of the summary table (`SUMMARY_COLUMNS`)."""
    rows = []
    for item in result.layers:
        layer = result.network.layers[item.index]
        in_shape = f"{layer.in_channels}x{layer.in_dim[0]}x{layer.in_dim[1]}"
        out = item.output
        rows.append(
            (
                str(layer.index),
                layer.spec.name or "",
                in_shape,
                describe_operation(layer),
                "x".join(str(d) for d in out.shape)
                + (" (32-bit)" if layer.output_width == 32 else ""),
                "bin" if layer.binary else str(layer.quantization) if layer.has_weights else "-",
                str(layer.output_shift) if layer.has_weights else "-",
                str(int(out.min())),
                str(int(out.max())),
            )
        )
    return rows


def print_summary(result: SynthesisResult) -> None:
    """The per-layer summary table: shapes, operation, bits, shift and output range."""
    title = f"{result.network.spec.path} on {result.network.device}"
    print_table(title, SUMMARY_COLUMNS, summary_rows(result))


def _as_given(path: Path, base: Path) -> str:
    """`path` as the user wrote it where it means the same file from `base` (the folder the
    synthesizer resolves names against), else its absolute path."""
    return str(path) if (base / path).resolve() == path.resolve() else str(path.resolve())


def project_folder(network: Path) -> Path:
    """Where the implicit `tests/...` files of a network live.

    The vendor resolves them against the working directory; the friendly command looks beside
    the YAML first (the vendor's `networks/` + `tests/` layout), then in the working directory.
    """
    for folder in (network.resolve().parent.parent, network.resolve().parent, Path.cwd()):
        if (folder / "tests").is_dir():
            return folder
    return Path.cwd()


def looks_like_checkpoint(path: Path) -> bool:
    """A PyTorch checkpoint by its first bytes (zip archive or legacy pickle), not its name."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return False
    return head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


def check_argument_order(network: Path, checkpoint: Path | None) -> None:
    """`simulate CHECKPOINT NETWORK` (swapped) is named as such, not as a YAML problem."""
    if network.is_file() and looks_like_checkpoint(network):
        hint = (
            f"; the arguments look swapped: `edgesynth simulate {checkpoint} {network}`"
            if checkpoint is not None and checkpoint.suffix.lower() in (".yaml", ".yml")
            else ""
        )
        raise EdgesynthError(
            "is a PyTorch checkpoint, but the first argument must be the YAML network "
            f"description (NETWORK, then CHECKPOINT){hint}.",
            file=str(network),
        )


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
    overwrite: bool = False,
) -> SynthesisResult:
    dev = get_device(device)
    check_argument_order(network, checkpoint)
    for path, name in ((checkpoint, "CHECKPOINT"), (sample_input, "--sample-input")):
        if path is not None and not path.exists():  # named as given, before paths resolve
            raise EdgesynthError("no such file", file=str(path), key=name)
    base = project_folder(network)
    inputs = [network, checkpoint, sample_input, base / "tests"]
    # The output rules are checked before the simulation, not after it.
    layers_folder = (
        output_folder(save, overwrite=overwrite, inputs=inputs, option="--save")
        if save is not None
        else None
    )
    if output is not None:
        check_output_file(output, overwrite=overwrite, inputs=inputs, option="--output")
    opts = BuildOptions(
        device=dev,
        checkpoint=_as_given(checkpoint, base) if checkpoint else None,
        sample_input=_as_given(sample_input, base) if sample_input else None,
        stop_after=stop_after,
        base_dir=base,
        names=NATIVE,
    )
    job = SynthesisJob(
        str(network.resolve()),
        Max7800xOptions(build=opts, sim=SimOptions(avg_pool_rounding=avg_pool_rounding)),
        shown_as=str(network),
    )
    result = synthesize(job)
    print_summary(result)
    if layers_folder is not None:
        with layers_folder as folder:
            for item in result.layers:
                folder.write_npy(f"layer{item.index:02d}.npy", item.output)
        print(f"Layer outputs ({len(result.layers)}) -> {layers_folder.path}")
    if output is not None:
        written = save_npy_atomic(
            output, result.output, overwrite=overwrite, inputs=inputs, option="--output"
        )
        print(f"Network output -> {written}")
    return result
