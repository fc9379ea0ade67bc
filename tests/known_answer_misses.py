"""The corpus cases whose vendor project misses its own known answer on the virtual device
(`edgesynth device run` on the vendor's layout), with the first failing layer and the hazard
`edgesynth izer` names when it refuses to write them (pass --no-verify to get the vendor's
project). Every other `expect: ok` case reproduces its known answer."""

from __future__ import annotations

FAST_FIFO = (
    "layer 0 is the first to compute wrong values: layer 0's input is never written in full: "
    "processor 16 reads its input from the fast FIFO and gets only zero bytes"
)

# case id -> what the refusal must say
MISSES_KNOWN_ANSWER: dict[str, str] = {
    "MAX78000/test-fifostream-group-notvga64x48-hwc": FAST_FIFO,
    "MAX78002/test-fifostream-group-notvga64x48-hwc": FAST_FIFO,
    "MAX78002/test-ffsx4-cifar10-hwc": (
        "layer 0 is the first to compute wrong values: layer 3's calcx4 kernels are written "
        "over layer 0's kernels"
    ),
    "MAX78002/test-ffsx4readahead-cifar10-hwc": (
        "layer 0 is the first to compute wrong values: layer 3's calcx4 kernels are written "
        "over layer 0's kernels"
    ),
    "MAX78002/test-ffsx4readahead-nopad-multipass5-w8": (
        "layer 1 is the first to compute wrong values: layer 0's kernels are written over "
        "layer 1's calcx4 kernels"
    ),
    "MAX78002/test-fifostream-x4-cifar-hwc": (
        "layer 0 is the first to compute wrong values: layer 2's calcx4 kernels are written "
        "over layer 0's kernels"
    ),
    "MAX78002/test-fifostream-x4-cifar-hwc-128x128": (
        "layer 0 is the first to compute wrong values: layer 2's calcx4 kernels are written "
        "over layer 0's kernels"
    ),
}
