"""Turn a parsed YAML description, weights and a sample into a MAX7800x `Network`.

This is where the vendor's implicit semantics live: which YAML layers exist (`sequence`,
`--skip-yaml-layers`), per-operation defaults (padding 1 for convolutions, 3x3 kernels, ...),
which layers take weights from the checkpoint and how the vendor lines weights and biases up
with the layers (including `weight_source` and `bypass`), the weight width, the implicit output
shift (8 - bits), channel counts taken from the weights, the layer sequence (`next_sequence`,
`--start-layer`, `--stop-after`, `simulated_sequence`), and the shape of every layer's input
and output.

The vendor (ai8x-synthesis `izer`) keeps parallel per-layer lists and patches them in place; a
few of its results depend on that bookkeeping rather than on the layer itself. Those are
reproduced on purpose, each where it happens, because they decide the known-answer numbers.

This module holds the orchestration (its options are `assemble_options.BuildOptions`); the parts
live in `layer_config`
(per-layer defaults), `weights` (weights, biases, bit widths, shifts), `sequence` (layer
order, names and references), `shapes` (channels and sizes) and `buffers` (the data buffer).
"""

from __future__ import annotations

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.compat.weight_lists import line_up, zero_every_seventh
from edgesynth.targets.max7800x.description.assemble_options import ALL_LAYERS_NO_BIAS, BuildOptions
from edgesynth.targets.max7800x.description.buffers import DATA_BUFFER, check_buffers
from edgesynth.targets.max7800x.description.layer_config import configure_layer, shared_default_pad
from edgesynth.targets.max7800x.description.network import Network
from edgesynth.targets.max7800x.description.sequence import (
    References,
    simulated_order,
    walk_sequence,
    yaml_layers,
)
from edgesynth.targets.max7800x.description.shapes import infer_channels, infer_dimensions
from edgesynth.targets.max7800x.description.spec import NetworkSpec
from edgesynth.targets.max7800x.description.weights import (
    BINARY,
    WeightLayer,
    attach_weights,
    checkpoint_params,
    refuse_weights_in_use,
    synthetic_biases,
    synthetic_params,
)

__all__ = [
    "ALL_LAYERS_NO_BIAS",
    "BINARY",
    "DATA_BUFFER",
    "BuildOptions",
    "WeightLayer",
    "build_network",
    "checkpoint_takers",
    "yaml_layers",
]


def checkpoint_takers(spec: NetworkSpec, opts: BuildOptions) -> int:
    """How many YAML layers read weights from a checkpoint (not passthrough/element-wise, not
    `bypass`, no `weight_source`)."""
    return sum(
        1
        for ls in yaml_layers(spec, opts.skip_yaml_layers)
        if (ls.operation or "conv2d") != "none" and not ls.bypass and ls.weight_source is None
    )


def build_network(
    spec: NetworkSpec,
    sample: np.ndarray,
    opts: BuildOptions,
    *,
    checkpoint_layers: list[WeightLayer] | None = None,
    synthetic_weights: tuple[list[np.ndarray], str] | None = None,
    synthetic_bias: list[np.ndarray] | None = None,
) -> Network:
    """Apply the device's semantics to `spec` and attach weights; shapes follow `sample`."""
    specs = yaml_layers(spec, opts.skip_yaml_layers)
    if not specs:
        raise EdgesynthError("the network has no layers.", file=spec.path)
    refs = References(spec, specs, opts.skip_yaml_layers)
    default_pad = shared_default_pad(specs)
    layers = [configure_layer(spec, ls, i, default_pad, opts) for i, ls in enumerate(specs)]

    if checkpoint_layers is not None:
        params, biases, shifts = checkpoint_params(spec, layers, checkpoint_layers, opts)
    else:
        arrays, source = synthetic_weights if synthetic_weights is not None else ([], "")
        params, shifts = synthetic_params(spec, layers, arrays, source)
        biases = synthetic_biases(layers, synthetic_bias or [], opts.no_bias)
    weights, biases = line_up(spec, layers, params, biases, shifts, refs)
    for layer in layers:
        if layer.spec.weight_source is not None and layer.weight_source is None:
            layer.weight_source = refs.resolve(
                layer.spec, "weight_source", layer.spec.weight_source
            )
    if opts.test_bist:
        zero_every_seventh(layers, weights)
    in_ch, out_ch = attach_weights(spec, layers, weights, biases, shifts)

    if sample.ndim < 3:
        sample = sample[..., None]
    order = walk_sequence(spec, layers, opts, refs)
    check_buffers(spec, layers)
    infer_channels(spec, layers, order, in_ch, out_ch, sample.shape[0])
    infer_dimensions(spec, layers, order, (sample.shape[1], sample.shape[2]))
    final = order[-1]
    if opts.output_width is not None:
        layers[final].output_width = opts.output_width
    if opts.input_offset is not None:
        layers[order[0]].in_offset = opts.input_offset
    for layer in layers:
        if opts.ignore_streaming:
            layer.streaming = False
        if layer.index in opts.streaming_layers:
            layer.streaming = True
    sim_order = simulated_order(spec, layers, order, refs)
    if checkpoint_layers is not None:
        refuse_weights_in_use(layers, checkpoint_layers, set(order) | set(sim_order))
    return Network(
        spec=spec,
        device=opts.device.name,
        layers=layers,
        input_shape=tuple(sample.shape),
        order=order,
        sim_order=sim_order,
        output_layer=final,
    )
