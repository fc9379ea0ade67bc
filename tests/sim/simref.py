"""An independent reference for the vendor's known-answer arithmetic, and tiny test projects.

Written from the documented semantics (docs, ARITHMETIC.md and the vendor's behaviour as
described in the edgesynth sources' comments), not from edgesynth's code: convolutions run in
PyTorch float64 (exact for these sizes), pooling and rounding in Python integers/fractions,
one element at a time. Slow, and only meant for the small shapes the tests use.
"""

from __future__ import annotations

import json
import math
import shutil
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from edgesynth.cli import main

# ---------------------------------------------------------------------------------------------
# Arithmetic


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def _int(t: torch.Tensor) -> np.ndarray:
    out = t.numpy()
    assert np.all(out == np.round(out))
    return out.astype(np.int64)


def conv2d(x, w, bias=None, *, stride=1, pad=(0, 0), dilation=1, groups=1) -> np.ndarray:
    """Accumulator of a 2D cross-correlation: (C, H, W) -> (O, Ho, Wo), bias x 128 added."""
    b = None if bias is None else _t(np.asarray(bias) * 128)
    out = F.conv2d(
        _t(x)[None], _t(w), b, stride=stride, padding=tuple(pad), dilation=dilation, groups=groups
    )
    return _int(out[0])


def conv1d(x, w, bias=None, *, stride=1, pad=0, dilation=1, groups=1) -> np.ndarray:
    b = None if bias is None else _t(np.asarray(bias) * 128)
    out = F.conv1d(
        _t(x)[None], _t(w), b, stride=stride, padding=pad, dilation=dilation, groups=groups
    )
    return _int(out[0])


def conv_transpose2d(x, w_torch, bias=None, *, pad=1, output_padding=1, groups=1) -> np.ndarray:
    """PyTorch's ConvTranspose2d (stride 2) with weights in PyTorch's (in, out/groups, kh, kw)."""
    b = None if bias is None else _t(np.asarray(bias) * 128)
    out = F.conv_transpose2d(
        _t(x)[None],
        _t(w_torch),
        b,
        stride=2,
        padding=pad,
        output_padding=output_padding,
        groups=groups,
    )
    return _int(out[0])


def requantize(acc: np.ndarray, shift: int) -> np.ndarray:
    """floor(1/2 + acc * 2**shift / 128), clipped to 8 bits: half rounds toward +infinity."""
    flat = [
        math.floor(Fraction(1, 2) + Fraction(int(a)) * Fraction(2) ** shift / 128)
        for a in np.asarray(acc).reshape(-1)
    ]
    return np.clip(np.array(flat, dtype=np.int64).reshape(np.shape(acc)), -128, 127)


def relu(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0, 127)


def absolute(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.abs(x), 127)


def _average(values: list[int], rounding: bool) -> int:
    mean = Fraction(sum(values), len(values))
    if rounding:  # half away from zero
        magnitude = math.floor(abs(mean) + Fraction(1, 2))
        return magnitude if mean >= 0 else -magnitude
    return math.trunc(mean)


def pooled(size: int, pool: int, stride: int, dilation: int = 1) -> int:
    """The vendor's pooled length (no padding)."""
    return (size + stride - pool - dilation + 1) // stride


def pool2d(x, pool, stride, *, average=False, dilation=(1, 1), rounding=False) -> np.ndarray:
    """2D pooling; a window that runs past a row/the channel reads the C-ordered memory that
    follows (next row/next channel), zeros after the end of the data."""
    c_n, h_n, w_n = x.shape
    memory = [int(v) for v in np.asarray(x).reshape(-1)]
    oh = pooled(h_n, pool[0], stride[0], dilation[0])
    ow = pooled(w_n, pool[1], stride[1], dilation[1])
    out = np.zeros((c_n, oh, ow), dtype=np.int64)
    for c in range(c_n):
        for r in range(oh):
            for q in range(ow):
                values = []
                for i in range(pool[0]):
                    for j in range(pool[1]):
                        addr = (
                            c * h_n * w_n
                            + (r * stride[0] + i * dilation[0]) * w_n
                            + q * stride[1]
                            + j * dilation[1]
                        )
                        values.append(memory[addr] if addr < len(memory) else 0)
                out[c, r, q] = _average(values, rounding) if average else max(values)
    return out


