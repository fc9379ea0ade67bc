"""The synthesis front end for MAX7800x: files in, checked network and known-answer output out.

YAML + (checkpoint | synthetic weights) + sample -> Network -> device rules -> simulation.
File look-ups follow the vendor tool: relative paths and the implicit `tests/...` files resolve
against the working directory. `prepare` and `place_network` are the two halves of
`load_network` (build, then place what the description leaves out); the max7800x target calls
them apart, on a description it made in memory (`lower`, then `plan`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError, warn
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x import placement as placer
from edgesynth.targets.max7800x import rules
from edgesynth.targets.max7800x.description.assemble import (
    BuildOptions,
    WeightLayer,
    build_network,
    checkpoint_takers,
)
from edgesynth.targets.max7800x.description.checkpoint import Checkpoint, CheckpointLayer
from edgesynth.targets.max7800x.description.cpu_marks import refuse_marks
from edgesynth.targets.max7800x.description.network import Network
from edgesynth.targets.max7800x.description.spec import NetworkSpec
from edgesynth.targets.max7800x.description.yamlcfg import load_spec
from edgesynth.targets.max7800x.network_sim import (
    SimOptions,
    SynthesisResult,
    simulate,
)
from edgesynth.targets.max7800x.options import Max7800xOptions
from edgesynth.targets.max7800x.placement import Placement, needs_placement
from edgesynth.targets.max7800x.placement.buffers import with_buffer_keys


@dataclass
class SynthesisJob:
    """What to synthesize: the network description, the options, and how a placement is proven."""

    config_file: str
    options: Max7800xOptions
    prove_placement: bool = False  # prove a chosen placement's project on the virtual device
    placement: Placement | None = None  # set when edgesynth chose the placement
    shown_as: str | None = None  # the YAML's path as the user wrote it (default: config_file)

    @property
    def build(self) -> BuildOptions:
        return self.options.build

    @property
    def sim(self) -> SimOptions:
        return self.options.sim


def _resolve(base: Path, name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else base / path


def _vendor_weight_layers(
    checkpoint: Checkpoint, needed: int, opts: BuildOptions, path: Path
) -> list[CheckpointLayer]:
    """The checkpoint layers the vendor assigns, walking the state dict's weight keys in order.

    Unfolded BatchNorm weights count toward --skip-checkpoint-layers, are an error only when
    reached (not after the last layer the YAML needs), and are passed over with --ignore-bn.
    """
    layers = iter(checkpoint.layers)
    chosen: list[CheckpointLayer] = []
    skip = opts.skip_checkpoint_layers
    for key, tensor in checkpoint.state_dict.items():
        parts = key.rsplit(".", 2)
        if len(parts) < 2 or parts[-1] != "weight":
            continue
        batchnorm = np.ndim(tensor) <= 1 and len(parts) == 3 and parts[1] == "bn"
        layer = None if batchnorm else next(layers, None)
        if len(chosen) >= needed:
            continue
        if skip > 0:
            skip -= 1
            continue
        if batchnorm:
            if not opts.ignore_bn:
                raise EdgesynthError(
                    f"`{key}` holds 1-dimensional weights {list(np.shape(tensor))}: the "
                    "BatchNorm layers have not been folded into the convolutions (fold them, "
                    "or pass --ignore-bn to skip them)",
                    file=str(path),
                )
            continue
        if layer is not None:
            chosen.append(layer)
    return chosen


def _warn_unused_layers(
    spec: NetworkSpec, layers: list[CheckpointLayer], needed: int, path: Path
) -> None:
    """A YAML with fewer weight layers than the checkpoint: the network the chip runs is not
    the one that was trained (the vendor's tool, too, takes the first layers only)."""
    unused = [layer.name for layer in layers[needed:]]
    if not unused:
        return
    shown = ", ".join(unused[:4]) + (", ..." if len(unused) > 4 else "")
    left = f"the last {len(unused)} ({shown}) are" if len(unused) > 1 else f"{shown} is"
    warn(
        f"{path}: the checkpoint has {len(layers)} weight layers but {spec.path} uses "
        f"{needed}; {left} left out. Check that the YAML describes the whole trained network."
    )


def _checkpoint_weights(spec: NetworkSpec, path: Path, opts: BuildOptions) -> list[WeightLayer]:
    from edgesynth.targets.max7800x.description.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(path, ignore_bn=True, defer_float=True)
    if spec.arch and checkpoint.arch and checkpoint.arch.lower() != spec.arch.lower():
        raise EdgesynthError(
            f"the checkpoint {path} was trained for `{checkpoint.arch}`, but the network "
            f"description says `arch: {spec.arch}`; pass the matching checkpoint or YAML.",
            file=spec.path,
            line=spec.lines.get("arch"),
        )
    needed = checkpoint_takers(spec, opts)
    layers = _vendor_weight_layers(checkpoint, needed, opts, path)
    _warn_unused_layers(spec, checkpoint.layers[opts.skip_checkpoint_layers :], needed, path)
    return [
        WeightLayer(
            weight=layer.weight,
            bias=layer.bias,
            output_shift=layer.output_shift,
            source=f"{path}: {layer.name}",
            weight_bits=layer.weight_bits,
            problem=layer.problem,
        )
        for layer in layers
    ]


def _synthetic_weights(
    spec: NetworkSpec, base: Path, opts: BuildOptions
) -> tuple[list[np.ndarray], str]:
    from edgesynth.frontends.npy import load_npy_arrays

    if opts.weight_input:
        path = _resolve(base, opts.weight_input)
    else:
        name = spec.weights if spec.weights else f"weights_{(spec.dataset or '').lower()}"
        path = _resolve(base, str(Path("tests") / f"{name}.npy"))
    arrays = load_npy_arrays(path)
    if len(arrays) == 1:  # one array holding every layer along its first axis
        arrays = list(arrays[0])
    return arrays, str(path)


def _synthetic_bias(spec: NetworkSpec, base: Path, opts: BuildOptions) -> list[np.ndarray]:
    from edgesynth.frontends.npy import load_npy_arrays

    if opts.bias_input:
        return load_npy_arrays(_resolve(base, opts.bias_input))
    if not spec.bias:
        return []
    return load_npy_arrays(_resolve(base, str(Path("tests") / f"bias_{spec.bias}.npy")))


def synthesize_sample(sample: np.ndarray, increment: int, words: int, path: Path) -> np.ndarray:
    """--synthesize-input: every block of `words` pixels is the block before it plus
    `increment`, adding the pixel's channels as one little-endian word (channel 0 lowest)."""
    channels = sample.shape[0]
    if not 1 <= channels <= 4:
        raise EdgesynthError(
            f"--synthesize-input requires 1 to 4 input channels, the sample has {channels}.",
            file=str(path),
        )
    flat = sample.reshape(channels, -1)
    if words <= 0 or flat.shape[1] % words:
        raise EdgesynthError(
            f"--synthesize-words ({words}) must divide the number of pixels per channel "
            f"({flat.shape[1]}).",
            file=str(path),
        )
    mask = (1 << (8 * channels)) - 1
    shifts = 8 * np.arange(channels, dtype=np.int64)[:, None]
    first = ((flat[:, :words] & 0xFF) << shifts).sum(axis=0)  # packed words of block 0
    blocks = np.arange(flat.shape[1] // words, dtype=np.int64)[:, None]
    packed = ((first[None, :] + blocks * increment) & mask).reshape(-1)
    unsigned = (packed[None, :] >> shifts) & 0xFF
    return (unsigned - ((unsigned > 127) << 8)).reshape(sample.shape)


def apply_csv_format(sample: np.ndarray, csv_format: int, path: Path) -> np.ndarray:
    """--input-csv-format 555/565: the camera's dropped low bits, cleared in the sample."""
    if csv_format == 888:
        return sample
    if sample.shape[0] != 3:
        raise EdgesynthError(
            f"--input-csv-format {csv_format} needs a 3-channel (RGB) sample, this one has "
            f"{sample.shape[0]} channels.",
            file=str(path),
        )
    low_bits = np.array([7, 7, 7] if csv_format == 555 else [7, 3, 7], dtype=np.int64)
    return sample & ~low_bits.reshape((3,) + (1,) * (sample.ndim - 1))


def _stored_dtype(path: Path) -> np.dtype | None:
    """The element type recorded in a .npy file's header (None when it cannot be read)."""
    try:
        with open(path, "rb") as stream:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                header = np.lib.format.read_array_header_1_0(stream)
            else:
                header = np.lib.format.read_array_header_2_0(stream)
    except (OSError, ValueError):
        return None
    return header[2]


def _no_sample(spec: NetworkSpec, opts: BuildOptions, path: Path) -> EdgesynthError:
    """No sample was given and the default one is missing: say where it comes from."""
    option = opts.names.sample
    name = path.name
    found = Path(opts.checkpoint).parent / name if opts.checkpoint else None
    hint = (
        f"{found} lies beside the checkpoint: pass {option} {found}"
        if found is not None and found.is_file()
        else f"pass {option} FILE.npy; `edgesynth train --save-sample N` writes {name} into "
        "its run folder, beside the checkpoint"
    )
    return EdgesynthError(
        f"no sample input: without {option}, the sample is tests/{name} (named after the "
        f"YAML's `dataset: {spec.dataset}`), and there is no such file; {hint}",
        file=str(path),
    )


def load_sample(spec: NetworkSpec, opts: BuildOptions) -> tuple[np.ndarray, Path]:
    from edgesynth.frontends.npy import load_sample as read_sample

    if opts.sample_input:
        path = _resolve(opts.base_dir, opts.sample_input)
        if not path.exists():
            raise EdgesynthError("no such file", file=opts.sample_input, key=opts.names.sample)
    else:
        path = _resolve(opts.base_dir, f"tests/sample_{(spec.dataset or '').lower()}.npy")
        if not path.exists():
            raise _no_sample(spec, opts, path)
    sample = read_sample(path).astype(np.int64)
    stored = _stored_dtype(path)
    if stored is not None and stored.type is not np.int64:
        # The vendor tool refuses samples not saved as int64 (e.g. int8 or float arrays).
        raise EdgesynthError(
            f"the sample array is stored as {stored}, not int64; save it with "
            "`np.save(path, data.astype(np.int64))`.",
            file=str(path),
        )
    if opts.synthesize_input is not None:
        sample = synthesize_sample(sample, opts.synthesize_input, opts.synthesize_words, path)
    if sample.size and (sample.max() > 127 or sample.min() < -128):
        raise EdgesynthError(
            f"sample values must be signed 8-bit (-128..127), found {sample.min()}..{sample.max()}",
            file=str(path),
        )
    if sample.ndim not in (2, 3):
        raise EdgesynthError(
            f"a sample must be C x H x W (or C x L), got shape {tuple(sample.shape)}",
            file=str(path),
        )
    return apply_csv_format(sample, opts.input_csv_format, path), path


@dataclass
class Built:
    """A network as its description builds it, before placement (what `place_network` takes)."""

    network: Network
    spec: NetworkSpec  # the description, with the keys a data buffer fixes
    from_buffer: dict[int, list[str]]  # layer -> the keys a data buffer fixed
    sample: np.ndarray
    rebuild: Callable[[NetworkSpec], Network]  # the same build, of another spec


def prepare(
    spec: NetworkSpec,
    sample: np.ndarray,
    opts: BuildOptions,
    *,
    checkpoint_layers: list[WeightLayer] | None = None,
    synthetic_weights: tuple[list[np.ndarray], str] | None = None,
    synthetic_bias: list[np.ndarray] | None = None,
) -> Built:
    """Build `spec` with the weights of a checkpoint or synthetic ones (see `build_network`)."""

    def build(s: NetworkSpec) -> Network:
        return build_network(
            s,
            sample,
            opts,
            checkpoint_layers=checkpoint_layers,
            synthetic_weights=synthetic_weights,
            synthetic_bias=synthetic_bias,
        )

    # the keys a data buffer fixes, before the vendor's rules ask the buffer layers for them
    spec, from_buffer = with_buffer_keys(spec)
    return Built(build(spec), spec, from_buffer, sample, build)


def place_network(
    built: Built, options: Max7800xOptions, *, prove: bool = False
) -> tuple[Network, Placement | None]:
    """The built network with the placement edgesynth chooses where the description leaves
    one out, and that placement (None: the description places every executed layer). With
    `prove`, each candidate placement's project runs on the virtual device first."""
    if not needs_placement(built.spec, built.network.order):
        return built.network, None
    sample = built.sample
    net, placement = placer.place(
        built.network,
        options.build.device,
        options.rules,
        built.rebuild,
        _device_proof(options, sample) if prove else None,
        lambda n: {r.index: r.output for r in simulate(n, sample, options.sim)},
        write_for_write=options.write_for_write,
    )
    for index, keys in built.from_buffer.items():  # chosen too: the user gave none of them
        chosen = placement.chosen.setdefault(index, [])
        chosen[:0] = [k for k in keys if k not in chosen]
    return net, placement


def read_network(job: SynthesisJob) -> Built:
    """The hardware layers the description gives, built from its weights (a checkpoint or
    synthetic ones) and sample, before any placement: the arithmetic only."""
    opts = job.build
    spec = load_spec(_resolve(opts.base_dir, job.config_file))
    spec.path = job.shown_as or job.config_file
    if not opts.cpu_layers:  # edgesynth's own `cpu: true`: `synth` alone reads it
        command = "`edgesynth izer`" if job.options.write_for_write else "this command"
        refuse_marks(spec, command)
    rules.check_spec(spec, opts.device)  # layer count and offsets: the vendor checks them first
    trained = (spec.arch or "").lower() != "test"
    if trained and not opts.checkpoint:
        raise EdgesynthError(
            f"`arch: {spec.arch}` needs trained weights: pass the checkpoint with "
            f"{opts.names.checkpoint} (or use `arch: test` with synthetic weights in tests/).",
            file=spec.path,
            line=spec.lines.get("arch"),
        )
    sample, _ = load_sample(spec, opts)
    if trained:
        weights = _checkpoint_weights(spec, _resolve(opts.base_dir, opts.checkpoint), opts)
        return prepare(spec, sample, opts, checkpoint_layers=weights)
    synthetic = _synthetic_weights(spec, opts.base_dir, opts)
    bias = _synthetic_bias(spec, opts.base_dir, opts)
    return prepare(spec, sample, opts, synthetic_weights=synthetic, synthetic_bias=bias)


def load_network(job: SynthesisJob) -> tuple[Network, np.ndarray]:
    """The description's network, placed (automatically where it leaves placement out)."""
    built = read_network(job)
    net, placement = place_network(built, job.options, prove=job.prove_placement)
    if placement is not None:
        job.placement = placement
    return net, built.sample


def _device_proof(options: Max7800xOptions, sample: np.ndarray) -> Callable[[Network], str | None]:
    """Proof of a placed network: its project's writes on the virtual device (the one place
    the synthesizer uses the device, as a checker; see placement/verify.py)."""

    def prove(placed: Network) -> str | None:
        from edgesynth.targets.max7800x.placement.verify import device_check
        from edgesynth.targets.max7800x.plan.plan import make_plan

        result = SynthesisResult(placed, sample, simulate(placed, sample, options.sim))
        check = device_check(make_plan(result, options), placed.device)
        if check.ok:
            return None
        return "; ".join(check.hazards) or "the known answer differs"

    return prove


def check_network(net: Network, job: SynthesisJob) -> None:
    rules.check_network(net, job.build.device, job.options.rules)


def synthesize(job: SynthesisJob) -> SynthesisResult:
    net, sample = load_network(job)
    check_network(net, job)
    return SynthesisResult(net, sample, simulate(net, sample, job.sim))
