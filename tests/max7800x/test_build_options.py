"""`edgesynth izer` options that change the known-answer numbers, each compared value for
value with an independent reference (tests/sim/simref.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))

import simref
from simref import Project

RNG = np.random.default_rng(23)


def data(*shape: int, low: int = -128, high: int = 128) -> np.ndarray:
    return RNG.integers(low, high, size=shape, dtype=np.int64)


def procs(n: int, first: int = 0) -> str:
    return f"0x{((1 << n) - 1) << first:016x}"


def conv(x, w, bias=None, shift=0, pad=1, relu=False) -> np.ndarray:
    y = simref.requantize(simref.conv2d(x, w, bias, pad=(pad, pad)), shift)
    return simref.relu(y) if relu else y


@pytest.fixture
def project(tmp_path, monkeypatch) -> Project:
    return Project(tmp_path / "p", monkeypatch)


THREE_CONVS = f"""
    layers:
      - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, activate: relu}}
      - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, activate: relu}}
      - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1}}
    """


@pytest.fixture
def three(project) -> tuple[Project, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    x = data(4, 5, 5)
    weights = [data(4, 4, 3, 3), data(4, 4, 3, 3), data(3, 4, 3, 3)]
    biases = [data(4, low=-20, high=20), data(4, low=-20, high=20), data(3, low=-20, high=20)]
    project.write(THREE_CONVS, sample=x, weights=weights, bias=biases)
    return project, x, weights, biases


def test_stop_after_ends_the_network_early(three, capsys) -> None:
    project, x, w, b = three
    expected = conv(conv(x, w[0], b[0], relu=True), w[1], b[1], relu=True)
    np.testing.assert_array_equal(project.run("--stop-after", "1", capsys=capsys), expected)


def test_start_layer_feeds_the_sample_to_that_layer(three, capsys) -> None:
    project, x, w, b = three
    expected = conv(conv(x, w[1], b[1], relu=True), w[2], b[2])
    np.testing.assert_array_equal(project.run("--start-layer", "1", capsys=capsys), expected)


def test_skip_yaml_layers_drops_leading_layers_and_their_numbers(project, capsys) -> None:
    """The weights file is read from its start for the layers that remain; numeric
    references lose the skipped layers too (`next_sequence: 3` is then layer 2)."""
    x, w = data(4, 5, 5), [data(4, 4, 3, 3), data(3, 4, 3, 3)]
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, activate: relu,
              next_sequence: 3}}
          - {{processors: {procs(4)}, out_offset: 0x2000, op: passthrough, max_pool: 2}}
          - {{processors: {procs(4)}, out_offset: 0x1000, op: conv2d, pad: 0}}
        """,
        sample=x,
        weights=w,
    )
    expected = conv(conv(x, w[0], relu=True), w[1], pad=0)
    got = project.run("--skip-yaml-layers", "1", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    ("option", "dropped"), [(("--no-bias", "1"), {1}), (("--no-bias",), {0, 1, 2})]
)
def test_no_bias(three, capsys, option, dropped) -> None:
    """A layer in --no-bias still uses up its array of the bias file."""
    project, x, w, b = three
    bias = [None if i in dropped else b[i] for i in range(3)]
    expected = conv(
        conv(conv(x, w[0], bias[0], relu=True), w[1], bias[1], relu=True), w[2], bias[2]
    )
    np.testing.assert_array_equal(project.run(*option, capsys=capsys), expected)


def test_output_width_32_gives_the_raw_accumulator(three, capsys) -> None:
    project, x, w, b = three
    y = conv(conv(x, w[0], b[0], relu=True), w[1], b[1], relu=True)
    expected = simref.conv2d(y, w[2], b[2], pad=(1, 1))
    np.testing.assert_array_equal(project.run("--output-width", "32", capsys=capsys), expected)


def test_ignore_activation(three, capsys) -> None:
    project, x, w, b = three
    expected = conv(conv(conv(x, w[0], b[0]), w[1], b[1]), w[2], b[2])
    np.testing.assert_array_equal(project.run("--ignore-activation", capsys=capsys), expected)


@pytest.mark.parametrize("option", ["--zero-sram", "--pretend-zero-sram"])
def test_test_bist_clears_every_seventh_kernel(three, capsys, option) -> None:
    """The vendor clears every 7th kernel for --test-bist with --zero-sram or
    --pretend-zero-sram; either option alone leaves the weights as they are."""
    project, x, w, b = three

    def cleared(weight: np.ndarray) -> np.ndarray:
        out = weight.copy()
        out.reshape(-1, 3, 3)[::7] = 0  # kernels numbered output-major, input-minor
        return out

    plain = conv(conv(conv(x, w[0], b[0], relu=True), w[1], b[1], relu=True), w[2], b[2])
    np.testing.assert_array_equal(project.run(option, capsys=capsys), plain)
    c = [cleared(v) for v in w]
    expected = conv(conv(conv(x, c[0], b[0], relu=True), c[1], b[1], relu=True), c[2], b[2])
    np.testing.assert_array_equal(project.run(option, "--test-bist", capsys=capsys), expected)
    np.testing.assert_array_equal(project.run("--test-bist", capsys=capsys), plain)


