"""How the vendor tool lays a layer's kernels out in the columns of kernel memory.

The hardware only needs each kernel at the column its output processor and pass select; the
vendor tool's packing decides the rest, and the generated loader writes exactly that image. Each
function below is one of its choices, reproduced so the kernel writes match write for write.
"""

from __future__ import annotations

import numpy as np

from edgesynth.lean_dataclass import dataclass


def initial_padding_bytes(leftover_bytes: int, qfactor: int) -> int:
    """Zero bytes written before the first kernel when the first output processor is not the
    first of its memory instance.

    The vendor skips `start_col * kernel_bytes * passes` bytes: whole columns are skipped, the
    leftover bytes are divided by the packing factor and written as zeros (so sub-8-bit layers
    pad less than the leftover). Proved by MAX78000/test-conv1d-pool-* (unaligned outputs).
    """
    return leftover_bytes // qfactor


def pad_bytes_when_no_input(kernel_bytes: int, qfactor: int) -> int:
    """Zero bytes written for an input channel a pass does not have (the last, partial pass).

    The vendor writes `kernel_bytes // q` zeros rather than a whole kernel. Proved by the
    multi-pass cases with sub-8-bit weights (MAX78000/test-chan1024-1024, quantization 4).
    """
    return kernel_bytes // qfactor


def unit_has_input(unit: np.ndarray, channel: np.ndarray, thresh: int, in_chan: int) -> np.ndarray:
    """Whether the vendor writes byte group `unit` of processor `channel`'s kernels for a slot
    (otherwise `pad_bytes_when_no_input` zeros): it tests the input channel of pass `unit`.

    With 8-bit weights a group is one kernel, that of pass `unit`, and the test is right. With
    q = 8 / bits > 1 a group packs q kernels of the sequence (output channel, pass), passes
    fastest, so group `unit` holds other passes (and other output channels) than `unit`: where
    the last pass is partial (input channels not a multiple of the passes' processors), the
    vendor drops real kernels of earlier passes and shortens the processor's stream, so every
    later kernel of that processor lands where the mask counter does not read it. Its firmware
    then misses its known answer (e.g. a 100 -> 100 channel 1x1 convolution with 2-bit
    weights: 454 of 500 words on the virtual MAX78000); edgesynth's own path tests every
    kernel's pass and writes whole groups (plan/kernels.py). Harmless in the corpus cases
    (MAX78000/test-widein-q2 etc.: one output channel, so the dropped groups hold no kernel).
    """
    return unit * thresh + channel < in_chan


@dataclass(frozen=True)
class Slots:
    """The output slots of one processor's byte stream, the same for every processor.

    A slot is one kernel position in the output map (q output channels for q = 8/bits). The
    vendor steps through the output processor map q bits at a time; where all q bits are clear
    it advances the column without writing ("skips"), so every gap in the output map leaves an
    empty column (and ends the partially filled one). `skips[s]` counts the skips before slot
    `s`; `m[s]` is the first output channel of slot `s` as the vendor counts it.
    """

    skips: np.ndarray
    m: np.ndarray


def output_slots(
    out_map: int, qfactor: int, threshold: int, passes: int, flatten: bool, depthwise: bool
) -> Slots:
    """Walk the output map like the vendor: per output pass, q map bits per slot.

    Proved by the layers with gaps in their output processor maps (e.g. MAX78000/mnist, whose
    first layer writes to processors 4-63: its kernels start at processor column 4 of 4).
    """
    low = out_map & -out_map
    start = out_map >> (low.bit_length() - 1) if out_map else 0
    pmask = (1 << qfactor) - 1
    step = 1 if flatten else qfactor
    skips: list[int] = []
    for expand in range(1 if depthwise else passes):
        this_map = start
        col = expand if depthwise else expand * threshold
        stop = col + 1 if depthwise else col + threshold
        while col < stop:
            skipped = 0
            if this_map:
                while this_map & pmask == 0:
                    skipped += 1
                    this_map >>= qfactor
            this_map >>= qfactor
            skips.append(skipped)
            col += step
    count = len(skips)
    m = np.arange(count, dtype=np.int64) * (1 if flatten else qfactor)
    return Slots(skips=np.asarray(skips, dtype=np.int64), m=m)


def flatten_rows(
    kernel: np.ndarray, out_channels: int, in_expand: int, threshold: int, kernel_size: int
) -> tuple[np.ndarray, int]:
    """A flattened layer's kernel rows: one row per (output channel, input processor).

    The vendor regroups the weights so that the rows of one output channel hold, for each
    input processor, that processor's pixels (and passes) in order. Returns the rows (flattened
    to bytes per row) and the number of kernels per row. Proved by MAX78000/mnist (layer 4).
    """
    per = kernel.reshape(out_channels, in_expand, -1).swapaxes(1, 2)
    rows = per.reshape(out_channels * threshold, -1, kernel_size)
    return rows.reshape(rows.shape[0], -1), rows.shape[1]
