"""Message wording shared by the rules: hex offsets, processor maps, plurals, layer names."""

from __future__ import annotations

from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.device import Device


def hex16(value: int) -> str:
    return f"0x{value:04x}"


def map64(value: int) -> str:
    return f"0x{value:016x}"


def plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}{suffix}"


def dims(dim: tuple[int, int], layer: Layer) -> str:
    return str(dim[0]) if layer.is_1d else f"{dim[0]}x{dim[1]}"


def layer_name(layer: Layer) -> str:
    return f"{layer.index} ({layer.spec.name})" if layer.spec.name else str(layer.index)


def too_many_layers(count: int, device: Device) -> str:
    return (
        f"the network describes {count} layers, but the {device.name} runs at most "
        f"{device.max_layers} (layers 0 to {device.max_layers - 1}); merge pooling and "
        "element-wise operations into neighbouring convolutions, or drop layers."
    )


def offset_message(value: int, device: Device) -> str:
    limit = device.max_out_offset
    return (
        f"{hex16(value)} is outside the {device.name}'s data memory; offsets run from 0x0000 to "
        f"{hex16(limit - 1)} (and a layer's data must also fit in one "
        f"{device.instance_bytes:,}-byte memory instance from there)."
    )


def pool_key(layer: Layer) -> str:
    """The YAML key that configures the layer's pooling."""
    return "max_pool" if layer.pool_type == "max" else "avg_pool"
