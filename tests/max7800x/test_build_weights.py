"""How weights, biases and shifts reach the layers: checkpoints (weight bits, binary weights,
BatchNorm, skipped layers, `weight_source`), synthetic weights (requantization, `bypass`),
ConvTranspose2d with groups; compared with the independent reference in tests/sim/simref.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))

import simref
from simref import Project, save_checkpoint

RNG = np.random.default_rng(5)


def data(*shape: int, low: int = -128, high: int = 128) -> np.ndarray:
    return RNG.integers(low, high, size=shape, dtype=np.int64)


def procs(n: int, first: int = 0) -> str:
    return f"0x{((1 << n) - 1) << first:016x}"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Project:
    return Project(tmp_path / "p", monkeypatch)


def qat_layer(name: str, w: np.ndarray, bias=None, *, bits=8, shift=None) -> dict:
    """A QAT checkpoint layer: the bias is stored pre-multiplied by 2**(bits-1)."""
    state = {f"{name}.op.weight": w, f"{name}.weight_bits": np.array([bits])}
    if bias is not None:
        state[f"{name}.op.bias"] = np.asarray(bias) * 2 ** (bits - 1)
    if shift is not None:
        state[f"{name}.output_shift"] = np.array([shift])
    return state


def write_yaml(project: Project, layers: str, sample: np.ndarray) -> None:
    project.write("arch: t\ndataset: t\n" + layers, sample=sample, header=False)


TWO_CONVS = f"""
layers:
  - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, activate: relu}}
  - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1}}
"""


def test_checkpoint_weight_bits_decide_the_width_not_the_values(project, capsys) -> None:
    """Without `weight_bits` a checkpoint layer is 8-bit even if its values would fit fewer
    bits; with `weight_bits: 4` the implicit shift is 8 - 4."""
    x = data(4, 5, 5)
    w0, w1 = data(4, 4, 3, 3, low=-8, high=8), data(3, 4, 3, 3, low=-8, high=8)
    b0 = data(4, low=-30, high=30)
    state = {"c0.op.weight": w0, "c0.op.bias": b0 * 128, "c0.output_shift": np.array([1])}
    state |= qat_layer("c1", w1, bits=4, shift=-1)
    save_checkpoint(project.root / "ck.pth.tar", state)
    write_yaml(project, TWO_CONVS, x)
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, b0, pad=(1, 1)), 1))
    expected = simref.requantize(simref.conv2d(y, w1, pad=(1, 1)), -1 + 4)
    got = project.run("--checkpoint-file", "ck.pth.tar", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


def test_binary_weights_are_found_and_count_as_one_bit(project, capsys) -> None:
    x = data(4, 5, 5)
    w0 = np.where(data(4, 4, 3, 3) >= 0, 1, -1)
    w1 = data(3, 4, 3, 3)
    save_checkpoint(project.root / "ck.pth.tar", qat_layer("c0", w0) | qat_layer("c1", w1))
    write_yaml(project, TWO_CONVS, x)
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, pad=(1, 1)), 7))
    expected = simref.requantize(simref.conv2d(y, w1, pad=(1, 1)), 0)
    got = project.run("--checkpoint-file", "ck.pth.tar", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


def test_unfolded_batchnorm_needs_ignore_bn(project, capsys) -> None:
    x, w0, w1 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    state = qat_layer("c0", w0) | {"c0.bn.weight": np.ones(4), "c0.bn.bias": np.zeros(4)}
    save_checkpoint(project.root / "ck.pth.tar", state | qat_layer("c1", w1))
    write_yaml(project, TWO_CONVS, x)
    err = project.refuse("--checkpoint-file", "ck.pth.tar", capsys=capsys)
    assert "BatchNorm" in err
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, pad=(1, 1)), 0))
    expected = simref.requantize(simref.conv2d(y, w1, pad=(1, 1)), 0)
    got = project.run("--checkpoint-file", "ck.pth.tar", "--ignore-bn", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


def test_skip_checkpoint_layers(project, capsys) -> None:
    x, w0, w1 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    state = qat_layer("extra", data(2, 2, 3, 3)) | qat_layer("c0", w0) | qat_layer("c1", w1)
    save_checkpoint(project.root / "ck.pth.tar", state)
    write_yaml(project, TWO_CONVS, x)
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, pad=(1, 1)), 0))
    expected = simref.requantize(simref.conv2d(y, w1, pad=(1, 1)), 0)
    got = project.run(
        "--checkpoint-file", "ck.pth.tar", "--skip-checkpoint-layers", "1", capsys=capsys
    )
    np.testing.assert_array_equal(got, expected)


def test_no_bias_drops_a_checkpoint_bias(project, capsys) -> None:
    x, w0, w1 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    b0, b1 = data(4, low=-50, high=50), data(3, low=-50, high=50)
    save_checkpoint(project.root / "ck.pth.tar", qat_layer("c0", w0, b0) | qat_layer("c1", w1, b1))
    write_yaml(project, TWO_CONVS, x)
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, pad=(1, 1)), 0))
    expected = simref.requantize(simref.conv2d(y, w1, b1, pad=(1, 1)), 0)
    got = project.run("--checkpoint-file", "ck.pth.tar", "--no-bias", "0", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


def test_weight_source_reuses_weights_bias_and_shift(project, capsys) -> None:
    x, w0, b0 = data(4, 5, 5), data(4, 4, 3, 3, low=-8, high=8), data(4, low=-20, high=20)
    save_checkpoint(project.root / "ck.pth.tar", qat_layer("c0", w0, b0, bits=4, shift=1))
    write_yaml(
        project,
        f"""
