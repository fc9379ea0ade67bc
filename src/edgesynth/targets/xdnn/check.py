"""Every rule an xDNN program must meet, in the network's terms (ONNX node names)."""

from __future__ import annotations

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.lower import Lowered


def check(low: Lowered, engine: dev.Engine) -> list[EdgesynthError]:
    errors: list[EdgesynthError] = []

    def bad(name: str, message: str) -> None:
        errors.append(EdgesynthError(f"node `{name}`: {message}"))

    for lay in low.layers:
        for label, shape in (("input", lay.in_shape), ("output", lay.out_shape)):
            c, h, w = shape
            if max(h, w) > dev.MAX_IMAGE_WH or c > dev.MAX_IMAGE_DEPTH:
                bad(
                    lay.name,
                    f"{label} {c}x{h}x{w} exceeds the engine's images (width and "
                    f"height up to {dev.MAX_IMAGE_WH}, depth up to "
                    f"{dev.MAX_IMAGE_DEPTH})",
                )
        if lay.op in ("XNConv", "XNMaxPool", "XNAvgPool"):
            for label, pair, lo, hi in (
                ("kernel", lay.kernel, 1, dev.MAX_KERNEL),
                ("stride", lay.stride, 1, dev.MAX_STRIDE),
                ("padding", lay.pad, 0, dev.MAX_PAD),
                ("dilation", lay.dilation, 1, dev.MAX_DILATION),
            ):
                if not all(lo <= v <= hi for v in pair):
                    what = "a fully-connected layer's input" if lay.fc else label
                    extra = (
                        (
                            " (it runs as a convolution over the whole input; such a layer "
                            "runs on the host instead)"
                        )
                        if lay.fc
                        else ""
                    )
                    bad(lay.name, f"{what} {pair[0]}x{pair[1]} is outside {lo}..{hi}{extra}")
        if lay.op == "XNConv":
            assert lay.pre is not None and lay.scale is not None and lay.post is not None
            assert lay.bias is not None
            for label, arr, lo, hi in (
                ("pre-shift", lay.pre, 0, dev.PRESHIFT_MAX),
                ("scale", lay.scale, 0, dev.SCALE_MAX),
                ("post-shift", lay.post, 0, dev.POSTSHIFT_MAX),
                ("bias", lay.bias, dev.BIAS_MIN, dev.BIAS_MAX),
            ):
                if arr.min() < lo or arr.max() > hi:
                    bad(
                        lay.name,
                        f"{label} {int(arr.min())}..{int(arr.max())} does not fit its "
                        f"field ({lo}..{hi})",
                    )
    return errors
