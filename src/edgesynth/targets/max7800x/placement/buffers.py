"""The placement keys a data buffer fixes (the vendor's rolling buffer for temporal networks).

A `data_buffer` is given with its processors and offset: it keeps `dim` words per processor
from one inference to the next. The layers that use it have no placement to choose:
- a layer reading the buffer (`in_sequences: BUFFER`) reads it from its start, on its
  processors;
- `buffer_shift: k` (a passthrough reading the buffer) moves it down by k words: it reads from
  word k and writes from word 0, on the buffer's processors;
- `buffer_insert: k` writes the layer's output into the last k words.
`with_buffer_keys` writes those keys into the layers that leave them out, before the network is
built (the vendor's rules ask a buffer layer for its offsets); the search then places the rest
around the buffer, which is alive for the whole run.
"""

from __future__ import annotations

import copy

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.description.buffers import leaves_placement
from edgesynth.targets.max7800x.description.spec import DataBufferSpec, LayerSpec, NetworkSpec

WORD = 4  # bytes per data-memory word


def buffer_of(spec: NetworkSpec) -> DataBufferSpec | None:
    return spec.data_buffer[0] if spec.data_buffer else None


def buffer_words(buffer: DataBufferSpec, spec: NetworkSpec) -> int:
    """Words the buffer keeps per processor (one per time step)."""
    if isinstance(buffer.dim, tuple):
        rows, cols = buffer.dim
        if cols != 1:
            raise EdgesynthError(
                f"data buffer `{buffer.name}` is {rows}x{cols}: automatic placement places only "
                "one-dimensional buffers; give the placement of the layers that use it.",
                file=spec.path,
                line=buffer.line,
                key="data_buffer.dim",
            )
        return int(rows)
    return int(buffer.dim)


def _reads_buffer(layer: LayerSpec, buffer: DataBufferSpec) -> bool:
    name = (buffer.name or "").lower()
    return any(isinstance(r, str) and r.lower() == name for r in layer.in_sequences or [])


def with_buffer_keys(spec: NetworkSpec) -> tuple[NetworkSpec, dict[int, list[str]]]:
    """When the network is left to automatic placement: a copy of `spec` whose buffer layers
    carry the keys the buffer fixes (keys the YAML gives are kept: the rules and the search
    check them), and the keys filled, per layer index."""
    buffer = buffer_of(spec)
    if buffer is None or not leaves_placement(spec):
        return spec, {}
    words = buffer_words(buffer, spec)
    placed = copy.copy(spec)
    placed.layers = [copy.copy(layer) for layer in spec.layers]
    filled: dict[int, list[str]] = {}
    for index, layer in enumerate(placed.layers):
        keys: dict[str, int] = {}
        if layer.buffer_shift:
            keys["processors"] = keys["output_processors"] = buffer.processors
            keys["in_offset"] = buffer.offset + WORD * layer.buffer_shift
            keys["out_offset"] = buffer.offset
        elif _reads_buffer(layer, buffer):
            keys["processors"], keys["in_offset"] = buffer.processors, buffer.offset
        if layer.buffer_insert:
            keys["output_processors"] = buffer.processors
            keys["out_offset"] = buffer.offset + WORD * (words - layer.buffer_insert)
        for key, value in keys.items():
            if getattr(layer, key) is None:
                setattr(layer, key, value)
                filled.setdefault(index, []).append(key)
    return placed, filled
