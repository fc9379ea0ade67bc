"""How the vendor's known-answer simulation hands layer outputs from layer to layer."""

from __future__ import annotations

import numpy as np

from edgesynth.targets.max7800x.description.network import NETWORK_INPUT, Layer


class HandOver:
    """The vendor's hand-over list: an output is stored at the position of the layer that
    runs *next*, and `in_sequences: [i]` reads position i + 1, whatever was handed there.

    On the silicon a layer reads the memory its producer wrote. The two agree in a network
    that runs its layers in order; they differ when `next_sequence` or `simulated_sequence`
    makes the run jump, and the known answers follow the list: proven by
    MAX78002/test-linklayer-hoparound (`next_sequence`) and the MAX78002/test-snoop-* cases
    (`simulated_sequence`). Position `start` holds the network input when the run starts
    there (--start-layer).
    """

    def __init__(self, sample: np.ndarray, start: int) -> None:
        self.slots: dict[int, np.ndarray] = {start: sample}

    def hand(self, next_layer: int, output: np.ndarray) -> None:
        """The output of the layer that just ran, handed to `next_layer`."""
        self.slots[next_layer] = output

    def own_input(self, layer: Layer) -> np.ndarray:
        """What was handed to `layer` itself (no `in_sequences`)."""
        return self.slots[layer.index]

    def output_of(self, layer: Layer, producer: int) -> np.ndarray:
        """`in_sequences` entry `producer` of `layer`: position `producer + 1`."""
        slot = producer + 1
        if slot not in self.slots:
            what = "the network input" if producer == NETWORK_INPUT else f"layer {producer}"
            raise layer.error(
                f"reads {what}, which this run has not produced (the vendor hands data along "
                "by layer position; check `in_sequences`, `next_sequence` and --start-layer)"
            )
        return self.slots[slot]
