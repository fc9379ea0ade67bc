"""The synthesis front end for MAX7800x: files in, checked network and known-answer output out.

YAML + (checkpoint | synthetic weights) + sample -> Network -> device rules -> simulation.
File look-ups follow the vendor tool: relative paths and the implicit `tests/...` files resolve
against the working directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.network import Network
from edgesynth.ir.spec import NetworkSpec
from edgesynth.ir.yamlcfg import load_spec
from edgesynth.sim.simulate import LayerResult, SimOptions, simulate
from edgesynth.targets.max7800x.build import BuildOptions, WeightLayer, build_network


@dataclass
class SynthesisJob:
    config_file: str
    build: BuildOptions
    sim: SimOptions = field(default_factory=SimOptions)
    rules: object | None = None  # rules.RuleOptions, when the caller has global options


@dataclass
class SynthesisResult:
    network: Network
    sample: np.ndarray
    layers: list[LayerResult]

    @property
    def output(self) -> np.ndarray:
        """The known-answer output: the final layer's data, C x H x W."""
        return self.layers[-1].output


def _resolve(base: Path, name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else base / path


def _checkpoint_weights(spec: NetworkSpec, path: Path, opts: BuildOptions) -> list[WeightLayer]:
    from edgesynth.ir.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(path)
    if spec.arch and checkpoint.arch and checkpoint.arch.lower() != spec.arch.lower():
        raise EdgesynthError(
            f"the checkpoint {path} was trained for `{checkpoint.arch}`, but the network "
            f"description says `arch: {spec.arch}`; pass the matching checkpoint or YAML.",
            file=spec.path,
            line=spec.lines.get("arch"),
        )
    layers = checkpoint.layers[opts.skip_checkpoint_layers :]
    return [
        WeightLayer(
            weight=layer.weight,
            bias=layer.bias,
            output_shift=layer.output_shift,
            source=f"{path}: {layer.name}",
        )
        for layer in layers
    ]


def _synthetic_weights(spec: NetworkSpec, base: Path) -> tuple[list[np.ndarray], str]:
    from edgesynth.ir.npyfile import load_npy_arrays

    name = spec.weights if spec.weights else f"weights_{(spec.dataset or '').lower()}"
    path = _resolve(base, str(Path("tests") / f"{name}.npy"))
    arrays = load_npy_arrays(path)
    if len(arrays) == 1:  # one array holding every layer along its first axis
        arrays = list(arrays[0])
    return arrays, str(path)


def _synthetic_bias(spec: NetworkSpec, base: Path) -> list[np.ndarray]:
    from edgesynth.ir.npyfile import load_npy_arrays

    if not spec.bias:
        return []
    return load_npy_arrays(_resolve(base, str(Path("tests") / f"bias_{spec.bias}.npy")))


def load_sample(spec: NetworkSpec, opts: BuildOptions) -> tuple[np.ndarray, Path]:
    from edgesynth.ir.npyfile import load_sample as read_sample

    if opts.sample_input:
        path = _resolve(opts.base_dir, opts.sample_input)
    else:
        path = _resolve(opts.base_dir, f"tests/sample_{(spec.dataset or '').lower()}.npy")
    sample = read_sample(path)
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
    return sample.astype(np.int64), path


def load_network(job: SynthesisJob) -> tuple[Network, np.ndarray]:
    opts = job.build
    spec = load_spec(_resolve(opts.base_dir, job.config_file))
    spec.path = job.config_file
    sample, _ = load_sample(spec, opts)
    if (spec.arch or "").lower() != "test":
        if not opts.checkpoint:
            raise EdgesynthError(
                f"`arch: {spec.arch}` needs trained weights: pass --checkpoint-file "
                "(or use `arch: test` with synthetic weights in tests/).",
                file=spec.path,
                line=spec.lines.get("arch"),
            )
        weights = _checkpoint_weights(spec, _resolve(opts.base_dir, opts.checkpoint), opts)
        net = build_network(spec, sample, opts, checkpoint_layers=weights)
    else:
        net = build_network(
            spec,
            sample,
            opts,
            synthetic_weights=_synthetic_weights(spec, opts.base_dir),
            synthetic_bias=_synthetic_bias(spec, opts.base_dir),
        )
    return net, sample


def check_network(net: Network, job: SynthesisJob) -> None:
    try:
        from edgesynth.targets.max7800x import rules
    except ImportError:  # pragma: no cover - rules land separately
        return
    rules.check_network(net, job.build.device, job.rules)


def synthesize(job: SynthesisJob) -> SynthesisResult:
    net, sample = load_network(job)
    check_network(net, job)
    return SynthesisResult(net, sample, simulate(net, sample, job.sim))
