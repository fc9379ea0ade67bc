"""`--yaml-template`: a YAML network description of a model, in the synthesizer's schema.

The model's edgesynth.nn layers are taken in the order they were defined (the order the
vendor's models run them in; models with branches need their YAML written by hand). Each
layer gets its operation, kernel, padding, pooling, activation, flatten and 32-bit output from
the module. The placement (`processors`, `output_processors`, `in_offset`, `out_offset`) is left
out: edgesynth's synthesizer chooses it (`edgesynth plan NET.yaml CHECKPOINT -o PLANNED.yaml`
writes it into the YAML for tools that need it written).
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn.layers import Conv1d, ConvTranspose2d, HardwareLayer, Linear
from edgesynth.targets.max7800x.device import get_device

_ACTIVATE = {"relu": "ReLU", "abs": "Abs", None: "None"}


def _pair(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(set(values)) == 1 else f"[{', '.join(map(str, values))}]"


def _layers(model: nn.Module) -> list[tuple[str, HardwareLayer]]:
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, HardwareLayer)]
    if not layers:
        raise EdgesynthError("the model has no edgesynth.nn layers to describe.")
    return layers


def yaml_template(
    model: nn.Module, *, arch: str, dataset: str, input_channels: int, device: str = "MAX78000"
) -> str:
    dev = get_device(device)
    lines = [
        "---",
        f"# {arch} for {dev.name}: written by `edgesynth train --yaml-template`.",
        "# edgesynth chooses processors and memory offsets; `edgesynth plan` writes them out.",
        "",
        f"arch: {arch}",
        f"dataset: {dataset}",
        "",
        "layers:",
    ]
    spatial = True
    for i, (name, layer) in enumerate(_layers(model)):
        entry: list[str] = [f"name: {name}"]
        if i == 0:
            entry.append("data_format: HWC")
        if layer.pooling:
            key = "max_pool" if layer.pooling == "max" else "avg_pool"
            entry.append(f"{key}: {_pair(layer.pool_size)}")
            entry.append(f"pool_stride: {_pair(layer.pool_stride)}")
            if any(d > 1 for d in layer.pool_dilation):
                entry.append(f"pool_dilation: {_pair(layer.pool_dilation)}")
        op = layer.op
        if op is None:
            entry.append("operation: none")
        elif isinstance(layer, Linear):
            entry.append("operation: mlp")
            if spatial:
                entry.append("flatten: true")
            spatial = False
        else:
            kind = (
                "conv1d"
                if isinstance(layer, Conv1d)
                else "convtranspose2d"
                if isinstance(layer, ConvTranspose2d)
                else "conv2d"
            )
            entry.append(f"operation: {kind}")
            ks = tuple(op.kernel_size)
            entry.append(f"kernel_size: {ks[0] if kind == 'conv1d' else 'x'.join(map(str, ks))}")
            entry.append(f"pad: {_pair(tuple(op.padding))}")
            if kind != "convtranspose2d" and any(s > 1 for s in op.stride):
                entry.append(f"stride: {_pair(tuple(op.stride))}")
            if any(d > 1 for d in op.dilation):
                entry.append(f"dilation: {_pair(tuple(op.dilation))}")
            if op.groups > 1:
                entry.append(f"groups: {op.groups}")
        entry.append(f"activate: {_ACTIVATE[layer.activation]}")
        if layer.wide:
            entry.append("output_width: 32")
        lines.append("  - " + entry[0])
        lines.extend("    " + e for e in entry[1:])
    return "\n".join(lines) + "\n"


def write_yaml_template(path: Path, text: str) -> Path:
    """Write `text` to `path` atomically (never half a file; umask permissions)."""
    from edgesynth.outputs import write_file_atomic

    return write_file_atomic(path, text, option="--yaml-template")
