"""The PULP reference corpus (../shared/pulp/cases): inputs, input types, every layer's expected
output, DORY's decisions, and the comparison of our layers with the corpus's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CASES = SHARED / "pulp" / "cases"


def case_names() -> list[str]:
    if not CASES.is_dir():
        return []
    return sorted(p.name for p in CASES.iterdir() if (p / "case.json").is_file())


def case_params() -> list:
    """The case names; without the corpus, one name whose tests fail (Case checks it)."""
    return case_names() or [f"missing: {CASES}"]


@dataclass
class Case:
    name: str

    def __post_init__(self) -> None:
        if not (CASES / self.name / "case.json").is_file():
            pytest.fail(f"missing from the PULP corpus: {CASES / self.name}", pytrace=False)

    @property
    def folder(self) -> Path:
        return CASES / self.name

    @cached_property
    def meta(self) -> dict:
        return json.loads((self.folder / "case.json").read_text())

    @property
    def network(self) -> Path:
        return self.folder / "network.onnx"

    @property
    def dialect(self) -> str:
        return self.meta["frontend"]

    @property
    def code_reserve(self) -> int | None:
        return self.meta.get("dory_config", {}).get("code reserved space")

    @cached_property
    def dory(self) -> dict | None:
        path = self.folder / "dory_gap8.json"
        return json.loads(path.read_text()) if path.is_file() else None

    @cached_property
    def data(self) -> dict[str, np.ndarray]:
        name = "inputs.npz" if self.dialect == "RequantShift" else "data.npz"
        with np.load(self.folder / name) as d:
            return {k: d[k] for k in d.files}

    @property
    def input_file(self) -> Path:
        return self.folder / ("inputs.npz" if self.dialect == "RequantShift" else "data.npz")

    @property
    def input_types(self) -> list[str]:
        """The input's integer type: DORY's configuration says it where it differs from uint8;
        Deeploy's inputs are signed when any value is negative."""
        cfg = self.meta.get("dory_config", {})
        if "input_bits" in cfg:
            return [("int" if cfg.get("input_signed") else "uint") + str(cfg["input_bits"])]
        if self.dialect == "RequantShift":
            x = next(iter(self.data.values()))
            return ["int8" if x.min() < 0 else "uint8"]
        return ["uint8"]

    def expected_layers(self) -> list[np.ndarray]:
        """Per corpus layer: (samples, values) flattened as the corpus stores them."""
        d = self.data
        samples = sum(1 for k in d if k.startswith("input"))
        out = []
        k = 0
        while True:
            keys = (
                [f"out_layer{k}"] if samples == 1 else [f"out_{s}_layer{k}" for s in range(samples)]
            )
            if keys[0] not in d:
                return out
            out.append(np.stack([d[key].astype(np.int64) for key in keys]))
            k += 1

    @cached_property
    def activations(self) -> dict[str, np.ndarray]:
        with np.load(self.folder / "activations.npz") as a:
            return {k: a[k] for k in a.files}

    @cached_property
    def expected_output(self) -> np.ndarray:
        with np.load(self.folder / "outputs.npz") as o:
            return o[o.files[0]]


def flatten(values: np.ndarray, layout: str) -> np.ndarray:
    """(N, C, H, W) / (N, C, L) / (N, C) -> (N, values) in the corpus's order."""
    if layout == "chw" or values.ndim == 2:
        return values.reshape(values.shape[0], -1)
    if values.ndim == 3:
        return values.transpose(0, 2, 1).reshape(values.shape[0], -1)
    return values.transpose(0, 2, 3, 1).reshape(values.shape[0], -1)


def align(ours: list[np.ndarray], expected: list[np.ndarray]) -> tuple[str, list[int]]:
    """Match every corpus layer, in order, with one of our layer outputs (N, C, H, W) of equal
    values. The corpus stores a case's layers in one order, HWC for most and CHW for a few
    (SmartAgri-net, dscnn_test); a network may have more layers than the corpus records (an
    addition whose result a requantization reads is its own layer). Returns the layout and, per
    corpus layer, our index; raises AssertionError naming the first corpus layer not found."""
    failures = []
    for layout in ("hwc", "chw"):
        flat = [flatten(v, layout) for v in ours]
        mapping, j = [], 0
        for k, want in enumerate(expected):
            while j < len(flat) and not (
                flat[j].shape == want.shape and np.array_equal(flat[j], want)
            ):
                j += 1
            if j == len(flat):
                failures.append(f"{layout}: corpus layer {k} {want.shape} matches none of ours")
                break
            mapping.append(j)
            j += 1
        else:
            return layout, mapping
    raise AssertionError("; ".join(failures))
