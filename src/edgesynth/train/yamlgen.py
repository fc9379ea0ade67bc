"""`--yaml-template`: a YAML network description of a model, in the synthesizer's schema.

The model's data flow is traced (torch.fx, each edgesynth.nn layer one step): layers are
written in the order the forward pass runs them, and a layer that does not read the output of
the layer just before it (a residual branch, an element-wise sum) gets `in_sequences`.
Element-wise layers (`Add`, `Sub`, `BitwiseOr`, `BitwiseXor`) become `operation: none` layers
with `eltwise`. Each layer gets its operation, kernel, padding, pooling, activation, flatten and
32-bit output from the module. The placement (`processors`, `output_processors`, `in_offset`,
`out_offset`) is left out: edgesynth's synthesizer chooses it (`edgesynth plan NET.yaml
CHECKPOINT -o PLANNED.yaml` writes it into the YAML for tools that need it written).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from edgesynth.errors import EdgesynthError
from edgesynth.nn.eltwise import Add, BitwiseOr, BitwiseXor, Eltwise, Sub
from edgesynth.nn.layers import Conv1d, ConvTranspose2d, HardwareLayer, Linear
from edgesynth.targets.max7800x.device import get_device

_ACTIVATE = {"relu": "ReLU", "abs": "Abs", None: "None"}


def _pair(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(set(values)) == 1 else f"[{', '.join(map(str, values))}]"


@dataclass
class _Step:
    name: str
    module: nn.Module  # a HardwareLayer or an Eltwise
    sources: list[int]  # indices of the steps it reads; -1: the network input
    eltwise: str | None = None  # an element-wise operation fused before this layer's op


_PASS_METHODS = {"flatten", "view", "reshape", "contiguous", "squeeze", "unsqueeze"}
_ELTWISE_NAMES = {Add: "add", Sub: "sub", BitwiseOr: "or", BitwiseXor: "xor"}


def _copy_shared_operands(steps: list[_Step]) -> list[_Step]:
    """An element-wise layer reads its operands interleaved in memory; a tensor that another
    layer reads as it is gets a passthrough copy for the element-wise layer (the vendor's
    residual networks do the same by hand)."""
    plain = {s for step in steps if not isinstance(step.module, Eltwise) for s in step.sources}
    copied = {
        s
        for step in steps
        if isinstance(step.module, Eltwise)
        for s in step.sources
        if s in plain and s >= 0
    }
    if not copied:
        return steps
    out: list[_Step] = []
    new_index: dict[int, int] = {-1: -1}
    copy_index: dict[int, int] = {}
    for i, step in enumerate(steps):
        eltwise = isinstance(step.module, Eltwise)
        sources = [
            copy_index[s] if eltwise and s in copy_index else new_index[s] for s in step.sources
        ]
        new_index[i] = len(out)
        out.append(_Step(step.name, step.module, sources))
        if i in copied:
            copy_index[i] = len(out)
            out.append(_Step(f"{step.name}_copy", _PASSTHROUGH, [new_index[i]]))
    return out


_PASSTHROUGH = nn.Identity()  # marks a passthrough copy


def _fuse_eltwise(steps: list[_Step]) -> list[_Step]:
    """An element-wise layer read only by the convolution right after it runs in that
    convolution's layer (the chip adds, then pools, then convolves): one layer less."""
    readers: dict[int, list[int]] = {}
    for i, step in enumerate(steps):
        for s in step.sources:
            readers.setdefault(s, []).append(i)
    fused: set[int] = set()
    for i, step in enumerate(steps[:-1]):
        nxt = steps[i + 1]
        if (
            isinstance(step.module, Eltwise)
            and not step.module.wide
            and readers.get(i) == [i + 1]
            and nxt.sources == [i]
            and isinstance(nxt.module, HardwareLayer)
            and nxt.module.op is not None
            and not isinstance(nxt.module, Linear)
        ):
            fused.add(i)
    if not fused:
        return steps
    new_index: dict[int, int] = {-1: -1}
    out: list[_Step] = []
    for i, step in enumerate(steps):
        if i in fused:
            continue
        if i - 1 in fused:
            before = steps[i - 1]
            sources = [new_index[s] for s in before.sources]
            out.append(_Step(step.name, step.module, sources, _ELTWISE_NAMES[type(before.module)]))
        else:
            out.append(_Step(step.name, step.module, [new_index[s] for s in step.sources]))
        new_index[i] = len(out) - 1
        if i - 1 in fused:
            new_index[i - 1] = new_index[i]
    return out


