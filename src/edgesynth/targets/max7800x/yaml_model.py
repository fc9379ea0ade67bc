"""The vendor's YAML network description (+ checkpoint) as the rest of edgesynth sees it: a
network graph (`compile NET.yaml`), the hardware layers (`Network`, which
`train/vendor_model.py` turns into an edgesynth.nn model for `evaluate`), the per-layer weight
bits (`quantize -c`). Nothing outside the MAX7800x target reads the description itself."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.ir.graph import Graph
from edgesynth.targets.max7800x.commands.option_names import COMPILE
from edgesynth.targets.max7800x.description.assemble import BuildOptions
from edgesynth.targets.max7800x.description.graph import graph_from_network
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer, Network
from edgesynth.targets.max7800x.description.yamlcfg import load_spec
from edgesynth.targets.max7800x.device import get_device
from edgesynth.targets.max7800x.options import Max7800xOptions
from edgesynth.targets.max7800x.pipeline import (
    SynthesisJob,
    check_network,
    load_network,
    read_network,
)

if TYPE_CHECKING:
    from edgesynth.flow import ModelRequest

__all__ = [
    "NETWORK_INPUT",
    "Layer",
    "Network",
    "load_vendor_network",
    "read_model",
    "vendor_graph",
    "yaml_layer_bits",
]


def load_vendor_network(
    path: str | Path,
    checkpoint: str | Path | None,
    device: str = "MAX78000",
    sample: str | Path | None = None,
    base: str | Path = ".",
    *,
    check: bool = False,
) -> Network:
    """A vendor YAML (+ checkpoint or synthetic weights) read by the MAX7800x builder: the
    hardware layers the YAML describes, arithmetic only, unplaced where the YAML leaves
    placement out (with `check`: placed, and the device rules checked, as `synth` does)."""
    build = BuildOptions(
        device=get_device(device),
        checkpoint=None if checkpoint is None else str(checkpoint),
        sample_input=None if sample is None else str(sample),
        base_dir=Path(base),
        names=COMPILE,
    )
    job = SynthesisJob(str(path), Max7800xOptions(build=build))
    if not check:
        return read_network(job).network
    net, _ = load_network(job)
    check_network(net, job)
    return net


def vendor_graph(
    path: Path,
    checkpoint: str | Path | None,
    device: str,
    sample: str | Path | None,
    base: Path,
    avg_pool_rounding: bool = False,
    check_rules: bool = False,
) -> Graph:
    """The network graph of a vendor YAML (+ checkpoint): what `edgesynth compile NET.yaml`
    and every target read."""
    net = load_vendor_network(path, checkpoint, device, sample, base, check=check_rules)
    bias_div = get_device(device).bias_div
    return graph_from_network(net, bias_div=bias_div, avg_pool_rounding=avg_pool_rounding)


READER_OPTIONS = ("device", "avg_pool_rounding", "check_rules")


def read_model(path: Path, request: ModelRequest) -> Graph:
    """`edgesynth compile NET.yaml` (registered in plugin.py as the reader of .yaml/.yml): the
    network graph for `request.target`'s device (MAX78000 for a target of another package),
    or `options["device"]`; `avg_pool_rounding` and `check_rules` as in `vendor_graph`."""
    unknown = sorted(set(request.options) - set(READER_OPTIONS))
    if unknown:
        raise EdgesynthError(
            f"the vendor YAML reader takes no option `{unknown[0]}`; it takes "
            f"{', '.join(READER_OPTIONS)}",
            file=str(path),
        )
    device = request.options.get("device") or _device_of(request.target)
    return vendor_graph(
        path,
        request.checkpoint,
        str(device),
        request.sample_input,
        request.base_dir,
        bool(request.options.get("avg_pool_rounding", False)),
        bool(request.options.get("check_rules", False)),
    )


def _device_of(target: str | None) -> str:
    """The part a MAX7800x target compiles for; MAX78000 for any other target."""
    from edgesynth.targets.max7800x.target import Max78000, Max78002

    devices = {cls.name: cls.device_name for cls in (Max78000, Max78002)}
    return devices.get((target or "").lower(), Max78000.device_name)


def yaml_layer_bits(config_file: Path) -> list[int | None]:
    """Per weight layer `quantization` from a network description (vendor's -c option)."""
    spec = load_spec(config_file)
    bits: list[int | None] = []
    for layer in spec.layers:
        if (layer.operation or "none") == "none" or layer.weight_source is not None:
            continue
        q = layer.quantization
        if q == "binary":
            raise EdgesynthError(
                "binary weights are not supported by `quantize`.",
                file=str(config_file),
                line=layer.lines.get("quantization"),
            )
        bits.append(int(q) if q is not None else None)
    return bits
