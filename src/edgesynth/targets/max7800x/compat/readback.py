"""How the vendor tool reads a network's output back from data memory.

The accelerator only writes words; which of them form "the output tensor" (and in which shape)
is the vendor tool's convention, visible in its known-answer check (sampleoutput.h). The virtual
device uses these functions to read back `expected_output.npy` the way the vendor defines it.
"""

from __future__ import annotations

import numpy as np


def dilated_conv1d_window(covered: np.ndarray) -> slice | None:
    """The output samples of a dilated Conv1d that the vendor runs on the 2-D engine.

    For `dilation` d > 1 with kernels of 3 or fewer taps, the vendor lays the L input samples
    out as a ceil(L/d) x d image, convolves with 3x3 kernels (the taps in the middle column) and
    pad 1, and points the write pointer `d` pixels before the output offset for a 3-tap kernel:
    the first row of the 2-D result, and the pixels past L, are not part of the output. Its
    known answer checks exactly the L output samples, so when every channel's checked pixels
    form the same contiguous run that is not the whole frame, that run is the 1-D output.
    `covered` is (channels, pixels) bool: the pixels whose words the check covers.
    Proved by MAX78000/test-conv1d-dilation7-pad0 (31 x 7 frame, samples 7..203).
    """
    if covered.size == 0 or not covered.any() or not (covered == covered[:1]).all():
        return None
    pixels = np.flatnonzero(covered[0])
    start, stop = int(pixels[0]), int(pixels[-1]) + 1
    if pixels.size != stop - start or pixels.size == covered.shape[1]:
        return None
    return slice(start, stop)


def emulated_multipass_eltwise(
    values: np.ndarray, passes: int, shape: tuple[int, int]
) -> np.ndarray:
    """The output of an element-wise layer the vendor runs as a single-pass passthrough.

    On MAX78000 the vendor emulates a multi-pass element-wise operation whose pass and operand
    counts it cannot combine by telling the hardware the frame has `passes` times as many rows:
    the hardware processes and writes word x * passes + k, which is pass k of pixel x of the
    producers' frame. The network's output is channel k x processors + p of that frame.
    `values`: (processors, hardware pixels); `shape`: the producers' rows and columns.
    Proved by MAX78000/test-mpadd-256 (64 processors x 20 x 7 in hardware, 256 x 5 x 7).
    """
    processors = values.shape[0]
    per_pass = values.reshape(processors, shape[0] * shape[1], passes)
    return per_pass.transpose(2, 0, 1).reshape(passes * processors, *shape)
