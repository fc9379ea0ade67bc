"""Layer-sequence bookkeeping of the vendor tool that decides processor maps."""

from __future__ import annotations

from edgesynth.targets.max7800x.description.network import Layer, Network


def stopped_layer_output_map(net: Network, layer: Layer, stop_index: int | None) -> int | None:
    """The output processor map of the layer `--stop-after` ends the network with.

    The vendor fills a layer's default output map (the processors of the layer that follows)
    before `--stop-after` cuts the sequence, so the stopped layer keeps writing where the next
    YAML layer would read, instead of the packed map a final layer gets. None when the rule does
    not apply. Proved by MAX78000/test-cifar10-chw and test-ai85-mnist80wide (--stop-after 0).
    """
    if stop_index is None or layer.index != stop_index or layer.output_processors is not None:
        return None
    if net.spec.output_map is not None:
        return None
    target = layer.spec.next_sequence
    if target is None:
        following = layer.index + 1
    elif isinstance(target, str):
        names = {ls.spec.name.lower(): ls.index for ls in net.layers if ls.spec.name}
        if target.lower() == "stop":
            return None
        following = names.get(target.lower(), -1)
    else:
        following = int(target)
    if not 0 <= following < len(net.layers):
        return None
    return net.layers[following].processors
