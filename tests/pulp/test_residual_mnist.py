"""A residual, concatenating float CNN (tests/residual_mnist.py: two skip additions, a
concatenation of a block's input with its output) exported by torch.onnx, compiled with
`edgesynth compile -t gap8 --calibration` (300 real images): on 1,000 other real images its
top-1 agrees with ONNX Runtime's float top-1 on at least 98% through the simulator and through
the generated C built for the host (the two giving the same codes, and RV32 under qemu the
host's for a few images); every tensor the integer network stores has the fake-quantized
network's codes (the concatenation's inputs share its scale)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mnist_float import agreement, ort_logits

import needs
from cli_helpers import run_cli
from mnist_lenet import EVAL, load_mnist
from residual_mnist import residual_onnx

CALIBRATION = slice(8000, 8300)  # after the training images, before EVAL


@pytest.mark.slow
@pytest.mark.train
def test_residual_concat_mnist_on_gap8(tmp_path: Path) -> None:
    needs.tools("gcc", "riscv64-unknown-elf-gcc", "qemu-riscv32")
    model = residual_onnx()
    x, _ = load_mnist()
    cal = tmp_path / "cal.npy"
    np.save(cal, x[CALIBRATION])
    reference = ort_logits(model, x[EVAL]).argmax(1)
    out = tmp_path / "gap8"
    r = run_cli("compile", model, "-t", "gap8", "-c", cal, "-o", out)
    assert r.exit_code == 0, r.output
    assert "known answer reproduced on the host build of the generated C" in r.output
    result = agreement(out, x[EVAL], reference, rv32=2)
    print("residual/concat CNN on gap8:", result)
    assert result["host_equals_simulator"] and result["rv32_equals_host"]
    assert result["simulator"] >= 0.98 and result["host_c"] >= 0.98, result


@pytest.mark.slow
@pytest.mark.train
def test_the_residual_integer_network_is_the_fake_quantized_network() -> None:
    from fakequant_check import differences, is_tie

    from edgesynth.flow import load_model

    x, _ = load_mnist()
    graph = load_model(residual_onnx())
    diff = differences(graph, x[CALIBRATION], x[EVAL][:300])
    concat = [n for n in graph.nodes if n.op == "concat"]
    assert len(concat) == 1 and concat[0].output in diff
    for tensor in (t for t in diff if not t.startswith("_")):
        if tensor in graph.outputs:
            assert is_tie(graph, diff, tensor)[diff[tensor]].all(), tensor
        else:
            assert not diff[tensor].any(), tensor
