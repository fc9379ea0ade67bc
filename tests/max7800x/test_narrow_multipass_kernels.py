"""Convolutions with more than 64 input channels (several input passes) and 1-, 2- or 4-bit
weights: the kernels edgesynth writes compute the simulator's answer on the virtual device.

With q = 8 / bits kernels per byte, one byte group of a processor's kernel stream holds q
kernels of the sequence (output channel, pass), passes fastest. Where the last pass is partial
(65 or 100 channels), the vendor's packing tests only the pass of a group's number and drops
the group of a processor without that input channel, kernels of earlier passes included
(`compat.kernel_packing.unit_has_input`); `edgesynth izer` keeps that (write for write) and its
project misses the known answer, edgesynth's own path (`compile`, `synth`) writes whole groups.
A flattened layer cannot have a partial pass at all: it is refused (rule `flatten_passes`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgesynth.cli import main
from edgesynth.errors import EdgesynthError
from edgesynth.flow import compile_to
from edgesynth.ir import graph as g
from edgesynth.ir.intrange import int_range

ACT8 = g.QType(8, True, 1 / 128)
ACC = g.QType(32, True, None)


def _network(channels: int, bits: int, taps: int, dims: int) -> tuple[g.Graph, np.ndarray]:
    """relu(requantize(conv(x))), `channels` in and out, weights that need exactly `bits`
    bits (the lowering picks the narrowest width that holds them), and a sample input."""
    rng = np.random.default_rng(channels * 10 + bits)
    shape = (channels, 20) if dims == 1 else (channels, 4, 5)
    low, high = int_range(bits, True)
    w = rng.integers(low, high + 1, (channels, channels) + (taps,) * dims)
    w.flat[:2] = low, high  # both ends: no narrower width holds them
    graph = g.Graph(name="wide")
    graph.add_input("input", shape, ACT8)
    pad, one = (taps // 2,) * (2 * dims), (1,) * dims
    conv = g.Conv(name="k/conv", inputs=["input"], outputs=["acc"], weight=w, pads=pad,
                  stride=one, dilation=one)  # fmt: skip
    graph.add(conv, shape, ACC)
    rq = g.Requantize(name="k/rq", inputs=["acc"], outputs=["q"], mul=1, div=64)
    graph.add(rq, shape, ACT8)
    graph.add(g.Activation(name="k/relu", inputs=["q"], outputs=["y"], kind="relu"), shape, ACT8)
    graph.outputs = ["y"]
    return graph, rng.integers(-128, 128, shape)


def _proved(device: str, channels: int, bits: int, taps: int, dims: int, out: Path) -> None:
    graph, x = _network(channels, bits, taps, dims)
    program, _ = compile_to(graph, device, options={"sample": x}, out=out, verify=True)
    (entry,) = program.description.document["layers"]
    assert entry.get("quantization", 8) == bits
    proof = program.proof
    assert proof is not None and proof.matched == proof.total > 0


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("channels", [64, 65, 100, 128])
def test_conv1d_kernels_compute_the_known_answer(channels: int, bits: int, tmp_path: Path) -> None:
    _proved("max78000", channels, bits, 1, 1, tmp_path / "out")


@pytest.mark.parametrize(
    ("device", "channels", "bits", "taps", "dims"),
    [
        ("max78000", 100, 2, 3, 1),
        ("max78000", 65, 4, 3, 1),
        ("max78000", 100, 4, 3, 2),
        ("max78000", 79, 1, 1, 2),
        ("max78002", 100, 2, 1, 1),
        ("max78002", 65, 4, 3, 2),
    ],
)
def test_wider_kernels_and_the_max78002(
    device: str, channels: int, bits: int, taps: int, dims: int, tmp_path: Path
) -> None:
    _proved(device, channels, bits, taps, dims, tmp_path / "out")


def test_compile_proves_the_description_izer_refuses(tmp_path: Path, capsys, monkeypatch) -> None:
    """The same layer as a vendor description: `edgesynth compile` writes a project that
    reproduces its known answer; `edgesynth izer` writes what the vendor's tool writes, which
    misses it, so it refuses (nothing written)."""
    graph, x = _network(100, 2, 1, 1)
    described = tmp_path / "described"
    compile_to(graph, "max78000", options={"sample": x}, out=described)
    monkeypatch.chdir(described)  # the vendor's look-ups: tests/weights_network.npy etc.
    yaml = described / "network.yaml"
    sample = described / "tests" / "sample_network.npy"
    argv = ["compile", str(yaml), "-t", "max78000", "--sample-input", str(sample)]
    assert main([*argv, "-o", str(tmp_path / "own")]) == 0
    assert "known answer reproduced on the virtual MAX78000: 500 of 500 words" in (
        capsys.readouterr().out
    )
    izer = ["izer", "--device", "MAX78000", "--config-file", str(yaml), "--prefix", "wide"]
    assert main([*izer, "--test-dir", str(tmp_path / "vendor")]) == 1
    err = capsys.readouterr().err
    assert err.count("edgesynth: error:") == 1 and "Traceback" not in err
    assert "misses its known answer on the virtual MAX78000" in err
    assert "the vendor's tool packs layer 0's 2-bit kernels wrong" in err
    assert "the kernels of processors 48, 49, 50, 51" in err
    assert not (tmp_path / "vendor" / "wide").exists()


def test_a_flattened_layer_with_a_partial_pass_is_refused(tmp_path: Path) -> None:
    """A linear layer on 65 channels of 2x2 (flattened, two passes of 36 and 29 channels):
    one clear refusal (the rule `flatten_passes`), not a crash of the kernel packing."""
    graph = g.Graph(name="fc")
    graph.add_input("input", (65, 2, 2), ACT8)
    weight = np.ones((10, 260), dtype=np.int64)
    graph.add(g.Linear(name="k/fc", inputs=["input"], outputs=["acc"], weight=weight), (10,), ACC)
    graph.add(g.Requantize(name="k/rq", inputs=["acc"], outputs=["y"], mul=1, div=64), (10,), ACT8)
    graph.outputs = ["y"]
    sample = np.zeros((65, 2, 2), dtype=np.int64)
    with pytest.raises(EdgesynthError) as info:
        compile_to(graph, "max78000", options={"sample": sample}, out=tmp_path / "out")
    assert "65 input channels in 2 passes of 36 processors" in str(info.value)
    assert "a multiple of 8 channels (e.g. 72)" in str(info.value)
    assert not (tmp_path / "out").exists()
