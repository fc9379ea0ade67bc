"""Which YAML layers exist and in which order, how references to layers resolve, and the
layer sequence (`next_sequence`, --start-layer, --stop-after, `simulated_sequence`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.buffers import DATA_BUFFER
from edgesynth.targets.max7800x.description.layer_config import layer_error
from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer
from edgesynth.targets.max7800x.description.spec import LayerSpec, NetworkSpec

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.description.assemble_options import BuildOptions


def yaml_layers(spec: NetworkSpec, skip: int) -> list[LayerSpec]:
    """The layers the vendor parses: the first `skip` dropped, then ordered by `sequence`.

    A layer without `sequence` follows the one before it; gaps in the numbering close up, so a
    layer's index is its rank, which is also what numeric references refer to.
    """
    numbered: list[tuple[int, LayerSpec]] = []
    sequence = 0
    for ls in spec.layers[skip:]:
        if ls.sequence is not None:
            sequence = ls.sequence - skip
            if sequence < 0:
                raise layer_error(
                    spec,
                    ls,
                    "sequence",
                    f"`sequence: {ls.sequence}` falls among the {skip} layers skipped by "
                    "--skip-yaml-layers.",
                )
        numbered.append((sequence, ls))
        sequence += 1
    return [ls for _, ls in sorted(numbered, key=lambda item: item[0])]


class References:
    """Layer references as the vendor resolves them: names by lookup, numbers minus the
    skipped YAML layers, `stop` as -1, the data buffer's name as DATA_BUFFER."""

    def __init__(self, spec: NetworkSpec, specs: list[LayerSpec], skip: int) -> None:
        self.spec = spec
        self.skip = skip
        self.names = {ls.name.lower(): i for i, ls in enumerate(specs) if ls.name}
        self.buffers = {b.name.lower() for b in spec.data_buffer if b.name}

    def resolve(self, ls: LayerSpec, key: str, ref: int | str) -> int:
        if isinstance(ref, str):
            lowered = ref.lower()
            if lowered == "stop":
                return -1
            if lowered in ("input", "in"):
                return NETWORK_INPUT
            if lowered in self.names:
                return self.names[lowered]
            if lowered in self.buffers and key == "in_sequences":
                return DATA_BUFFER
            known = ", ".join(f"`{n}`" for n in self.names) or "none"
            raise layer_error(
                self.spec, ls, key, f"no layer is named `{ref}` (named layers: {known})."
            )
        if ref == NETWORK_INPUT:
            return NETWORK_INPUT
        return int(ref) - self.skip


def walk_sequence(
    spec: NetworkSpec, layers: list[Layer], opts: BuildOptions, refs: References
) -> list[int]:
    """The `next_sequence` walk from --start-layer; --stop-after ends it early."""
    count = len(layers)
    for layer in layers:
        ls = layer.spec
        if ls.next_sequence is None:
            layer.next_sequence = layer.index + 1 if layer.index + 1 < count else -1
        else:
            layer.next_sequence = refs.resolve(ls, "next_sequence", ls.next_sequence)
            if layer.next_sequence > count:
                layer.next_sequence = -1
        if ls.in_sequences is not None:
            layer.in_sequences = [refs.resolve(ls, "in_sequences", r) for r in ls.in_sequences]
            for ref in layer.in_sequences:
                if ref not in (NETWORK_INPUT, DATA_BUFFER) and not 0 <= ref < count:
                    raise layer_error(
                        spec,
                        ls,
                        "in_sequences",
                        f"refers to layer {ref}, but the network has layers 0 to {count - 1} "
                        "(and -1 for the input).",
                    )
            if DATA_BUFFER in layer.in_sequences and len(layer.in_sequences) > 1:
                raise layer_error(
                    spec, ls, "in_sequences", "the data buffer must be a layer's only input."
                )
    order: list[int] = []
    index = opts.start_layer
    if not 0 <= index < count:
        raise EdgesynthError(
            f"--start-layer {index} is outside the network's layers 0 to {count - 1}."
        )
    while 0 <= index < count:
        if index in order:
            raise layer_error(
                spec,
                layers[index].spec,
                "next_sequence",
                f"the layer sequence loops back to layer {index}.",
            )
        order.append(index)
        if opts.stop_after is not None and index == opts.stop_after - opts.skip_yaml_layers:
            layers[index].next_sequence = -1
        index = layers[index].next_sequence
    _check_stop_after(opts, order, count)
    return order


def _check_stop_after(opts: BuildOptions, order: list[int], count: int) -> None:
    """--stop-after must name a layer the sequence reaches (the vendor ignores it silently)."""
    if opts.stop_after is None:
        return
    stop = opts.stop_after - opts.skip_yaml_layers
    if stop in order:
        return
    if not 0 <= stop < count:
        first, last = opts.skip_yaml_layers, opts.skip_yaml_layers + count - 1
        raise EdgesynthError(
            f"--stop-after {opts.stop_after} names no layer: the network has layers {first} "
            f"to {last}."
        )
    raise EdgesynthError(
        f"--stop-after {opts.stop_after}: the layer sequence ({', '.join(map(str, order))}) "
        "never reaches that layer."
    )


def simulated_order(
    spec: NetworkSpec, layers: list[Layer], order: list[int], refs: References
) -> list[int]:
    """The layers the known-answer simulation runs: `simulated_sequence` overrides the
    `next_sequence` step; layers past the last one the walk reached do not exist."""
    limit = max(order) + 1
    sim_order: list[int] = []
    index = order[0]
    while index < limit:
        if index in sim_order:
            raise layer_error(
                spec,
                layers[index].spec,
                "simulated_sequence",
                f"the simulated layer sequence loops back to layer {index}.",
            )
        if index not in order:
            raise layer_error(
                spec,
                layers[index].spec,
                "simulated_sequence",
                "the simulation reaches this layer, but the layer sequence (`next_sequence`) "
                "does not, so its input size is unknown.",
            )
        sim_order.append(index)
        ls = layers[index].spec
        if ls.simulated_sequence is None:
            index = layers[index].next_sequence
        else:
            index = refs.resolve(ls, "simulated_sequence", ls.simulated_sequence)
        if index == -1:
            break
    return sim_order


def link_target(layer: Layer) -> int | None:
    """The layer this layer's NXTLYR links to (a `next_sequence` jump, else `snoop_sequence`),
    None: no link. A snoop unit that gates links decides whether the link is taken."""
    following = layer.next_sequence
    if following not in (None, -1, layer.index + 1):
        return following
    if following == layer.index + 1 and layer.spec.snoop_sequence is not None:
        return int(layer.spec.snoop_sequence)
    return None
