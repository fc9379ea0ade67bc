"""Where the vendor's kernel allocator puts a calcx4 layer's kernels (MAX78002)."""

from __future__ import annotations


def unchecked_calcx4_offset(first_free: int, after_plain_layer: bool) -> int:
    """The vendor's kernel offset for a calcx4 layer, kept without checking the columns the
    kernels are written to; taken by `edgesynth izer` alone (write for write).

    The vendor's allocator books every layer in one column space, but a calcx4 layer's kernels
    are written to the four quarters of each processor's kernel memory (booked column `k` of a
    layer booked from `start`: quarter `(k - start) // n` at `start // 4 + (k - start) % n`,
    n = a quarter of its kernels), so they are checked against the other layers only where
    they are booked. After a layer without calcx4 it multiplies the first free booked column by
    4 (its work-around); after a calcx4 layer it takes that column as is. When a quarter holds
    another layer's kernels the generated firmware writes over them: proved by
    MAX78002/test-ffsx4-cifar10-hwc (layer 3's kernels, booked at column 16, are written to
    words 4-6 of each quarter, over layer 0's in processors 16, 32 and 48; the known answer
    misses 48 of 48 words on the virtual device), and likewise test-ffsx4readahead-cifar10-hwc,
    test-ffsx4readahead-nopad-multipass5-w8 and test-fifostream-x4-cifar-hwc(-128x128).
    edgesynth's own path (`synth`, `compile`, `plan`) keeps this offset only where the columns
    written are free, and otherwise takes the lowest offset where they are
    (plan/kernels.py).
    """
    return first_free * 4 if after_plain_layer else first_free