layers:
  - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, activate: relu,
      name: shared}}
  - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, weight_source: shared,
      output_shift: 3}}
""",
        x,
    )
    # The source's total shift (checkpoint 1 + 8 - 4) replaces the reusing layer's own.
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, b0, pad=(1, 1)), 5))
    expected = simref.requantize(simref.conv2d(y, w0, b0, pad=(1, 1)), 5)
    got = project.run("--checkpoint-file", "ck.pth.tar", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


def test_weight_out_of_the_configured_range_is_refused(project, capsys) -> None:
    x = data(4, 5, 5)
    state = qat_layer("c0", data(4, 4, 3, 3, low=20, high=40)) | qat_layer("c1", data(3, 4, 3, 3))
    save_checkpoint(project.root / "ck.pth.tar", state)
    write_yaml(project, TWO_CONVS.replace("activate: relu", "activate: relu, quantization: 4"), x)
    err = project.refuse("--checkpoint-file", "ck.pth.tar", capsys=capsys)
    assert "4-bit" in err


def test_bias_that_does_not_fit_8_bits_is_refused(project, capsys) -> None:
    x = data(4, 5, 5)
    state = qat_layer("c0", data(4, 4, 3, 3), np.full(4, 200)) | qat_layer("c1", data(3, 4, 3, 3))
    save_checkpoint(project.root / "ck.pth.tar", state)
    write_yaml(project, TWO_CONVS, x)
    assert "does not fit 8 bits" in project.refuse("--checkpoint-file", "ck.pth.tar", capsys=capsys)


def test_convtranspose2d_with_groups_matches_pytorch(project, capsys) -> None:
    x = data(4, 4, 4)
    w0 = data(4, 1, 3, 3)  # PyTorch layout (in, out/groups, kh, kw), depthwise
    b0 = data(4, low=-20, high=20)
    save_checkpoint(project.root / "ck.pth.tar", qat_layer("up", w0, b0, shift=-2))
    write_yaml(
        project,
        f"""
layers:
  - {{processors: {procs(4)}, out_offset: 0x2000, op: convtranspose2d, pad: 1, groups: 4}}
