"""ml-suite's quantization file (`*_8b.json`, `*_16b.json`) and edgesynth's solver for the
(pre-shift, scale, post-shift) triple of every output channel.

The file: `{"network": [layer, ...]}`, each layer with `name`, bit widths `bw_layer_in`,
`bw_layer_out`, `bw_params`, thresholds `th_layer_in`, `th_layer_out`, `th_params` (one per
output channel), scale factors `sf_* = th_* / (2**(bw - 1) - 1)` and per output channel
`prescale_shift`, `scale`, `postscale_shift`.

The triple makes the accumulator (input step x weight step units) into output steps:
out = ((acc >> pre) * scale) >> post ~ acc * M with M = sf_layer_in * sf_params[c] /
sf_layer_out. The solver fixes the post-shift and normalizes the scale into
(scale_min, 2 * scale_min]: the pre-shift is what is left. ml-suite's files all follow
post-shift 7 with the scale in (64, 128] (tests/xdnn/test_quantfile.py checks every channel of
the GoogLeNet 8- and 16-bit files); edgesynth's own programs use post-shift 15 (8-bit) or 7
(16-bit) with the scale in (128, 255], which keeps more bits and never saturates the
pre-shifted value for an output in range. A file edgesynth writes names its policy under
`"solver"`; a file without one is read with ml-suite's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgesynth.errors import EdgesynthError
from edgesynth.ir.intrange import int_range
from edgesynth.targets.xdnn import device as dev


@dataclass(frozen=True)
class SolverPolicy:
    name: str
    postshift: int
    scale_min: int  # the scale lands in (scale_min, 2 * scale_min] (capped to the field)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "postscale_shift": self.postshift, "scale_min": self.scale_min}


MLSUITE = SolverPolicy("ml-suite", 7, 64)


def edgesynth_policy(bits: int) -> SolverPolicy:
    """8-bit: post-shift 15, scale in (128, 255]: (acc >> pre) stays within 16 bits for every
    output in range and (p x scale) >> 15 <= 255 never wraps. 16-bit: ml-suite's post-shift 7
    with the scale in (64, 128], so (p x scale) >> 7 never exceeds a saturated p (no wrap);
    the 16-bit activations keep one bit of headroom (lower.py doubles their thresholds) so the
    pre-shifted value does not saturate either."""
    return SolverPolicy("edgesynth", 15, 128) if bits == 8 else SolverPolicy("edgesynth", 7, 64)


def policy_from_json(d: dict[str, Any] | None) -> SolverPolicy:
    if not d:
        return MLSUITE
    try:
        return SolverPolicy(str(d["name"]), int(d["postscale_shift"]), int(d["scale_min"]))
    except (KeyError, TypeError, ValueError):
        raise EdgesynthError(
            "`solver` must have name, postscale_shift and scale_min", key="solver"
        ) from None


@dataclass
class Triples:
    pre: np.ndarray
    scale: np.ndarray
    post: np.ndarray
    ok: np.ndarray  # False where the multiplier cannot be represented (too large)


def solve(multiplier: np.ndarray, policy: SolverPolicy) -> Triples:
    """(pre, scale, post) per channel for positive real multipliers (0 gives 0, 0, 0)."""
    m = np.asarray(multiplier, dtype=np.float64).reshape(-1)
    if np.any(m < 0) or not np.all(np.isfinite(m)):
        raise EdgesynthError("requantization multipliers must be finite and >= 0")
    zero = m == 0
    mant, exp = np.frexp(np.where(zero, 1.0, m))  # m = mant * 2**exp, mant in [0.5, 1)
    ceil_log2 = np.where(mant == 0.5, exp - 1, exp)
    k = int(policy.scale_min).bit_length() - 1  # scale_min = 2**k
    n = k + 1 - ceil_log2  # m * 2**n in (scale_min, 2 * scale_min]
    scale = np.floor(np.ldexp(m, n) + 0.5).astype(np.int64)
    over = scale > dev.SCALE_MAX  # rounding reached 2 * scale_min = 256
    n = np.where(over, n - 1, n)
    scale = np.where(over, policy.scale_min, scale)
    post = np.full_like(n, policy.postshift)
    pre = n - post
    # a multiplier too large for the fixed post-shift: give up post-shift bits first
    low = pre < 0
    post = np.where(low, np.maximum(n, 0), post)
    pre = np.where(low, 0, pre)
    ok = n >= 0
    # a multiplier too small for the pre-shift field: shift what can be shifted
    high = pre > dev.PRESHIFT_MAX
    pre = np.where(high, dev.PRESHIFT_MAX, pre)
    scale = np.where(
        high, np.floor(np.ldexp(m, (pre + post).astype(np.int64)) + 0.5).astype(np.int64), scale
    )
    pre, scale, post = (np.where(zero, 0, a).astype(np.int64) for a in (pre, scale, post))
    return Triples(pre, scale, post, ok | zero)


def effective(pre: np.ndarray, scale: np.ndarray, post: np.ndarray) -> np.ndarray:
    """The real multiplier a triple applies: scale / 2**(pre + post)."""
    return np.ldexp(np.asarray(scale, dtype=np.float64), -(np.asarray(pre) + np.asarray(post)))


# -- the file -------------------------------------------------------------------------------
def step(threshold: float | np.ndarray, bits: int) -> float | np.ndarray:
    """ml-suite's scale factor: threshold / (2**(bits - 1) - 1)."""
    return np.asarray(threshold, dtype=np.float64) / int_range(bits, True)[1]


