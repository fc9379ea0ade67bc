"""What a rule sees: the network, the device, the options, and the vendor's defaults."""

from __future__ import annotations

from functools import cached_property

from edgesynth.errors import EdgesynthError
from edgesynth.lean_dataclass import dataclass
from edgesynth.targets.max7800x.description.network import Layer, Network
from edgesynth.targets.max7800x.device import Device
from edgesynth.targets.max7800x.rules.options import RuleOptions
from edgesynth.targets.max7800x.rules.sizes import output_processors_needed
from edgesynth.targets.max7800x.rules.text import layer_name


@dataclass
class Context:
    """What the device rules read: the network, the device and the rule options."""

    net: Network
    device: Device
    options: RuleOptions

    @cached_property
    def max_proc(self) -> int:
        return self.options.max_proc or self.device.processors

    @cached_property
    def order(self) -> list[int]:
        return self.net.order or list(range(len(self.net.layers)))

    @property
    def start(self) -> int:
        return self.order[0]

    @property
    def final(self) -> int:
        return self.order[-1]

    @cached_property
    def previous(self) -> dict[int, int]:
        """Layer index -> the layer executed before it (-1 for the first)."""
        return {index: (self.order[i - 1] if i else -1) for i, index in enumerate(self.order)}

    @cached_property
    def layers(self) -> list[Layer]:
        """The executed layers, in execution order."""
        return [self.net.layers[i] for i in self.order]

    @property
    def placed(self) -> bool:
        """Every executed layer has its `processors` (the quadrant rules need them all)."""
        return all(layer.processors is not None for layer in self.layers)

    def layer(self, index: int) -> Layer:
        return self.net.layers[index]

    def streaming(self, index: int) -> bool:
        return 0 <= index < len(self.net.layers) and self.net.layers[index].streaming

    def calcx4(self, layer: Layer) -> bool:
        return bool(layer.spec.calcx4) or self.options.calcx4

    def read_ahead(self, layer: Layer) -> bool:
        return bool(layer.spec.readahead) or self.options.rd_ahead

    def in_offset(self, layer: Layer) -> int | None:
        if layer.in_offset is not None:
            return layer.in_offset
        if layer.index == self.start:
            return 0
        previous = self.previous.get(layer.index, -1)
        return self.net.layers[previous].out_offset if previous >= 0 else None

    def output_map(self, layer: Layer) -> int | None:
        """The output processor map the layer writes, with the vendor's defaults."""
        if layer.index == self.final:
            if self.net.spec.output_map is not None:
                return self.net.spec.output_map
            if layer.output_processors is not None:
                return layer.output_processors
            return (
                1
                << output_processors_needed(
                    layer, self.max_proc, self.device.processors_sharing_memory
                )
            ) - 1
        if layer.output_processors is not None:
            return layer.output_processors
        following = layer.next_sequence
        if following is not None and 0 <= following < len(self.net.layers):
            return self.net.layers[following].processors
        return None

    def output_map_origin(self, layer: Layer) -> tuple[str, str]:
        """(YAML key, how the output map was chosen) for messages."""
        if layer.index == self.final and self.net.spec.output_map is not None:
            return "output_map", "the global `output_map`"
        if layer.output_processors is not None:
            return "output_processors", "`output_processors`"
        following_index = layer.next_sequence
        if layer.index == self.final or following_index is None or following_index < 0:
            return "output_processors", "the default output map of the final layer"
        following = self.net.layers[following_index]
        return (
            "output_processors",
            f"`output_processors` (not set, so the `processors` of layer "
            f"{layer_name(following)}, which reads this output)",
        )

    def error(
        self, layer: Layer, key: str | None, message: str, line: int | None = None
    ) -> EdgesynthError:
        err = layer.error(message, key=key, file=self.net.spec.path)
        if line is not None:
            err.line = line
        return err

    def global_error(self, key: str | None, message: str) -> EdgesynthError:
        line = self.net.spec.lines.get(key) if key else None
        return EdgesynthError(message, file=self.net.spec.path, line=line, key=key)