""",
        x,
    )
    expected = simref.requantize(simref.conv_transpose2d(x, w0, b0, pad=1, groups=4), -2)
    got = project.run("--checkpoint-file", "ck.pth.tar", capsys=capsys)
    assert got.shape == (4, 8, 8)
    np.testing.assert_array_equal(got, expected)


def test_synthetic_weights_are_requantized_to_the_configured_width(project, capsys) -> None:
    """2-bit layer: weights shifted right until they fit, implicit shift 8 - 2."""
    x, w = data(4, 5, 5), data(3, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, quantization: 2,
              output_shift: -2}}
        """,
        sample=x,
        weights=[w],
    )
    high, low = int(w.max()), int(w.min())
    high, low = (high + 1 if high < 0 else high), (low + 1 if low < 0 else low)
    bits = max(abs(high).bit_length(), abs(low).bit_length()) + 1
    w2 = w >> (bits - 2)
    assert w2.min() >= -2 and w2.max() <= 1
    expected = simref.requantize(simref.conv2d(x, w2, pad=(1, 1)), -2 + 6)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_bypass_multiplies_by_one_with_shift_7(project, capsys) -> None:
    x = data(4, 5, 5, low=-20, high=20)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, kernel_size: 3x3, pad: 1,
              bypass: true, activate: abs}}
        """,
        sample=x,
    )
    expected = simref.absolute(
        simref.requantize(simref.conv2d(x, np.ones((4, 4, 3, 3)), pad=(1, 1)), 7)
    )
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_synthetic_weight_source_uses_its_own_array_without_passthrough_layers(
    project, capsys
) -> None:
    """For synthetic weights the vendor gives a `weight_source` layer its own array from the
    file; only when the file covers fewer layers than the YAML does it copy (and then a
    passthrough layer makes the counts disagree, which it refuses)."""
    x, w0, w1 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    layers = f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, name: a}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, weight_source: a}}
        """
    project.write(layers, sample=x, weights=[w0, w1])
    y = simref.requantize(simref.conv2d(x, w0, pad=(1, 1)), 0)
    expected = simref.requantize(simref.conv2d(y, w1, pad=(1, 1)), 0)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)
    layers += f"  - {{processors: {procs(3)}, out_offset: 0x2000, op: passthrough}}\n"
    project.write(layers, sample=x, weights=[w0, w1])
    assert "weights cover" in project.refuse(capsys=capsys)


def test_bypass_layers_and_the_vendors_weight_and_bias_lists(project, capsys) -> None:
    """Synthetic weights skip a layer when the layer numbered by the arrays read so far is a
    bypass layer, so a bypass layer must follow every layer with weights; after them it
    works, multiplying by one (and its bias entry is the empty one at its position)."""
    x = data(4, 5, 5, low=-10, high=10)
    w0, w1 = data(4, 4, 3, 3), data(4, 4, 3, 3)
    b0, b1 = data(4, low=-20, high=20), data(4, low=-20, high=20)

    def network(*kinds: str) -> str:
        text = "layers:\n"
        for i, kind in enumerate(kinds):
            offset = "0x2000" if i % 2 == 0 else "0"
            text += f"  - {{processors: {procs(4)}, out_offset: {offset}, op: conv2d, pad: 1"
            text += ", bypass: true, output_shift: 3}\n" if kind == "bypass" else f"{kind}}}\n"
        return text

    project.write(
        network(", activate: relu", "bypass", ""), sample=x, weights=[w0, w1], bias=[b0, b1]
    )
    assert "weights cover" in project.refuse(capsys=capsys)

    project.write(
        network(", activate: relu", "", "bypass"), sample=x, weights=[w0, w1], bias=[b0, b1]
    )
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, b0, pad=(1, 1)), 0))
    y = simref.requantize(simref.conv2d(y, w1, b1, pad=(1, 1)), 0)
    expected = simref.requantize(simref.conv2d(y, np.ones((4, 4, 3, 3)), pad=(1, 1)), 3)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_batchnorm_weights_count_as_checkpoint_layers_where_the_vendor_meets_them(
    project, capsys
) -> None:
    """--skip-checkpoint-layers counts unfolded BatchNorm weights too, and BatchNorm weights
    after the last layer the YAML needs are never looked at."""
    x, w0, w1 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    state = qat_layer("extra", data(2, 2, 3, 3)) | {"extra.bn.weight": np.ones(2)}
    state |= qat_layer("c0", w0) | qat_layer("c1", w1) | {"tail.bn.weight": np.ones(3)}
    save_checkpoint(project.root / "ck.pth.tar", state)
    write_yaml(project, TWO_CONVS, x)
    y = simref.relu(simref.requantize(simref.conv2d(x, w0, pad=(1, 1)), 0))
    expected = simref.requantize(simref.conv2d(y, w1, pad=(1, 1)), 0)
    got = project.run(
        "--checkpoint-file", "ck.pth.tar", "--skip-checkpoint-layers", "2", capsys=capsys
    )
    np.testing.assert_array_equal(got, expected)
    err = project.refuse(
        "--checkpoint-file", "ck.pth.tar", "--skip-checkpoint-layers", "1", capsys=capsys
    )
    assert "extra.bn.weight" in err
