"""Sample inputs and the vendor's synthetic weight/bias files."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.frontends.npy import load_npy_arrays, load_sample
from edgesynth.targets.max7800x.description.npyfile import (
    load_synthetic_bias,
    load_synthetic_layers,
    requantize_synthetic,
    sample_path,
    synthetic_bias_path,
    synthetic_weights_path,
)

CORPUS = Path(__file__).parents[3].parent / "shared" / "corpus"
CASES = CORPUS / "cases"


def _need(path: Path) -> Path:
    return needs.in_corpus(path)


def _save_all(path: Path, *arrays: np.ndarray) -> Path:
    with path.open("wb") as stream:
        for array in arrays:
            np.save(stream, array)
    return path


# ------------------------------------------------------------------------------------------
# load_npy_arrays


def test_several_arrays_round_trip(tmp_path: Path) -> None:
    arrays = [np.arange(6).reshape(2, 3), np.array([-1, 2], dtype=np.int8), np.zeros((0,))]
    got = load_npy_arrays(_save_all(tmp_path / "w.npy", *arrays))
    assert len(got) == 3
    for a, b in zip(got, arrays, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_empty_file_holds_no_arrays(tmp_path: Path) -> None:
    path = tmp_path / "weights_none.npy"
    path.write_bytes(b"")
    assert load_npy_arrays(path) == []


def test_corrupt_files(tmp_path: Path) -> None:
    text = tmp_path / "text.npy"
    text.write_text("not numpy")
    with pytest.raises(
        EdgesynthError, match=r"it is a text file \(it begins `not numpy`\)"
    ) as info:
        load_npy_arrays(text)
    assert str(text) in str(info.value)

    buffer = io.BytesIO()
    np.save(buffer, np.arange(10))
    np.save(buffer, np.arange(1000))
    cut = tmp_path / "cut.npy"
    cut.write_bytes(buffer.getvalue()[:-50])
    with pytest.raises(EdgesynthError, match=r"array 1 \(byte \d+\)"):
        load_npy_arrays(cut)

    pickled = tmp_path / "obj.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(EdgesynthError, match="not a valid"):
        load_npy_arrays(pickled)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(EdgesynthError, match="does not exist") as info:
        load_npy_arrays(tmp_path / "nope.npy", what="weights")
    assert "weights file" in str(info.value) and "nope.npy" in str(info.value)


def test_every_corpus_weight_and_bias_file_reads() -> None:
    files = sorted({*CASES.glob("*/*/tests/weights_*.npy"), *CASES.glob("*/*/tests/bias_*.npy")})
    assert len(files) >= 500, needs.in_corpus(CASES)
    for path in files:
        arrays = load_npy_arrays(path)
        assert all(a.dtype == np.int64 for a in arrays), path
        assert all(a.size == 0 or (a.min() >= -128 and a.max() <= 127) for a in arrays), path


# ------------------------------------------------------------------------------------------
# samples


def test_every_corpus_sample_reads() -> None:
    files = sorted(CASES.glob("*/*/tests/sample_*.npy"))
    assert len(files) >= 500, needs.in_corpus(CASES)
    for path in files:
        data = load_sample(path)
        assert data.dtype == np.int64 and data.ndim in (2, 3), path


def test_mnist_sample() -> None:
    data = load_sample(_need(CASES / "MAX78000/mnist/tests/sample_mnist.npy"))
    assert data.shape == (1, 28, 28)
    assert sample_path(CASES / "MAX78000/mnist", "MNIST") == (
        CASES / "MAX78000/mnist/tests/sample_mnist.npy"
    )


def test_sample_errors(tmp_path: Path) -> None:
    with pytest.raises(EdgesynthError, match="does not exist"):
        load_sample(tmp_path / "sample_x.npy")
    cases = {
        "frac": (np.array([[0.5, 1.0]]), "integers"),
        "range": (np.array([[0, 200]]), "outside the limits"),
        "dims": (np.arange(4), "C x H x W"),
    }
    for name, (array, words) in cases.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, array)
        with pytest.raises(EdgesynthError, match=words) as info:
            load_sample(path)
        assert str(path) in str(info.value)
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    with pytest.raises(EdgesynthError, match="empty"):
        load_sample(empty)
    # integral floats are accepted as integers
    ok = tmp_path / "ok.npy"
    np.save(ok, np.array([[1.0, -2.0]]))
    assert load_sample(ok).tolist() == [[1, -2]]


# ------------------------------------------------------------------------------------------
# synthetic weights


def test_paths() -> None:
    base = Path("case")
    assert synthetic_weights_path(base, "Test_Conv1D-1") == Path(
        "case/tests/weights_test_conv1d-1.npy"
    )
    assert synthetic_weights_path(base, "x", "weights_other") == Path(
        "case/tests/weights_other.npy"
    )
    assert synthetic_bias_path(base, "rand64") == Path("case/tests/bias_rand64.npy")


def test_single_stacked_array_corpus() -> None:
    case = _need(CASES / "MAX78000/test-conv1d-1")
    layers = load_synthetic_layers(synthetic_weights_path(case, "test_conv1d-1"))
    assert len(layers) == 1
    (layer,) = layers
    assert layer.weight.shape == (33, 2, 1) and layer.kind == "conv1d"
    assert layer.weight_bits == 8 and layer.output_shift is None and layer.bias is None
    assert layer.synthetic and not layer.binary
    raw = np.load(case / "tests/weights_test_conv1d-1.npy")
    np.testing.assert_array_equal(layer.weight, raw[0])


def test_one_array_per_layer_with_biases_corpus() -> None:
    case = _need(CASES / "MAX78002/test-ffsx4readahead-nopad-multipass5-bias")
    weights = synthetic_weights_path(case, "test_ffs-multipass5")
    bias = synthetic_bias_path(case, "ffs-multipass5")
    layers = load_synthetic_layers(weights, bias, quantization=[None] * 5)
    assert [layer.weight.shape[0] for layer in layers] == [320, 128, 64, 16, 4]
    assert [layer.bias.shape for layer in layers] == [(320,), (128,), (64,), (16,), (4,)]
    raw = load_npy_arrays(bias)
    np.testing.assert_array_equal(layers[2].bias, raw[2])  # used as stored: no division


def test_bypass_cases_have_empty_weight_files() -> None:
    case = _need(CASES / "MAX78002/test-bypass")
    assert load_synthetic_layers(synthetic_weights_path(case, "test_bypass"), quantization=[]) == []


def test_requantize_like_the_vendor() -> None:
    w = np.array([-128, -65, -64, -1, 0, 1, 63, 64, 127])
    same, bits, binary = requantize_synthetic(w, None, name="x")
    assert (bits, binary) == (8, False)
    np.testing.assert_array_equal(same, w)
    four, bits, _ = requantize_synthetic(w, 4, name="x")
    assert bits == 4
    np.testing.assert_array_equal(four, w >> 4)  # needs 8 bits -> shift by 4 (floor)
    small = np.array([-8, 7, 3])
    np.testing.assert_array_equal(requantize_synthetic(small, 4, name="x")[0], small)
    np.testing.assert_array_equal(requantize_synthetic(small, 2, name="x")[0], small >> 2)
    ones, bits, binary = requantize_synthetic(np.array([-3, 0, 5]), -1, name="x")
    assert (bits, binary) == (1, True)
    assert ones.tolist() == [-1, 1, 1]
    zeros, bits, _ = requantize_synthetic(np.zeros(4, dtype=np.int64), 1, name="x")
    assert bits == 1 and not zeros.any()
    with pytest.raises(EdgesynthError, match="more than 8 bits"):
        requantize_synthetic(np.array([0, 128]), 8, name="x")
    with pytest.raises(EdgesynthError, match="more than 8 bits"):
        requantize_synthetic(np.array([-129]), 8, name="x")
    with pytest.raises(EdgesynthError, match="1, 2, 4 or 8"):
        requantize_synthetic(np.array([1]), 3, name="x")
    # the input array is not modified
    np.testing.assert_array_equal(w, [-128, -65, -64, -1, 0, 1, 63, 64, 127])


def test_synthetic_layers_quantization_and_biases(tmp_path: Path) -> None:
    w0 = np.arange(-64, 64).reshape(8, 16)[:, :, None, None] * 2  # -128..126: 8 bits
    w1 = np.arange(-9, 9).reshape(2, 3, 3)  # conv1d, needs 5 bits
    weights = _save_all(tmp_path / "weights_t.npy", w0, w1, np.ones((1, 1, 1, 1)))
    bias = _save_all(tmp_path / "bias_b.npy", np.arange(8), np.array([5, -5]))
    layers = load_synthetic_layers(weights, bias, quantization=[2, None])
    assert len(layers) == 2
    assert layers[0].weight_bits == 2 and layers[0].kind == "conv2d"
    np.testing.assert_array_equal(layers[0].weight, w0 >> 6)
    assert layers[1].weight_bits == 8 and layers[1].kind == "conv1d"
    np.testing.assert_array_equal(layers[1].weight, w1)
    assert layers[1].bias.tolist() == [5, -5]
    assert layers[0].name == "weights_t[0]"
    # no_bias: the layer consumes its array but gets none
    layers = load_synthetic_layers(weights, bias, quantization=[None, None], no_bias=[0])
    assert layers[0].bias is None and layers[1].bias.tolist() == [5, -5]
    # without a quantization list: one layer per array
    assert len(load_synthetic_layers(weights)) == 3
    with pytest.raises(EdgesynthError, match=r"4 layers with weights.*3 arrays") as info:
        load_synthetic_layers(weights, quantization=[None] * 4)
    assert str(weights) in str(info.value)


def test_synthetic_bias_file_shorter_than_layers(tmp_path: Path) -> None:
    bias = _save_all(tmp_path / "bias_s.npy", np.array([1, 2]))
    assert [b if b is None else b.tolist() for b in load_synthetic_bias(bias, 3)] == [
        [1, 2],
        None,
        None,
    ]
    big = _save_all(tmp_path / "bias_big.npy", np.array([300]))
    with pytest.raises(EdgesynthError, match="does not fit 8 bits"):
        load_synthetic_bias(big, 1)


def test_single_array_must_be_a_stack(tmp_path: Path) -> None:
    path = tmp_path / "weights_flat.npy"
    np.save(path, np.arange(6).reshape(2, 3))
    with pytest.raises(EdgesynthError, match="stack"):
        load_synthetic_layers(path)


def test_float_weights_must_be_integral(tmp_path: Path) -> None:
    path = _save_all(tmp_path / "weights_f.npy", np.full((1, 1, 1, 1), 0.5), np.ones((1, 1, 1)))
    with pytest.raises(EdgesynthError, match="integers"):
        load_synthetic_layers(path)
