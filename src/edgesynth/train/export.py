"""`edgesynth export`: a trained edgesynth.nn model as an ONNX model.

Float (the default): the float network PyTorch trains (pooling, convolution, batch-norm, the
chip's output range [-1, 127/128] as a Clip, ReLU), without quantization: the model every
target's compile quantizes on its own terms. A checkpoint trained with QAT exports its float
weights; a quantized ("-q") checkpoint holds the chip's integers and is refused.

8-bit (`--8-bit`): a quantized checkpoint in the chip's integer arithmetic (the layers' 8-bit
mode traced: rounding, shifts and clamps as ONNX operators), taking the chip's input integers
-128..127 (as floats) and giving the chip's output integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn import functional as hw
from edgesynth.nn.base import QUANTIZED, HardwareLayer


def float_model(net: nn.Module, source: str) -> nn.Module:
    """`net` with every hardware layer in float mode (QAT machinery off), for export; a
    layer trained with binary weights keeps them (sign(w) * 2^shift): its float weights alone
    are not what it learned."""
    for name, layer in net.named_modules():
        if not isinstance(layer, HardwareLayer):
            continue
        if layer.state == QUANTIZED:
            raise EdgesynthError(
                f"{source}: layer `{name}` holds quantized integers (a -q checkpoint); export "
                "the trained checkpoint before quantization (e.g. qat_best.pth.tar)"
            )
        if layer.op is not None and layer.mode().bits == hw.BINARY:
            w = layer.op.weight.data
            w.copy_(hw.binarize(w) * hw.pow2(hw.binary_shift_for(w)))
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


def check_export(
    net: nn.Module, path: Path, sample_shape: tuple[int, ...], *, integers: bool = False
) -> float:
    """The largest difference between ONNX Runtime and PyTorch on random inputs (with
    `integers`: the chip's input integers -128..127)."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    if integers:
        x = rng.integers(-128, 128, (8, *sample_shape)).astype(np.float32)
    else:
        x = rng.uniform(-1, 127 / 128, (4, *sample_shape)).astype(np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    return float(np.abs(got - want.reshape(got.shape)).max())


# --- `edgesynth export` ---------------------------------------------------------------------


@dataclass(frozen=True)
class ExportRequest:
    checkpoint: Path
    output: Path
    model: str | None = None  # a built-in architecture (default: the checkpoint's `arch`)
    model_file: str | None = None  # or the user's class, FILE.py:CLASS
    model_args: str | None = None
    eight_bit: bool = False
    device: str = "MAX78000"
    input_shape: tuple[int, ...] | None = None  # C,H,W or C,L (default: the checkpoint's)
    overwrite: bool = False


@dataclass(frozen=True)
class ExportReport:
    path: Path
    arch: str
    input_shape: tuple[int, ...]
    num_classes: int
    diff: float  # ONNX Runtime against PyTorch, largest difference on random inputs
    inexact: tuple[str, ...] = ()  # 8-bit: layers whose sums may pass float32's exact range


class _EightBit(nn.Module):
    """The network in the chip's arithmetic: integer inputs in, the chip's integers out."""

    def __init__(self, net: nn.Module, device: str) -> None:
        super().__init__()
        self.net = net
        self.device = device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import edgesynth.nn as enn

        with enn.use(self.device, simulate=True):
            return self.net(x.double()).float()


def export_checkpoint(req: ExportRequest) -> ExportReport:
    """Check, build, export through a staging file, and compare ONNX Runtime with PyTorch."""
    from edgesynth.outputs import check_output_file, write_file_atomic
    from edgesynth.quant.checkpoint import read_checkpoint

    inputs = [req.checkpoint, req.model_file.rpartition(":")[0] if req.model_file else None]
    check_output_file(req.output, overwrite=req.overwrite, inputs=inputs, option="--output")
    ck = read_checkpoint(req.checkpoint)
    shape = _input_shape(req, ck)
    net, arch = _build(req, ck, shape)
    if req.eight_bit:
        _require_quantized(net, str(req.checkpoint))
        model: nn.Module = _EightBit(net.eval(), req.device).eval()
    else:
        model = float_model(net, str(req.checkpoint))
    data = onnx_bytes(model, shape)
    path = write_file_atomic(req.output, data, overwrite=req.overwrite, inputs=inputs)
    diff = check_export(model, path, shape, integers=req.eight_bit)
    classes = int(np.prod(_output_shape(model, shape)))
    inexact = float32_risks(net) if req.eight_bit else ()
    return ExportReport(path, arch, shape, classes, diff, inexact)


def _input_shape(req: ExportRequest, ck: dict) -> tuple[int, ...]:
    if req.input_shape is not None:
        return req.input_shape
    recorded = (ck.get("extras") or {}).get("input_shape")
    if not recorded:
        raise EdgesynthError(
            "the checkpoint does not record its input shape; give it with --input-shape C,H,W.",
            file=str(req.checkpoint),
        )
    return tuple(int(v) for v in recorded)


def _build(req: ExportRequest, ck: dict, shape: tuple[int, ...]) -> tuple[nn.Module, str]:
    from edgesynth.train.evaluate import model_for_checkpoint, model_for_user
    from edgesynth.train.usermodel import user_model

    if req.model_file is not None and req.model is not None:
        raise EdgesynthError("give --model or --model-file, not both.", key="--model-file")
    user = user_model(req.model_file, req.model_args)
    source = str(req.checkpoint)
    if user is not None:
        return model_for_user(user, ck, shape, req.device, source=source), user.name
    return model_for_checkpoint(
        ck, sample_shape=shape, device=req.device, model=req.model, source=source
    )


def _require_quantized(net: nn.Module, source: str) -> None:
    states = {layer.state for layer in net.modules() if isinstance(layer, HardwareLayer)}
    if states != {QUANTIZED}:
        raise EdgesynthError(
            "--8-bit exports a quantized checkpoint (the chip's integers): quantize this one "
            "first (`edgesynth quantize`), or take the run's qat_best-q.pth.tar.",
            file=source,
        )


def float32_risks(net: nn.Module) -> tuple[str, ...]:
    """Layers whose integer sums could reach 2^24 (largest inputs, largest weights): the
    exported 8-bit graph adds in float32, exact only below that."""
    from edgesynth.nn import functional as hw

    risky = []
    for name, layer in net.named_modules():
        op = getattr(layer, "op", None)
        if not isinstance(layer, HardwareLayer) or op is None:
            continue
        w = op.weight.detach().double().abs()
        if isinstance(op, nn.ConvTranspose2d):  # (in, out/groups, kh, kw)
            per_output = w.sum(dim=(0, 2, 3))
        else:
            per_output = w.reshape(w.shape[0], -1).sum(dim=1)
        bound = float(per_output.max()) * hw.ACT_SCALE
        if op.bias is not None:
            bound += float(op.bias.detach().abs().max()) * hw.ACT_SCALE
        if bound >= hw.FLOAT32_EXACT:
            risky.append(name)
    return tuple(risky)


def _register_symbolics() -> None:
    """What the 8-bit layers use that ONNX lacks: a truncating division (written as
    sign(x) * floor(|x|)) and sum pooling (average pooling with `divisor_override`, which
    PyTorch's exporter drops: written as AveragePool times the window, rounded back to the
    integer sum it is)."""
    from torch.onnx import register_custom_op_symbolic
    from torch.onnx import symbolic_helper as sym

    def trunc(g: Any, x: Any) -> Any:
        return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Abs", x)))

    def avg_pool2d(g: Any, x: Any, kernel: Any, stride: Any, padding: Any, ceil: Any,
                   include_pad: Any, divisor: Any) -> Any:  # fmt: skip
        k = list(sym._get_const(kernel, "is", "kernel_size"))
        s = list(sym._get_const(stride, "is", "stride")) or k
        p = list(sym._get_const(padding, "is", "padding"))
        pooled = g.op(
            "AveragePool",
            x,
            kernel_shape_i=k,
            strides_i=s,
            pads_i=p + p,
            ceil_mode_i=int(sym._get_const(ceil, "i", "ceil_mode")),
            count_include_pad_i=int(sym._get_const(include_pad, "i", "count_include_pad")),
        )
        if sym._is_none(divisor):
            return pooled
        area = g.op("Constant", value_t=torch.tensor(float(np.prod(k))))
        total = g.op("Round", g.op("Mul", pooled, area))
        by = g.op("Constant", value_t=torch.tensor(float(sym._get_const(divisor, "i", "div"))))
        return g.op("Div", total, by)

    register_custom_op_symbolic("aten::trunc", trunc, 13)
    register_custom_op_symbolic("aten::avg_pool2d", avg_pool2d, 13)


def onnx_bytes(net: nn.Module, sample_shape: tuple[int, ...]) -> bytes:
    """`net` as ONNX (dynamic batch axis), in memory: the file is then written atomically."""
    import io
    import warnings

    _register_symbolics()
    buffer = io.BytesIO()
    dummy = torch.zeros((1, *sample_shape), dtype=torch.float32)
    with torch.no_grad(), warnings.catch_warnings():
        # the layers read their settings (bits, shifts) as Python numbers: constants of the
        # exported graph, which is what they are
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(
            net,
            (dummy,),
            buffer,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            opset_version=13,
            dynamo=False,
        )
    return buffer.getvalue()


def _output_shape(net: nn.Module, shape: tuple[int, ...]) -> tuple[int, ...]:
    with torch.no_grad():
        return tuple(net(torch.zeros((1, *shape))).shape[1:])
