"""The global `data_buffer`: how a layer names it and what a layer that uses it must set."""

from __future__ import annotations

from edgesynth.targets.max7800x.description.layer_config import layer_error
from edgesynth.targets.max7800x.description.network import Layer
from edgesynth.targets.max7800x.description.spec import NetworkSpec

DATA_BUFFER = -2  # an `in_sequences` entry that names the global `data_buffer`


def leaves_placement(spec: NetworkSpec) -> bool:
    """Some layer leaves its `processors` to automatic placement (which then chooses every key
    the YAML leaves out, and builds the network again with them)."""
    return any(ls.processors is None for ls in spec.layers)


def check_buffers(spec: NetworkSpec, layers: list[Layer]) -> None:
    placing = leaves_placement(spec)
    for layer in layers:
        ls = layer.spec
        uses_buffer = DATA_BUFFER in (layer.in_sequences or [])
        if (uses_buffer or layer.buffer_shift or layer.buffer_insert) and not spec.data_buffer:
            raise layer_error(spec, ls, "in_sequences", "no global `data_buffer` is configured.")
        if layer.buffer_shift and layer.operation != "none":
            raise layer_error(
                spec, ls, "buffer_shift", "`buffer_shift` can only be used in a passthrough layer."
            )
        if layer.buffer_shift and not ls.in_sequences:
            raise layer_error(
                spec,
                ls,
                "buffer_shift",
                "`buffer_shift` needs the buffer's name in `in_sequences`.",
            )
        if layer.buffer_insert and ls.out_offset is None and not placing:
            raise layer_error(spec, ls, "buffer_insert", "`buffer_insert` needs `out_offset`.")
        if uses_buffer:
            # A network left to automatic placement gets its offsets from the search (and is
            # built again with them), so only the shape keys are needed here.
            placed = () if placing else ("in_offset", "out_offset")
            missing = [k for k in (*placed, "in_dim", "in_channels") if getattr(ls, k) is None]
            if missing:
                raise layer_error(
                    spec,
                    ls,
                    "in_sequences",
                    "a layer that reads the data buffer needs "
                    + ", ".join(f"`{k}`" for k in missing)
                    + ".",
                )