def pool1d(x, pool, stride, *, average=False, dilation=1) -> np.ndarray:
    """1D pooling: averages truncate and cover only the samples inside the data; max pooling
    takes `pool` consecutive samples (no dilation)."""
    c_n, length = x.shape
    n = pooled(length, pool, stride, dilation)
    out = np.zeros((c_n, n), dtype=np.int64)
    for c in range(c_n):
        for k in range(n):
            start = k * stride
            if average:
                values = [
                    int(x[c, start + i * dilation])
                    for i in range(pool)
                    if start + i * dilation < length
                ]
                out[c, k] = _average(values, rounding=False)
            else:
                out[c, k] = max(int(v) for v in x[c, start : start + pool])
    return out


# ---------------------------------------------------------------------------------------------
# Test projects: a YAML file, synthetic weights/biases and a sample, run by `edgesynth izer`


class Project:
    """A throw-away `arch: test` project in `root`: tests/weights_t.npy, tests/bias_b.npy,
    tests/sample_t.npy and net.yaml, run from inside the folder like the vendor tool."""

    def __init__(self, root: Path, monkeypatch) -> None:
        self.root = root
        (root / "tests").mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(root)

    def write(
        self,
        yaml_text: str,
        *,
        sample: np.ndarray,
        weights: list[np.ndarray] = (),
        bias: list[np.ndarray] | None = None,
        header: bool = True,
    ) -> None:
        text = textwrap.dedent(yaml_text).strip() + "\n"
        if header:
            text = "arch: test\ndataset: t\n" + ("bias: b\n" if bias is not None else "") + text
        (self.root / "net.yaml").write_text(text)
        np.save(self.root / "tests" / "sample_t.npy", np.asarray(sample, dtype=np.int64))
        with open(self.root / "tests" / "weights_t.npy", "wb") as f:
            if len(weights) == 1:  # one array is read as all layers stacked: stack the one
                np.save(f, np.asarray(weights[0], dtype=np.int64)[None])
            for w in weights if len(weights) > 1 else ():
                np.save(f, np.asarray(w, dtype=np.int64))
        if bias is not None:
            with open(self.root / "tests" / "bias_b.npy", "wb") as f:
                for b in bias:
                    np.save(f, np.asarray(b, dtype=np.int64))

    def argv(self, *extra: str, device: str = "MAX78002") -> list[str]:
        return [
            "izer",
            "--device",
            device,
            "--config-file",
            "net.yaml",
            "--test-dir",
            "out",
            "--prefix",
            "p",
            "--sample-numpy-filename",
            "kat",
            *extra,
        ]

    def run(self, *extra: str, device: str = "MAX78002", capsys=None) -> np.ndarray:
        out = self.root / "out" / "p" / "kat.npy"
        shutil.rmtree(self.root / "out", ignore_errors=True)  # izer refuses an existing out/p
        status = main(self.argv(*extra, device=device))
        message = capsys.readouterr().err if capsys is not None else ""
        assert status == 0, message
        return np.load(out)

    def refuse(self, *extra: str, capsys, device: str = "MAX78002") -> str:
        shutil.rmtree(self.root / "out", ignore_errors=True)
        status = main(self.argv(*extra, device=device))
        err = capsys.readouterr().err
        assert status == 1, err
        assert not (self.root / "out").exists(), "a refused run must leave nothing behind"
        assert "Traceback" not in err and err.count("edgesynth: error:") == 1, err
        return err


def save_checkpoint(path: Path, state: dict[str, np.ndarray], arch: str = "t") -> None:
    """A vendor-style checkpoint: float tensors in `state_dict`, plus `arch` and `epoch`."""
    tensors = {
        k: torch.tensor(np.asarray(v, dtype=np.float64), dtype=torch.float32)
        for k, v in state.items()
    }
    torch.save({"state_dict": tensors, "arch": arch, "epoch": 0, "extras": json.dumps({})}, path)
