"""The vendor tool's per-layer weight and bias lists (ai8x-synthesis keeps parallel lists
indexed by layer and patches them in place): which layers take synthetic weight arrays, how the
lists are lined up after passthrough, bypass and `weight_source` layers, and what --zero-sram
does to them. Each function reproduces the vendor's bookkeeping, quirks included; the corpus
cases with bypass/passthrough layers and synthetic weights (the `test-*` regression networks)
decide them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.layer_config import layer_error
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.description.spec import NetworkSpec

if TYPE_CHECKING:
    from edgesynth.targets.max7800x.description.sequence import References


@dataclass
class WeightEntry:
    """One weight array as the vendor keeps it, with what it derived from the array."""

    weight: np.ndarray
    in_channels: int
    out_channels: int
    flat_2d_linear: bool = False  # a checkpoint Linear: the vendor stores it as (1, out, in)


def takes_no_weights(layer: Layer) -> bool:
    """A passthrough or bypass layer: it consumes no weight array."""
    return layer.operation == "none" or bool(layer.spec.bypass)


def synthetic_takers(layers: list[Layer]) -> list[Layer]:
    """The layers that consume synthetic weight arrays, in the vendor's order.

    The vendor skips passthrough layers, but tests `bypass` on the layer numbered by how many
    arrays were consumed so far rather than on the layer itself; reproduced because it decides
    which array lands where. `weight_source` does not exempt a layer here.
    """
    takers: list[Layer] = []
    seq = 0
    while seq < len(layers):
        while seq < len(layers) and (
            layers[seq].operation == "none"
            or (len(takers) < len(layers) and layers[len(takers)].spec.bypass)
        ):
            seq += 1
        if seq >= len(layers):
            break
        takers.append(layers[seq])
        seq += 1
    return takers


def line_up(
    spec: NetworkSpec,
    layers: list[Layer],
    params: list[WeightEntry],
    biases: list[np.ndarray | None],
    shifts: dict[int, int],
    refs: References,
) -> tuple[list[WeightEntry | None], list[np.ndarray | None]]:
    """The vendor's per-layer weight and bias lists.

    When there are fewer weight arrays than YAML layers, the vendor walks the layers and
    inserts an empty entry at each passthrough/bypass layer and a copy of the source layer's
    entry at each `weight_source` layer, into lists that are only lined up up to that point.
    A bypass layer gets no bias entry inserted, so later layers take the next layer's bias.
    """
    weights: list[WeightEntry | None] = list(params)
    bias_list = list(biases)
    if len(layers) > len(weights):
        for layer in layers:
            ll = layer.index
            if takes_no_weights(layer):
                weights.insert(ll, None)
                if not layer.spec.bypass:
                    bias_list.insert(ll, None)
            elif layer.spec.weight_source is not None:
                val = refs.resolve(layer.spec, "weight_source", layer.spec.weight_source)
                if not -len(weights) <= val < len(weights):
                    raise layer_error(
                        spec,
                        layer.spec,
                        "weight_source",
                        f"refers to layer {val}, but the network has layers 0 to "
                        f"{len(layers) - 1}.",
                    )
                weights.insert(ll, weights[val])
                bias_list.insert(
                    ll, bias_list[val] if -len(bias_list) <= val < len(bias_list) else None
                )
                shifts[ll] = shifts.get(val, 0)
                layer.weight_source = val
    if len(weights) != len(layers):
        raise EdgesynthError(
            f"the YAML configures {len(layers)} layers but the weights cover {len(weights)} "
            "(layers with weights, plus passthrough/bypass layers and `weight_source` copies); "
            "the vendor refuses such a network.",
            file=spec.path,
        )
    return weights, bias_list


def zero_every_seventh(layers: list[Layer], weights: list[WeightEntry | None]) -> None:
    """--test-bist with --zero-sram or --pretend-zero-sram clears every 7th kernel of every
    layer's weights (the vendor tests the memory self-test this way).

    The vendor keeps each layer's kernels as one array of (out x in) kernels and clears entries
    0, 7, 14, ... of it; a checkpoint Linear layer is one (1, out, in) block, so it is cleared
    entirely. Layers without weights are left alone.
    """
    weights = [entry for entry in weights if entry is not None]
    done: set[int] = set()
    for entry in weights:
        if id(entry) in done:
            continue
        done.add(id(entry))
        w = entry.weight
        if entry.flat_2d_linear:
            entry.weight = np.zeros_like(w)
            continue
        flat = w.reshape(-1, *w.shape[2:]).copy() if w.ndim > 2 else w.copy()
        flat[::7] = 0
        entry.weight = flat.reshape(w.shape)
