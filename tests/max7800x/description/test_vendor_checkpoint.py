"""Checkpoints as the vendor's synthesizer sees them: layers, bias units, shifts, range checks."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.frontends.torchfile import write_torch_file
from edgesynth.targets.max7800x.description.checkpoint import (
    Checkpoint,
    CheckpointLayer,
    check_arch,
    guess_kind,
    load_checkpoint,
    resolve_quantization,
)

CORPUS = Path(__file__).parents[3].parent / "shared" / "corpus"
CHECKPOINTS = sorted(
    [*CORPUS.glob("cases/*/*/trained/*.pth.tar"), *CORPUS.glob("cases/*/*/tests/*.pth.tar")]
)


def _corpus(name: str) -> Path:
    return needs.in_corpus(CORPUS / "cases" / name)


@pytest.mark.parametrize("path", needs.corpus_params(CHECKPOINTS, CORPUS / "cases"))
def test_every_corpus_checkpoint_has_layers(path: Path | None) -> None:
    ckpt = load_checkpoint(needs.in_corpus(path))
    assert ckpt.arch
    assert ckpt.layers
    for layer in ckpt.layers:
        assert layer.weight.dtype == np.int64
        assert layer.kind in ("conv1d", "conv2d", "linear")
        assert layer.weight.ndim == {"linear": 2, "conv1d": 3, "conv2d": 4}[layer.kind]
        assert layer.weight_bits in (1, 2, 4, 8)
        assert layer.weight.min() >= -128 and layer.weight.max() <= 127
        assert not layer.name.startswith("module.")
        if layer.bias is not None:
            assert layer.bias.dtype == np.int64
            assert layer.bias.shape == (layer.weight.shape[0],)
            assert layer.bias.min() >= -128 and layer.bias.max() <= 127


def test_mnist_demo() -> None:
    ckpt = load_checkpoint(_corpus("MAX78000/mnist/trained/ai85-mnist-qat8-q.pth.tar"))
    assert ckpt.arch == "ai85net5"
    assert ckpt.epoch == 194
    assert ckpt.extras["best_top1"] == pytest.approx(99.3)
    assert len(ckpt.layers) == 5
    assert [layer.name for layer in ckpt.layers] == ["conv1", "conv2", "conv3", "conv4", "fc"]
    assert [layer.weight.shape for layer in ckpt.layers] == [
        (60, 1, 3, 3),
        (60, 60, 3, 3),
        (56, 60, 3, 3),
        (12, 56, 3, 3),
        (10, 192),
    ]
    assert [layer.kind for layer in ckpt.layers] == ["conv2d"] * 4 + ["linear"]
    assert [layer.weight_bits for layer in ckpt.layers] == [8] * 5
    assert [layer.output_shift for layer in ckpt.layers] == [-1, -2, -2, -1, 0]
    conv1, conv2, fc = ckpt.layers[0], ckpt.layers[1], ckpt.layers[4]
    assert conv1.weight.reshape(-1)[:5].tolist() == [51, 17, 4, 41, -10]
    assert conv2.weight[0, 0, 0].tolist() == [-70, -69, -112]
    assert conv2.weight[0, 0, 1, :2].tolist() == [-18, -22]
    assert fc.weight[0, :5].tolist() == [-16, 44, 94, 46, -69]
    assert fc.weight.reshape(-1)[-3:].tolist() == [86, 16, -26]
    # no conv biases; fc bias stored x128 and not always a multiple: floor division
    assert [layer.bias is None for layer in ckpt.layers] == [True] * 4 + [False]
    assert ckpt.state_dict["fc.op.bias"][:4].tolist() == [2936.0, 3624.0, -3490.0, -4417.0]
    assert fc.bias.tolist() == [22, 28, -28, -35, 19, -9, -32, -10, 31, 8]
    assert fc.bias_key == "fc.op.bias" and fc.key == "fc.op.weight"
    assert fc.params["quantize_activation"] == 1.0
    # the state dict is raw
    assert ckpt.state_dict["conv1.op.weight"].dtype == np.float32
    assert len(ckpt.state_dict) == 31


def test_same_checkpoint_on_both_devices() -> None:
    a = load_checkpoint(_corpus("MAX78000/mnist/trained/ai85-mnist-qat8-q.pth.tar"))
    b = load_checkpoint(_corpus("MAX78002/mnist/trained/ai85-mnist-qat8-q.pth.tar"))
    for x, y in zip(a.layers, b.layers, strict=True):
        np.testing.assert_array_equal(x.weight, y.weight)


def test_kws20_v3_duplicate_layers_keep_state_dict_order() -> None:
    """The state dict holds every layer twice; the vendor uses the first (bias-less) copies."""
    ckpt = load_checkpoint(_corpus("MAX78000/kws20_v3/trained/ai85-kws20_v3-qat8-q.pth.tar"))
    assert len(ckpt.layers) == 18
    first, second = ckpt.layers[:9], ckpt.layers[9:]
    assert all(layer.key.startswith("module.") for layer in first)
    assert all(layer.bias is None for layer in first)
    assert all(layer.bias is not None for layer in second)
    assert [layer.name for layer in first] == [layer.name for layer in second]
    assert first[0].name == "voice_conv1" and first[0].kind == "conv1d"
    assert first[0].weight.shape == (100, 128, 1)
    assert first[-1].kind == "linear" and first[-1].output_shift == 3
    assert [layer.output_shift for layer in first] == [1, 2, 2, 2, 1, 2, 2, 2, 3]


def test_older_test_checkpoint_naming() -> None:
    """`conv1.conv2d.weight` (legacy file), and two-level `fc.weight`/`fc.bias`."""
    ckpt = load_checkpoint(_corpus("MAX78000/test-cifar10-hwc/tests/test-cifar10-bias.pth.tar"))
    assert [layer.key for layer in ckpt.layers] == [
        "conv1.conv2d.weight",
        "conv2.conv2d.weight",
        "conv3.conv2d.weight",
        "conv4.conv2d.weight",
        "fc.weight",
    ]
    assert [layer.name for layer in ckpt.layers] == ["conv1", "conv2", "conv3", "conv4", "fc"]
    for layer in ckpt.layers:
        assert layer.weight_bits == 8 and layer.output_shift is None and not layer.params
        raw = ckpt.state_dict[layer.bias_key]
        np.testing.assert_array_equal(layer.bias, np.floor(raw / 128).astype(np.int64))
    assert ckpt.layers[4].bias_key == "fc.bias"


def test_nested_layer_names() -> None:
    path = _corpus("MAX78000/test-ai85-fire-cifar10/tests/test-firetestnet-cifar10.pth.tar")
    ckpt = load_checkpoint(path)
    assert [layer.name for layer in ckpt.layers] == [
        "fire1.squeeze_layer",
        "fire1.expand1x1_layer",
        "fire1.expand3x3_layer",
        "fc",
    ]
    assert ckpt.layers[-1].key == "fc.linear.weight" and ckpt.layers[-1].kind == "linear"


def test_weight_bits_zero_means_eight() -> None:
    path = _corpus("MAX78000/test-mpadd-minimal/tests/test-mp_add_minimized_q.pth.tar")
    ckpt = load_checkpoint(path)
    assert [layer.weight_bits for layer in ckpt.layers] == [8, 8, 8]
    assert ckpt.layers[0].params["weight_bits"] == 0.0
    assert [layer.output_shift for layer in ckpt.layers] == [-2, -6, -6]


def test_four_bit_checkpoint_against_yaml_quantization() -> None:
    path = _corpus("MAX78000/test-ai85-mnist80wide-q4/tests/test-mnist-80wide-q4.pth.tar")
    ckpt = load_checkpoint(path)
    conv1 = ckpt.layers[0]
    assert conv1.weight.min() == -6 and conv1.weight.max() == 6
    assert resolve_quantization(conv1, 4, binary_weights_supported=False) == (4, False)
    # without a YAML value the checkpoint's weight_bits (absent: 8) is used
    assert resolve_quantization(conv1, None, binary_weights_supported=False) == (8, False)
    with pytest.raises(EdgesynthError) as info:
        resolve_quantization(ckpt.layers[4], 4, binary_weights_supported=False, index=4)
    message = str(info.value)
    assert "layer 4 (fc)" in message
    assert "-127 to 127" in message and "-8 to 7" in message and "4-bit" in message


def _layer(weight, bits: int = 8) -> CheckpointLayer:
    return CheckpointLayer("l", np.asarray(weight, dtype=np.int64), None, bits)


def test_resolve_quantization_rules() -> None:
    ones = _layer([[1, -1], [-1, 1]])
    assert resolve_quantization(ones, None, binary_weights_supported=True) == (1, True)
    assert resolve_quantization(ones, None, binary_weights_supported=False) == (8, False)
    assert resolve_quantization(ones, -1, binary_weights_supported=True) == (1, True)
    assert resolve_quantization(_layer([[0, 0]]), None, binary_weights_supported=True) == (1, False)
    assert resolve_quantization(_layer([[3, -4]], 4), None, binary_weights_supported=False) == (
        4,
        False,
    )
    with pytest.raises(EdgesynthError, match="-1 or \\+1"):
        resolve_quantization(_layer([[1, 0]]), -1, binary_weights_supported=True)
    with pytest.raises(EdgesynthError, match="allowed -8 to 7"):
        resolve_quantization(_layer([[9, 0]], 4), None, binary_weights_supported=False)
    with pytest.raises(EdgesynthError, match="1, 2, 4 or 8"):
        resolve_quantization(_layer([[1]]), 3, binary_weights_supported=False)


def test_check_arch() -> None:
    ckpt = Checkpoint(Path("x.pth.tar"), "ai85net5", 1, {}, [])
    check_arch(ckpt, "AI85Net5")
    check_arch(ckpt, None)
    with pytest.raises(EdgesynthError, match=r"ai84net5.*ai85net5"):
        check_arch(ckpt, "ai84net5")


def test_guess_kind() -> None:
    assert guess_kind("fc.op.weight", 2) == "linear"
    assert guess_kind("conv.op.weight", 3) == "conv1d"
    assert guess_kind("conv.op.weight", 4) == "conv2d"
    assert guess_kind("upconv1.op.weight", 4) == "convtranspose2d"
    assert guess_kind("x.weight", 5) == "unknown"


# ------------------------------------------------------------------------------------------
# hand-made checkpoints


def _write(tmp_path: Path, state: dict, **top) -> Path:
    path = tmp_path / "net.pth.tar"
    obj = {"epoch": 3, "arch": "testnet", **top}
    if state is not None:
        obj["state_dict"] = collections.OrderedDict(
            (k, np.asarray(v, dtype=np.float32)) for k, v in state.items()
        )
    write_torch_file(path, obj)
    return path


def test_bias_uses_checkpoint_weight_bits(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "module.c1.output_shift": [2.0],
            "module.c1.weight_bits": [4.0],
            "module.c1.op.weight": np.full((2, 1, 3, 3), -8.0),
            "module.c1.op.bias": [-9.0, 63.0],  # / 2**3 -> floor
            "weight": [[1.0]],  # no dot: not a layer
            "c2.op.weight": np.ones((3, 2)),
            "c2.op.bias": [128.0, -129.0, 0.0],
        },
    )
    ckpt = load_checkpoint(path)
    c1, c2 = ckpt.layers
    assert c1.name == "c1" and c1.key == "module.c1.op.weight"
    assert c1.weight_bits == 4 and c1.output_shift == 2
    assert c1.bias.tolist() == [-2, 7]
    assert c2.bias.tolist() == [1, -2, 0]
    assert c2.output_shift is None and c2.weight_bits == 8


def test_no_bias_positions(tmp_path: Path) -> None:
    path = _write(tmp_path, {"a.op.weight": np.ones((2, 2)), "a.op.bias": [128.0, 256.0]})
    assert load_checkpoint(path).layers[0].bias is not None
    layer = load_checkpoint(path, no_bias=[0]).layers[0]
    assert layer.bias is None and layer.bias_key is None


def test_weights_out_of_range(tmp_path: Path) -> None:
    path = _write(tmp_path, {"conv7.op.weight": [[[[200.0, -3.0]]]]})
    with pytest.raises(EdgesynthError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert str(path) in message and "conv7" in message
    assert "-3 to 200" in message and "allowed -128 to 127" in message


def test_bias_out_of_range(tmp_path: Path) -> None:
    path = _write(tmp_path, {"fc.op.weight": [[1.0]], "fc.op.bias": [128.0 * 200]})
    with pytest.raises(EdgesynthError, match=r"fc.*200.*-128 to 127"):
        load_checkpoint(path)


def test_unfolded_batchnorm(tmp_path: Path) -> None:
    state = {"c1.op.weight": np.ones((4, 1, 1, 1)), "c1.bn.weight": np.ones(4)}
    path = _write(tmp_path, state)
    with pytest.raises(EdgesynthError, match="BatchNorm"):
        load_checkpoint(path)
    ckpt = load_checkpoint(path, ignore_bn=True)
    assert [layer.key for layer in ckpt.layers] == ["c1.op.weight"]
    assert any("BatchNorm" in w for w in ckpt.warnings)
    other = _write(tmp_path, {"c1.op.weight": np.ones(4)})
    with pytest.raises(EdgesynthError, match="1-dimensional"):
        load_checkpoint(other)


def test_unquantized_weights_are_refused_pointing_to_quantize(tmp_path: Path) -> None:
    """The vendor truncates float weights (often all to 0) and goes on; we refuse."""
    path = _write(tmp_path, {"c.op.weight": [[1.7, -1.7, 0.2]]})
    with pytest.raises(EdgesynthError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert str(path) in message and "`c.op.weight` holds weights that are not integers" in message
    assert (
        f"edgesynth quantize {path.name} {path.name.removesuffix('.pth.tar')}-q.pth.tar" in message
    )


def test_missing_state_dict_and_arch(tmp_path: Path) -> None:
    path = _write(tmp_path, None)
    with pytest.raises(EdgesynthError, match="no `state_dict`") as info:
        load_checkpoint(path)
    assert str(path) in str(info.value)
    path = tmp_path / "noarch.pth.tar"
    write_torch_file(path, {"state_dict": {"a.weight": np.ones((1, 1), dtype=np.float32)}})
    ckpt = load_checkpoint(path)
    assert ckpt.arch is None and ckpt.epoch is None
    assert any("arch" in w for w in ckpt.warnings)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(EdgesynthError, match="does not exist") as info:
        load_checkpoint(tmp_path / "gone.pth.tar")
    assert str(tmp_path / "gone.pth.tar") in str(info.value)
