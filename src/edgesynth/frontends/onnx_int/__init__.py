"""Integer ONNX front end: the three PULP quantization dialects to the network graph.

- NEMO (IntegerDeployable export): `Conv`/`Gemm`/`MatMul`, then `Mul(kappa) Add(lambda) Cast
  Mul(m) Div(D) Cast Clip`; additions as `Mul Mul Add Div Floor [...]`; `Pad`; pooling.
- Quantlab: `Conv` (`weight_bits`), `Mul Add Div Floor Clip`; `Add` nodes carrying
  `in<k>_*`/`out_*` requantization attributes.
- RequantShift (Deeploy): `RequantShift(x, mul, add)` with `div`, `n_levels_out`, `signed`.

The graph computes exactly what the ONNX arithmetic says on integers (64 bits and beyond, the
literal divisors, each dialect's rounding); see `convert.py` and `symbolic.py`, and docs/pulp.md.
The graph's inputs need an integer type (`input_types`; when not given, the ONNX input's own
element type if it is an 8-, 16- or 32-bit integer, else 8-bit unsigned). Metadata
`edgesynth.scale.<tensor>` gives the real value of one step of an input or output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgesynth.errors import EdgesynthError
from edgesynth.ir import graph as g

DIALECTS = ("NEMO", "Quantlab", "RequantShift")
SCALE_KEY = "edgesynth.scale."  # metadata: the scale of an ONNX tensor (value = code x scale)
# An input the ONNX file declares with an integer element type has that type (unless given).
DECLARED_TYPES = {
    2: g.QType(8, signed=False),
    3: g.QType(8),
    4: g.QType(16, signed=False),
    5: g.QType(16),
    6: g.QType(32),
}
_TYPE = re.compile(r"^(u?)int(\d+)$")


@dataclass
class IntegerNetwork:
    graph: g.Graph
    dialect: str
    onnx_to_graph: dict[str, str]  # ONNX tensor -> the graph tensor holding its value
    dropped: list[str] = field(default_factory=list)  # host-side nodes left out


def parse_type(text: str, where: str = "--input-type") -> g.QType:
    """`uint8`, `int8`, `int2`, ... -> QType."""
    m = _TYPE.match(text.strip().lower())
    if not m or not 1 <= int(m.group(2)) <= 32:
        raise EdgesynthError(
            f"`{text}` is not an integer type; write uint8, int8, uint4, int2, ...", key=where
        )
    return g.QType(int(m.group(2)), signed=not m.group(1))


def detect_dialect(model: object) -> str:
    nodes = model.nodes  # type: ignore[attr-defined]
    if any(n.op == "RequantShift" for n in nodes):
        return "RequantShift"
    quantlab_keys = ("weight_bits", "out_bits", "in1_mul", "mult_bits")
    if any(k in n.attrs for n in nodes for k in quantlab_keys) or (
        any(n.op == "Floor" for n in nodes) and not any(n.op == "Cast" for n in nodes)
    ):
        return "Quantlab"
    return "NEMO"


def load_integer_onnx(
    path: Path | str,
    input_types: dict[str, g.QType | str] | list[g.QType | str] | None = None,
) -> IntegerNetwork:
    """Read an integer ONNX network into the graph. `input_types` maps each graph input (or,
    as a list, the inputs in order) to its integer type; default unsigned 8-bit."""
    from edgesynth.frontends.onnx_int.convert import convert
    from edgesynth.frontends.onnx_int.reader import read_onnx

    model = read_onnx(Path(path))
    names = [vi.name for vi in model.inputs]
    if isinstance(input_types, list):
        input_types = [parse_type(t) if isinstance(t, str) else t for t in input_types]
    elif isinstance(input_types, dict):
        input_types = {
            k: parse_type(t) if isinstance(t, str) else t for k, t in input_types.items()
        }
    if isinstance(input_types, list):
        if len(input_types) not in (1, len(names)):
            raise EdgesynthError(
                f"{len(input_types)} input types for {len(names)} inputs", key="--input-type"
            )
        types = input_types * len(names) if len(input_types) == 1 else input_types
        typed = dict(zip(names, types, strict=True))
    else:
        typed = dict(input_types or {})
        unknown = sorted(set(typed) - set(names))
        if unknown:
            raise EdgesynthError(
                f"the network has no input {', '.join(unknown)}; its inputs are "
                + ", ".join(names),
                key="--input-type",
            )
    for vi in model.inputs:
        typed.setdefault(vi.name, DECLARED_TYPES.get(vi.elem_type, g.QType(8, signed=False)))
    scales = _scales(model)
    typed = {k: t.with_scale(scales[k]) if k in scales else t for k, t in typed.items()}
    builder = convert(model, typed)
    graph = builder.graph
    for onnx_name, scale in scales.items():
        tensor = graph.tensors.get(builder.onnx_to_graph.get(onnx_name, ""))
        if tensor is not None and tensor.qtype is not None:
            tensor.qtype = tensor.qtype.with_scale(scale)
    return IntegerNetwork(graph, detect_dialect(model), builder.onnx_to_graph, builder.dropped)


def _scales(model: object) -> dict[str, float]:
    """The real value of one step of the tensors the model's metadata names (`SCALE_KEY` +
    ONNX tensor name, as edgesynth's quantizer writes them)."""
    out: dict[str, float] = {}
    for key, value in model.metadata.items():  # type: ignore[attr-defined]
        if key.startswith(SCALE_KEY):
            try:
                scale = float(value)
            except ValueError:
                scale = 0.0
            if not scale > 0:
                raise EdgesynthError(
                    f"metadata {key}={value!r} is not a positive number",
                    file=str(model.path),  # type: ignore[attr-defined]
                )
            out[key[len(SCALE_KEY) :]] = scale
    return out


def is_integer_model(path: Path | str | Any) -> bool:
    """Does the ONNX file (or its already read `onnx.ModelProto`) hold an integer-deployable
    network (one of the dialects) rather than a float model? A RequantShift node, Quantlab's
    attributes, or convolution/linear weights that are all whole numbers (NEMO) say so; trained
    float weights never are (the first such weight answers)."""
    import numpy as np

    from edgesynth.frontends.onnxproto import load_model, to_array

    if isinstance(path, (str, Path)):
        try:
            model = load_model(str(path))
        except Exception:  # the float front end reports unreadable files
            return False
    else:
        model = path
    nodes = model.graph.node
    if any(n.op_type == "RequantShift" for n in nodes):
        return True
    if any(a.name in ("weight_bits", "in1_mul", "out_bits") for n in nodes for a in n.attribute):
        return True
    inits = {t.name: t for t in model.graph.initializer}
    weights = (
        to_array(inits[n.input[1]])
        for n in nodes
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1 and n.input[1] in inits
    )
    found = False
    for w in weights:
        if not (w.size > 0 and np.issubdtype(w.dtype, np.number) and np.all(w == np.round(w))):
            return False
        found = True
    return found
