"""`edgesynth export`: a trained edgesynth.nn model as a float ONNX model.

The exported model is the float network PyTorch trains (pooling, convolution, batch-norm, the
chip's output range [-1, 127/128] as a Clip, ReLU), without quantization: the model every
target's compile quantizes on its own terms. A checkpoint trained with QAT exports its float
weights; a quantized ("-q") checkpoint holds the chip's integers and is refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn.base import QUANTIZED, HardwareLayer


def float_model(net: nn.Module, source: str) -> nn.Module:
    """`net` with every hardware layer in float mode (QAT machinery off), for export."""
    for name, layer in net.named_modules():
        if not isinstance(layer, HardwareLayer):
            continue
        if layer.state == QUANTIZED:
            raise EdgesynthError(
                f"{source}: layer `{name}` holds quantized integers (a -q checkpoint); export "
                "the trained checkpoint before quantization (e.g. qat_best.pth.tar)"
            )
        layer.weight_bits.fill_(0.0)
        layer.bias_bits.fill_(0.0)
        layer.quantize_activation.fill_(0.0)
        layer.adjust_output_shift.fill_(0.0)
    return net.eval()


def export_onnx(net: nn.Module, sample_shape: tuple[int, ...], path: Path) -> None:
    """Write `net` (float mode) as ONNX with a dynamic batch axis; `path` is a staging name."""
    dummy = torch.zeros((1, *sample_shape), dtype=torch.float32)
    with torch.no_grad():
        torch.onnx.export(
            net,
            (dummy,),
            str(path),
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            opset_version=13,
            dynamo=False,
        )


def check_export(net: nn.Module, path: Path, sample_shape: tuple[int, ...]) -> float:
    """The largest difference between ONNX Runtime and PyTorch on random inputs."""
    import onnxruntime as ort

    x = np.random.default_rng(0).uniform(-1, 127 / 128, (4, *sample_shape)).astype(np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    return float(np.abs(got - want.reshape(got.shape)).max())