@dataclass
class QuantLayer:
    name: str
    bw_in: int
    bw_out: int
    bw_params: int
    th_in: float
    th_out: float
    th_params: np.ndarray
    sf_in: float
    sf_out: float
    sf_params: np.ndarray
    pre: np.ndarray
    scale: np.ndarray
    post: np.ndarray

    @property
    def multiplier(self) -> np.ndarray:
        return self.sf_in * self.sf_params / self.sf_out

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bw_layer_in": self.bw_in,
            "bw_layer_out": self.bw_out,
            "bw_params": self.bw_params,
            "th_layer_in": self.th_in,
            "th_layer_out": self.th_out,
            "th_params": [float(v) for v in self.th_params],
            "sf_layer_in": self.sf_in,
            "sf_layer_out": self.sf_out,
            "sf_params": [float(v) for v in self.sf_params],
            "prescale_shift": [int(v) for v in self.pre],
            "scale": [int(v) for v in self.scale],
            "postscale_shift": [int(v) for v in self.post],
        }


@dataclass
class QuantFile:
    layers: list[QuantLayer]
    policy: SolverPolicy
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"network": [q.to_json() for q in self.layers], "solver": self.policy.to_json()}


_REQUIRED = ("name", "bw_layer_in", "bw_layer_out", "bw_params", "th_params")


def _layer(d: dict[str, Any], i: int, source: str) -> QuantLayer:
    name = str(d.get("name", f"#{i}"))
    where = {"file": source, "layer": i, "layer_name": name}
    for key in (*_REQUIRED, "prescale_shift", "scale", "postscale_shift"):
        if key not in d:
            raise EdgesynthError(f"missing `{key}`", **where)
    try:
        bw_in, bw_out, bw_p = int(d["bw_layer_in"]), int(d["bw_layer_out"]), int(d["bw_params"])
        th_p = np.asarray(d["th_params"], dtype=np.float64).reshape(-1)
        th_in = float(d.get("th_layer_in", 0.0))
        th_out = float(d.get("th_layer_out", 0.0))
        sf_in = float(d["sf_layer_in"]) if "sf_layer_in" in d else float(step(th_in, bw_in))
        sf_out = float(d["sf_layer_out"]) if "sf_layer_out" in d else float(step(th_out, bw_out))
        sf_p = (
            np.asarray(d["sf_params"], dtype=np.float64).reshape(-1)
            if "sf_params" in d
            else np.asarray(step(th_p, bw_p))
        )
        arrays = [
            np.asarray(d[k], dtype=np.int64).reshape(-1)
            for k in ("prescale_shift", "scale", "postscale_shift")
        ]
    except (TypeError, ValueError) as err:
        raise EdgesynthError(f"malformed value: {err}", **where) from None
    n = len(sf_p)
    for key, a in zip(("prescale_shift", "scale", "postscale_shift"), arrays, strict=True):
        if len(a) != n:
            raise EdgesynthError(f"`{key}` has {len(a)} values for {n} channels", **where)
    if sf_out <= 0:
        raise EdgesynthError("sf_layer_out must be positive", **where)
    return QuantLayer(name, bw_in, bw_out, bw_p, th_in, th_out, th_p, sf_in, sf_out, sf_p, *arrays)


def parse_quant(data: Any, source: str = "<quant>") -> QuantFile:
    if not isinstance(data, dict) or not isinstance(data.get("network"), list):
        raise EdgesynthError("not an xDNN quantization file: no `network` list", file=source)
    layers = [_layer(d, i, source) for i, d in enumerate(data["network"]) if isinstance(d, dict)]
    if layers and not any("prescale_shift" in d for d in data["network"]):
        raise EdgesynthError("not a quantization file (no prescale_shift)", file=source)
    return QuantFile(layers, policy_from_json(data.get("solver")), source)


def read_quant(path: Path) -> QuantFile:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise EdgesynthError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    except ValueError as err:
        raise EdgesynthError(f"invalid JSON: {err}", file=str(path)) from None
    return parse_quant(data, str(path))


@dataclass
class Mismatch:
    layer: str
    channel: int
    file: tuple[int, int, int]
    solved: tuple[int, int, int]


@dataclass
class CheckReport:
    layers: int
    channels: int
    mismatches: list[Mismatch]
    out_of_field: list[str]
    policy: SolverPolicy


def check_quant(q: QuantFile) -> CheckReport:
    """Recompute every channel's triple from the file's scale factors."""
    mism: list[Mismatch] = []
    fields: list[str] = []
    channels = 0
    for layer in q.layers:
        t = solve(layer.multiplier, q.policy)
        channels += len(t.pre)
        got = np.stack([layer.pre, layer.scale, layer.post])
        want = np.stack([t.pre, t.scale, t.post])
        for c in np.nonzero(np.any(got != want, axis=0))[0]:
            mism.append(Mismatch(layer.name, int(c), tuple(got[:, c]), tuple(want[:, c])))
        for key, a, hi in (
            ("prescale_shift", layer.pre, dev.PRESHIFT_MAX),
            ("scale", layer.scale, dev.SCALE_MAX),
            ("postscale_shift", layer.post, dev.POSTSHIFT_MAX),
        ):
            bad = np.nonzero((a < 0) | (a > hi))[0]
            if len(bad):
                fields.append(
                    f"{layer.name}: {key} of channel {int(bad[0])} is {int(a[bad[0]])}, the "
                    f"field holds 0..{hi} ({len(bad)} channels out of range)"
                )
    return CheckReport(len(q.layers), channels, mism, fields, q.policy)