def _steps(model: nn.Module) -> list[_Step]:
    """The model's layers in the order its forward pass runs them, with what each reads."""
    import torch.fx

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
            return isinstance(m, HardwareLayer | Eltwise) or super().is_leaf_module(m, qualname)

    try:
        graph = Tracer().trace(model)
    except Exception as err:  # fx raises many kinds for code it cannot follow
        raise EdgesynthError(
            f"cannot follow the model's forward pass to describe it ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}); write its YAML by hand."
        ) from None
    modules = dict(model.named_modules())
    produced: dict[str, int] = {}  # fx node name -> step index (-1: the input)
    steps: list[_Step] = []
    for node in graph.nodes:
        if node.op == "placeholder":
            produced[node.name] = -1
            continue
        inputs = [a for a in node.all_input_nodes if a.name in produced]
        target = modules.get(str(node.target)) if node.op == "call_module" else None
        if isinstance(target, HardwareLayer | Eltwise):
            sources = [produced[a.name] for a in inputs]
            produced[node.name] = len(steps)
            steps.append(_Step(str(node.target), target, sources))
        elif len(inputs) == 1 and (
            node.op == "call_module"  # dropout and other modules the chip does not see
            or (node.op == "call_method" and node.target in _PASS_METHODS)
            or (node.op == "call_function" and getattr(node.target, "__name__", "") == "flatten")
        ):
            produced[node.name] = produced[inputs[0].name]
        elif node.op != "output" and inputs:
            raise EdgesynthError(
                f"the model computes `{node.target}` outside edgesynth.nn layers; the chip "
                "cannot run that. Use edgesynth.nn layers (or write the YAML by hand)."
            )
    if not steps:
        raise EdgesynthError("the model has no edgesynth.nn layers to describe.")
    steps = _fuse_eltwise(_copy_shared_operands(steps))
    weighted = [s.name for s in steps if isinstance(s.module, HardwareLayer) and s.module.op]
    defined = [
        n for n, m in model.named_modules() if isinstance(m, HardwareLayer) and m.op is not None
    ]
    if weighted != [n for n in defined if n in weighted]:
        raise EdgesynthError(
            "the model runs its weighted layers in another order than it defines them "
            f"({', '.join(weighted)}); the checkpoint lists them in definition order, so "
            "define them in the order forward() runs them."
        )
    return steps


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
    for i, step in enumerate(_steps(model)):
        name, layer = step.name, step.module
        entry: list[str] = [f"name: {name}"]
        if i == 0:
            entry.append("data_format: HWC")
        if step.sources != [i - 1]:
            if -1 in step.sources:
                raise EdgesynthError(
                    f"layer `{name}` reads the network input again; write the YAML by hand."
                )
            entry.append(f"in_sequences: [{', '.join(map(str, step.sources))}]")
        if layer is _PASSTHROUGH:
            entry.append("operation: none")
            lines.append("  - " + entry[0])
            lines.extend("    " + e for e in entry[1:])
            continue
        if isinstance(layer, Eltwise):
            entry.append("operation: none")
            entry.append(f"eltwise: {_ELTWISE_NAMES[type(layer)]}")
            entry.append("activate: None")
            lines.append("  - " + entry[0])
            lines.extend("    " + e for e in entry[1:])
            continue
        if step.eltwise:
            entry.append(f"eltwise: {step.eltwise}")
            if layer.pooling:
                entry.append("pool_first: false")  # the sum is pooled, as the model does
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


def write_yaml_template(path: Path, text: str, *, overwrite: bool = False) -> Path:
    """Write `text` to `path` atomically (never half a file; umask permissions); an existing
    file only with `overwrite`."""
    from edgesynth.outputs import write_file_atomic

    return write_file_atomic(path, text, overwrite=overwrite, option="--yaml-template")