def test_test_bist_leaves_layers_without_weights_alone(project, capsys) -> None:
    x, w = data(4, 5, 5), data(4, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: passthrough}}
        """,
        sample=x,
        weights=[w],
    )
    cleared = w.copy()
    cleared.reshape(-1, 3, 3)[::7] = 0
    expected = simref.requantize(simref.conv2d(x, cleared, pad=(1, 1)), 0)
    got = project.run("--zero-sram", "--test-bist", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


def test_all_zero_layer_outputs_are_warned_about_unless_no_warn_zero(project, capsys) -> None:
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1}}
        """,
        sample=data(4, 5, 5),
        weights=[np.zeros((4, 4, 3, 3), dtype=np.int64)],
    )
    project.run(capsys=None)
    assert "layer 0: all output values for the given sample input are zero" in (
        capsys.readouterr().err
    )
    project.run("--no-warn-zero", capsys=None)
    assert "all output values" not in capsys.readouterr().err


@pytest.mark.parametrize(("fmt", "mask"), [("555", (7, 7, 7)), ("565", (7, 3, 7))])
def test_input_csv_format_drops_the_low_bits_of_the_sample(project, capsys, fmt, mask) -> None:
    x, w = data(3, 6, 6), data(4, 3, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(3)}, out_offset: 0, op: conv2d, pad: 1}}
        """,
        sample=x,
        weights=[w],
    )
    masked = np.stack([x[c] - (x[c] % (mask[c] + 1)) for c in range(3)])
    got = project.run("--input-csv-format", fmt, capsys=capsys)
    np.testing.assert_array_equal(got, conv(masked, w))


def synthesized(sample: np.ndarray, increment: int, words: int) -> np.ndarray:
    """The documented --synthesize-input rule, one word at a time: each block of `words`
    pixels is the previous block plus `increment`, all channels read as one number."""
    c_n = sample.shape[0]
    flat = sample.reshape(c_n, -1).copy()
    for start in range(words, flat.shape[1], words):
        for j in range(words):
            value = sum((int(flat[c, start - words + j]) & 0xFF) << (8 * c) for c in range(c_n))
            value = (value + increment) % (1 << (8 * c_n))
            for c in range(c_n):
                byte = (value >> (8 * c)) & 0xFF
                flat[c, start + j] = byte - 256 if byte > 127 else byte
    return flat.reshape(sample.shape)


def test_synthesize_input_changes_the_sample(project, capsys) -> None:
    x, w = data(3, 4, 4), data(4, 3, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(3)}, out_offset: 0, op: conv2d, pad: 1}}
        """,
        sample=x,
        weights=[w],
    )
    args = ("--fifo", "--synthesize-input", "0x7f0180", "--synthesize-words", "4")
    expected = conv(synthesized(x, 0x7F0180, 4), w)
    np.testing.assert_array_equal(project.run(*args, capsys=capsys), expected)
    err = project.refuse(
        "--fifo", "--synthesize-input", "1", "--synthesize-words", "5", capsys=capsys
    )
    assert "--synthesize-words" in err


def test_weight_and_bias_input_files_replace_the_defaults(three, capsys) -> None:
    project, x, w, b = three
    other_w = [v[::-1].copy() for v in w[:2]] + [w[2]]
    other_b = [v + 1 for v in b]
    with open(project.root / "other_w.npy", "wb") as f:
        for v in other_w:
            np.save(f, v)
    with open(project.root / "other_b.npy", "wb") as f:
        for v in other_b:
            np.save(f, v)
    expected = conv(
        conv(conv(x, other_w[0], other_b[0], relu=True), other_w[1], other_b[1], relu=True),
        other_w[2],
        other_b[2],
    )
    got = project.run("--weight-input", "other_w.npy", "--bias-input", "other_b.npy", capsys=capsys)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("option", ["--simple1b", "--fixed-input"])
def test_options_that_leave_the_known_answer_unchanged(three, capsys, option) -> None:
    """--simple1b only sets a control bit and --fixed-input only changes the generated input
    loader; the vendor's known answer is computed from the sample and weights as before."""
    project, *_ = three
    np.testing.assert_array_equal(project.run(option, capsys=capsys), project.run(capsys=capsys))


def test_sequence_keys_order_the_layers(project, capsys) -> None:
    """`sequence` numbers place the layers (the listing order does not matter); weights are
    read in that order."""
    x, w0, w1 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{sequence: 1, processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1}}
          - {{sequence: 0, processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1,
              activate: relu}}
        """,
        sample=x,
        weights=[w0, w1],
    )
    expected = conv(conv(x, w0, relu=True), w1)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_legacy_test_interleaves_the_operands_of_later_layers(project, capsys) -> None:
    """--legacy-test: an element-wise layer that is not the first takes its operands from
    alternating columns of its input (the first layer still splits by channel)."""
    x, w = data(4, 6, 6), data(4, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: add, in_dim: [6, 3]}}
        """,
        sample=x,
        weights=[w],
    )
    y = conv(x, w)
    expected = np.clip(y[:, :, 0::2] + y[:, :, 1::2], -128, 127)
    np.testing.assert_array_equal(project.run("--legacy-test", capsys=capsys), expected)


def test_sample_must_be_stored_as_int64(project, capsys) -> None:
    x, w = data(4, 5, 5), data(3, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1}}
        """,
        sample=x,
        weights=[w],
    )
    np.save(project.root / "tests" / "sample_t.npy", x.astype(">i8"))
    np.testing.assert_array_equal(project.run(capsys=capsys), conv(x, w))
    np.save(project.root / "tests" / "sample_t.npy", x.astype(np.int8))
    assert "int64" in project.refuse(capsys=capsys)
