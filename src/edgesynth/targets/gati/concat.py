"""Channel concatenation through the DRAM layout: the layers a concatenation joins write
adjacent channel ranges of one NHW8C8 tensor (a buffer), so no instruction copies anything.

In NHW8C8 a map is whole groups of 8 channels, each group one contiguous run of bytes: a
layer whose output has a multiple of 8 channels, followed in memory by the next layer's output,
is the first part of their concatenation. Every part but the last must therefore have a
multiple of 8 channels. A layer's output lives in one place, so a layer may join several
concatenations only where they are consecutive runs of one buffer; the graph input (written by
the host) and the last layer (32-bit accumulators for the host) take part in none.
"""

from __future__ import annotations

from edgesynth.errors import EdgesynthError
from edgesynth.targets.gati.chain import LayerChain


def _err(chain: LayerChain, index: int, reason: str) -> EdgesynthError:
    node = chain.layers[index].name
    return EdgesynthError(f"{chain.label(node)}: {reason}", file=chain.path or None)


def concatenations(chain: LayerChain) -> list[list[int]]:
    """Every operand that joins several layers (in order of first use, no duplicates)."""
    seen: list[list[int]] = []
    for i in range(len(chain.layers)):
        for src in chain.sources_of(i):
            if len(src) > 1 and src not in seen:
                seen.append(src)
    return seen


def _check_parts(chain: LayerChain, reader: int, parts: list[int]) -> None:
    last = len(chain.layers) - 1
    if -1 in parts:
        raise _err(
            chain,
            reader,
            "reads a concatenation of the graph input with other tensors: the host writes the "
            "input alone, so no layer can write next to it (a Conv first, then concatenate)",
        )
    if len(set(parts)) != len(parts):
        raise _err(chain, reader, "reads a concatenation that holds one tensor twice")
    if last in parts:
        raise _err(chain, reader, "reads the last layer's output, which goes to the host")
    for j in parts[:-1]:
        channels = chain.layers[j].out_shape[0]
        if channels % 8:
            raise _err(
                chain,
                reader,
                f"reads a concatenation whose part `{chain.layers[j].output}` has {channels} "
                "channels: in Gati's NHW8C8 layout every part but the last needs a multiple of 8",
            )


def _reader(chain: LayerChain, parts: list[int]) -> int:
    return next(i for i in range(len(chain.layers)) if parts in chain.sources_of(i))


def concat_buffers(chain: LayerChain) -> list[list[int]]:
    """The DRAM buffers: each a list of layers whose outputs lie side by side, in channel
    order; every concatenation is a consecutive run of one buffer. Refuses what cannot be
    laid out so, naming the layer that reads it."""
    buffers: list[list[int]] = []
    home: dict[int, int] = {}  # layer -> its buffer
    for parts in concatenations(chain):
        reader = _reader(chain, parts)
        _check_parts(chain, reader, parts)
        placed = {home[j] for j in parts if j in home}
        if not placed:
            for j in parts:
                home[j] = len(buffers)
            buffers.append(list(parts))
            continue
        buf = buffers[placed.pop()] if len(placed) == 1 else None
        if buf is None or not _is_run(buf, parts):
            raise _err(
                chain,
                reader,
                "reads a concatenation whose parts are already laid out in another order for "
                "another concatenation (a tensor has one place in DRAM)",
            )
    return buffers


def _is_run(buf: list[int], parts: list[int]) -> bool:
    if parts[0] not in buf:
        return False
    k = buf.index(parts[0])
    return buf[k : k + len(parts)] == parts
