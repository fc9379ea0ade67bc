"""The float reference `edgesynth validate` compares a target with: a float ONNX model run by
ONNX Runtime (every intermediate tensor on request), or a vendor YAML + checkpoint run by its
training model (`train/vendor_model.py`) in float mode.

A reference takes float samples (N, *input shape), values not codes, and returns float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from edgesynth.errors import EdgesynthError


class Reference(Protocol):
    source: str

    def outputs(self, x: np.ndarray) -> list[np.ndarray]:
        """Each model output for the batch, (N, ...) float64."""

    def tensors(self) -> dict[str, str]:
        """The tensors `layers` can return, each with the operator that makes it (empty: no
        per-layer values)."""

    def layers(self, x: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
        """The named intermediate tensors for the batch, (N, ...) float64."""


class OnnxReference:
    """A float ONNX model in ONNX Runtime, one sample at a time (exported models often fix the
    batch at 1)."""

    def __init__(self, path: Path) -> None:
        import onnx

        self.source = f"{path} (ONNX Runtime)"
        self.model = onnx.load(str(path))
        initializers = {t.name for t in self.model.graph.initializer}
        inputs = [i for i in self.model.graph.input if i.name not in initializers]
        if len(inputs) != 1:
            raise EdgesynthError(
                f"validate takes models with one input; this one has {len(inputs)}",
                file=str(path),
            )
        self.input = inputs[0].name
        if inputs[0].type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise EdgesynthError(
                f"input `{self.input}` is not float32: validate compares with a float model",
                file=str(path),
            )
        self.output_names = [o.name for o in self.model.graph.output]
        self._sessions: dict[tuple[str, ...], Any] = {}

    def _session(self, names: tuple[str, ...]) -> Any:
        if names not in self._sessions:
            import onnx
            import onnxruntime as ort

            model = onnx.ModelProto()
            model.CopyFrom(self.model)
            for name in names:
                if name not in self.output_names:
                    model.graph.output.append(onnx.ValueInfoProto(name=name))
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.log_severity_level = 3
            try:
                self._sessions[names] = ort.InferenceSession(
                    model.SerializeToString(), options, providers=["CPUExecutionProvider"]
                )
            except Exception as err:  # onnxruntime's own error types
                raise _runtime_error("load", err, self.source) from None
        return self._sessions[names]

    def _run(self, x: np.ndarray, names: tuple[str, ...]) -> list[np.ndarray]:
        session = self._session(names)
        rows: list[list[np.ndarray]] = [[] for _ in names]
        for sample in np.asarray(x, dtype=np.float32):
            try:
                values = session.run(list(names), {self.input: sample[None]})
            except Exception as err:  # onnxruntime's own error types
                raise _runtime_error("run", err, self.source) from None
            for i, value in enumerate(values):
                rows[i].append(np.asarray(value, dtype=np.float64).reshape(-1))
        return [np.stack(r) for r in rows]

    def outputs(self, x: np.ndarray) -> list[np.ndarray]:
        return self._run(x, tuple(self.output_names))

    def tensors(self) -> dict[str, str]:
        return {
            name: node.op_type for node in self.model.graph.node for name in node.output if name
        }

    def layers(self, x: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
        values = self._run(x, tuple(names))
        return dict(zip(names, values, strict=True))


def _runtime_error(action: str, err: Exception, source: str) -> EdgesynthError:
    detail = str(err).splitlines()[0] if str(err) else type(err).__name__
    return EdgesynthError(f"ONNX Runtime cannot {action} the float model: {detail}", file=source)


class VendorReference:
    """A vendor YAML + checkpoint: its training model (edgesynth.nn layers) in float mode."""

    def __init__(
        self, yaml: Path, checkpoint: Path | None, sample: Path | None, device: str
    ) -> None:
        if checkpoint is None:
            raise EdgesynthError(
                "a YAML without a checkpoint has synthetic weights and no float model to "
                "compare with; give --checkpoint CK.pth.tar",
                file=str(yaml),
                key="--checkpoint",
            )
        from edgesynth.train.vendor_model import model_for_network

        self.source = f"{yaml} + {checkpoint} (the training model, float mode)"
        self.device = device
        self.model = model_for_network(yaml, checkpoint, sample, device)  # type: ignore[arg-type]

    def outputs(self, x: np.ndarray) -> list[np.ndarray]:
        import torch

        import edgesynth.nn as enn

        with torch.no_grad(), enn.use(self.device, simulate=False):
            y = self.model(torch.from_numpy(np.asarray(x, dtype=np.float32)))
        return [y.double().numpy().reshape(len(x), -1)]

    def tensors(self) -> dict[str, str]:
        return {}

    def layers(self, x: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
        return {}


def reference_device(target: str) -> str:
    """The device a vendor YAML's float training model is built for (an ONNX model has none)."""
    return "MAX78002" if target == "max78002" else "MAX78000"


def reference_for(
    model: Path, checkpoint: Path | None, sample: Path | None, device: str
) -> Reference:
    """The float reference of a model file: ONNX Runtime for .onnx, the training model for a
    vendor YAML (+ checkpoint)."""
    suffix = model.suffix.lower()
    if suffix == ".onnx":
        from edgesynth.frontends import onnx_int

        if not model.is_file():
            raise EdgesynthError("no such file", file=str(model))
        if onnx_int.is_integer_model(model):
            raise EdgesynthError(
                "this is an integer ONNX model; validate compares a target with a float model: "
                "give the float one with --reference",
                file=str(model),
            )
        return OnnxReference(model)
    if suffix in (".yaml", ".yml"):
        return VendorReference(model, checkpoint, sample, device)
    raise EdgesynthError(
        "a float reference is a float .onnx model or a vendor .yaml with --checkpoint",
        file=str(model),
        key="--reference",
    )
