"""How the vendor's generated load_input() packs HWC channels into the FIFOs' words."""

from __future__ import annotations

import numpy as np


def quadrant_packed_lanes(channels: np.ndarray, processor_map: int, per_group: int) -> np.ndarray:
    """(FIFOs, pixels, 4) bytes: the vendor's HWC packing, taken by `edgesynth izer` alone.

    `channels` is (C, pixels) bytes. The vendor takes the channels four at a time, one FIFO per
    used quadrant in turn: block `c // 4` goes to the next quadrant whose first four processors
    are used, channel `c + b` to byte `b` where that quadrant's processor `b` is used. This is
    right when each used quadrant takes four consecutive channels on its first processors; with
    one channel per quadrant only channel 0 is loaded. Proved by
    test-fifostream-group-notvga64x48-hwc (both chips, `--fast-fifo`, processors 0, 16 and
    32): processors 16 and 32 receive only zero bytes, and the known answer misses 15 of 24
    words on the virtual device. edgesynth's own path (`synth`, `compile`, `plan`) gives each
    channel the byte of the processor that reads it (plan/inputs.py).
    """
    chans = channels.shape[0]
    count = (chans + 3) // 4
    lanes = np.zeros((count, channels.shape[1], 4), dtype=np.int64)
    bits = 0
    fifo = 0
    for c in range(0, chans, 4):
        if bits == 0:
            bits, fifo = processor_map, 0
        while bits & 0x0F == 0:
            bits >>= per_group
            fifo += 1
        for b in range(4):
            if bits & 1 and c + b < chans:
                lanes[fifo, :, b] = channels[c + b]
            bits >>= 1
        bits >>= per_group - 4
        fifo += 1
    return lanes
