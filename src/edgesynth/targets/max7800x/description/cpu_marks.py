"""edgesynth's own YAML key `cpu: true`: the layers so marked run on the chip's Cortex-M4, not
on the CNN accelerator (`edgesynth synth`; the vendor's tool has no such key).

The marked layers are a trailing run of the file's layers, executed one after the other, each
reading the one before it: the accelerator runs the layers before them (as `--stop-after` the
last unmarked layer would) and the Cortex-M4 the rest, from the accelerator's output
(`cpu/from_layers.py` lowers them to the CPU part's integer layers, bit-exact). A marked layer
is a convolution (`conv2d`), a linear layer (`mlp`/`linear`, flattened or not) or a
passthrough, each with optional in-flight max pooling before it and a ReLU after it; the last
may have a 32-bit output (`output_width: 32`, no activation). Anything else is refused here,
naming the file, line, layer and key.
"""

from __future__ import annotations

from edgesynth.errors import EdgesynthError, MultipleErrors
from edgesynth.targets.max7800x.description.layer_config import layer_error
from edgesynth.targets.max7800x.description.spec import LayerSpec, NetworkSpec

KEY = "cpu"
CPU_LAYERS = (
    "conv2d, linear (mlp/fc, flattened or not) and passthrough layers, with an optional "
    "max_pool/pool_stride before and ReLU after (output_width: 32 on the last, without "
    "activation)"
)
# Keys a marked layer may not give, and why (the Cortex-M4 part reads one tensor, the layer
# before it, and computes the layer's arithmetic; placement keys are ignored)
_REFUSED = {
    "avg_pool": "average pooling (the accelerator truncates the average; the Cortex-M4 part "
    "rounds it) is not supported on the Cortex-M4 yet",
    "pool_dilation": "pool_dilation is not supported on the Cortex-M4 yet",
    "eltwise": "element-wise operations are not supported on the Cortex-M4 yet",
    "operands": "element-wise operations are not supported on the Cortex-M4 yet",
    "in_sequences": "the Cortex-M4 part reads the layer before it only; in_sequences is not "
    "supported there",
    "next_sequence": "the Cortex-M4 part runs its layers in file order; next_sequence is not "
    "supported there",
    "sequence": "the Cortex-M4 part runs its layers in file order; sequence is not supported there",
    "simulated_sequence": "not supported on the Cortex-M4",
    "in_crop": "in_crop is not supported on the Cortex-M4 yet",
    "buffer_shift": "data buffers are not supported on the Cortex-M4",
    "buffer_insert": "data buffers are not supported on the Cortex-M4",
    "bypass": "bypass is not supported on the Cortex-M4",
    "weight_source": "weight_source is not supported on the Cortex-M4 yet",
}


def marked(spec: NetworkSpec) -> list[LayerSpec]:
    """The layers marked `cpu: true`, in file order."""
    return [ls for ls in spec.layers if ls.cpu]


def refuse_marks(spec: NetworkSpec, command: str) -> None:
    """`cpu: true` where the command reads the vendor's keys only (`izer`, `compile`, ...)."""
    found = marked(spec)
    if found:
        raise layer_error(
            spec,
            found[0],
            KEY,
            f"`cpu: true` is edgesynth's own key (the layer runs on the Cortex-M4), which the "
            f"vendor's tool does not have; {command} reads the vendor's keys only: write the "
            "project with `edgesynth synth NET.yaml CHECKPOINT -o OUT`, or remove the key",
        )


def cpu_run(spec: NetworkSpec) -> int | None:
    """The index of the first layer of the trailing run marked `cpu: true` (None: no layer is
    marked); a mark that is not part of a trailing run, or a marked layer the Cortex-M4 part
    cannot run, is refused naming its line and key."""
    found = marked(spec)
    if not found:
        return None
    first = found[0]
    after = next((ls for ls in spec.layers[first.index :] if not ls.cpu), None)
    if after is not None:
        raise layer_error(
            spec,
            first,
            KEY,
            f"`cpu: true` marks a trailing run of layers, but layer {after.index} after it (line "
            f"{after.line}) runs on the accelerator: mark every layer from here to the last "
            "(the Cortex-M4 runs the end of the network)",
        )
    if first.index == 0:
        raise layer_error(
            spec,
            first,
            KEY,
            "every layer is marked `cpu: true`: the accelerator runs at least the first layer "
            "(`edgesynth compile MODEL.onnx --cpu-only` runs a whole network on the Cortex-M4)",
        )
    problems = [p for ls in found for p in _layer_problems(spec, ls, ls is found[-1])]
    previous = spec.layers[first.index - 1]
    if previous.output_width == 32:
        problems.append(
            layer_error(
                spec,
                previous,
                "output_width",
                "the last layer on the accelerator feeds the Cortex-M4 part 8-bit data: "
                "output_width must be 8 here (32 is allowed on the last layer only)",
            )
        )
    if problems:
        raise problems[0] if len(problems) == 1 else MultipleErrors(problems)
    return first.index


def _layer_problems(spec: NetworkSpec, ls: LayerSpec, last: bool) -> list[EdgesynthError]:
    """Why the Cortex-M4 part cannot run the marked layer `ls` (empty: it can)."""
    problems = [
        layer_error(spec, ls, key, f"on a layer marked `cpu: true`: {why}")
        for key, why in _REFUSED.items()
        if _given(ls, key)
    ]
    operation = ls.operation or "conv2d"
    if operation not in ("conv2d", "linear", "none"):
        problems.append(_unsupported(spec, ls, "operation", f"`{operation}`"))
    if ls.activation == "abs":
        problems.append(_unsupported(spec, ls, "activation", "Abs"))
    if ls.output_width == 32 and not last:
        problems.append(_unsupported(spec, ls, "output_width", "32 before the last layer"))
    if ls.output_width == 32 and ls.activation == "relu":
        problems.append(_unsupported(spec, ls, "activation", "an activation on a 32-bit output"))
    return problems


def _given(ls: LayerSpec, key: str) -> bool:
    """The YAML gives `key` (a canonical field) on the layer, to a value that matters."""
    value = getattr(ls, key)
    if key == "sequence":
        return value is not None and value != ls.index
    if key == "next_sequence":
        return value is not None and value not in (ls.index + 1, "stop")
    if key == "in_sequences":
        return value is not None and value != [ls.index - 1]
    if key == "pool_dilation":
        return value not in (None, (1, 1))
    if key == "operands":
        return value not in (None, 1)
    if key == "in_crop":
        return value not in (None, (0, 0))
    if key == "bypass":
        return bool(value)
    return value is not None


def _unsupported(spec: NetworkSpec, ls: LayerSpec, key: str, what: str) -> EdgesynthError:
    return layer_error(
        spec,
        ls,
        key,
        f"{what} on a layer marked `cpu: true`: the Cortex-M4 part runs {CPU_LAYERS}",
    )
