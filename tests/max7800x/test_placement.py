"""Automatic placement: YAML text insertion, given keys kept, and random networks with residual and
concatenation branches placed and proven on the virtual device."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions, run_plan
from edgesynth.targets.max7800x.description.yamlcfg import load_spec
from edgesynth.targets.max7800x.placement import Unplaceable
from edgesynth.targets.max7800x.placement.yamltext import with_placement

HERE = Path(__file__).resolve().parent
MNIST = HERE.parents[2] / "shared" / "corpus" / "cases" / "MAX78000" / "mnist"


@contextlib.contextmanager
def inside(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


# -- the YAML text ------------------------------------------------------------------------------

BLOCK_YAML = """\
---
# a comment that stays
arch: test
dataset: t

layers:
  # first
  - op: conv2d
    in_sequences:
      - -1
    pad: 1

  # second: given keys are kept
  - processors: 0x00000000000000ff
    op: conv2d  # trailing comment
  - {op: none, pad: 0}
"""


def test_chosen_keys_go_inside_each_entry_and_the_rest_is_kept(tmp_path):
    path = tmp_path / "net.yaml"
    path.write_text(BLOCK_YAML)
    spec = load_spec(path)
    chosen = {
        0: {"processors": 0x7, "out_offset": 0x1000},
        1: {"out_offset": 0},
        2: {"in_offset": 0x2000},
    }
    text = with_placement(BLOCK_YAML, spec, chosen, str(path))
    for line in BLOCK_YAML.splitlines():
        assert line in text.splitlines() or line.startswith("  - {")
    data = yaml.safe_load(text)
    first, second, third = data["layers"]
    assert first["in_sequences"] == [-1] and first["processors"] == 7
    assert first["out_offset"] == 0x1000 and first["pad"] == 1
    assert second["processors"] == 0xFF and second["out_offset"] == 0
    assert third == {"op": "none", "pad": 0, "in_offset": 0x2000}
    placed = tmp_path / "placed.yaml"
    placed.write_text(text)
    again = load_spec(placed)
    assert again.layers[0].out_offset == 0x1000 and again.layers[2].in_offset == 0x2000
    assert again.layers[1].processors == 0xFF


# -- the command on the real MNIST network ----------------------------------------------------


def _stripped_mnist(tmp_path: Path, keep: dict[int, dict[str, int]] | None = None) -> Path:
    source = MNIST / "networks" / "mnist-chw-ai85.yaml"
    data = yaml.safe_load(source.read_text())
    for i, layer in enumerate(data["layers"]):
        for key in ("processors", "output_processors", "in_offset", "out_offset"):
            layer.pop(key, None)
        layer.update((keep or {}).get(i, {}))
    path = tmp_path / "mnist.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.usefixtures("corpus")  # fails when the corpus is missing
def test_plan_writes_a_yaml_that_synthesizes_to_the_same_answer(tmp_path, capsys):
    yaml_path = _stripped_mnist(tmp_path)
    out = tmp_path / "planned.yaml"
    checkpoint = MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"
    with inside(MNIST):
        lines = run_plan(PlanOptions(network=yaml_path, checkpoint=checkpoint, output=out))
    assert any("no memory hazard" in line for line in lines)
    planned = load_spec(out)
    assert all(layer.processors is not None for layer in planned.layers)
    assert all(layer.out_offset is not None for layer in planned.layers)
    # The planned YAML needs no choice any more and gives the vendor's known answer.
    with inside(MNIST):
        again = run_plan(PlanOptions(network=out, checkpoint=checkpoint))
    assert "nothing to choose" in again[0]
    # An existing -o file is kept unless --overwrite.
    with inside(MNIST), pytest.raises(EdgesynthError, match="--overwrite"):
        run_plan(PlanOptions(network=yaml_path, checkpoint=checkpoint, output=out))
    capsys.readouterr()


@pytest.mark.usefixtures("corpus")  # fails when the corpus is missing
def test_given_keys_are_kept(tmp_path, capsys):
    keep = {1: {"processors": 0x00000FFFFFFFFFFF0 >> 4 << 4 | 0, "out_offset": 0x4000}}
    keep = {1: {"processors": 0x0FFFFFFFFFFFFFFF, "out_offset": 0x4000}}
    yaml_path = _stripped_mnist(tmp_path, keep)
    out = tmp_path / "planned.yaml"
    with inside(MNIST):
        run_plan(
            PlanOptions(
                network=yaml_path,
                checkpoint=MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar",
                output=out,
            )
        )
    planned = load_spec(out)
    assert planned.layers[1].processors == 0x0FFFFFFFFFFFFFFF
    assert planned.layers[1].out_offset == 0x4000
    # layer 0 writes what layer 1 reads: its output map follows the given `processors`
    assert planned.layers[0].output_processors == 0x0FFFFFFFFFFFFFFF
    capsys.readouterr()


@pytest.mark.usefixtures("corpus")  # fails when the corpus is missing
def test_conflicting_given_keys_are_refused_with_the_key(tmp_path):
    keep = {0: {"out_offset": 0x1000}, 1: {"in_offset": 0x2000}}
    yaml_path = _stripped_mnist(tmp_path, keep)
    with inside(MNIST), pytest.raises(EdgesynthError) as err:
        run_plan(
            PlanOptions(
                network=yaml_path, checkpoint=MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"
            )
        )
    assert err.value.key == "in_offset" and err.value.layer == 1
    assert "disagrees with `out_offset` of layer 0" in err.value.message


def _plan_and_prove(folder: Path, device: str, izer_options: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    """`edgesynth plan net.yaml -o planned.yaml` in `folder`; the plan's writes must pass on
    the virtual device. Returns the planned YAML's spec."""
    out = folder / "planned.yaml"
    options = PlanOptions(
        network=Path("net.yaml"),
        checkpoint=None,
        device=device,
        output=out,
        izer_options=izer_options,
    )
    with inside(folder), contextlib.redirect_stdout(None):
        lines = run_plan(options)
    assert any(line.startswith("known answer reproduced on the virtual") for line in lines)
    return load_spec(out)


# -- read_gap: a layer that reads one pass of a multi-pass output ------------------------------


def _gap_network(folder: Path, read_gap: int, skip: int = 0) -> Path:
    """Layer 0 writes 128 channels (two words per pixel on the MAX78002's 64 processors);
    layer 1 reads 2 channels after the first `skip`, every `read_gap + 1`-th word
    (`--reshape-inputs`: the known answer drops the other channels too)."""
    layers = [
        {"op": "conv2d", "kernel_size": "3x3", "pad": 1, "activate": "ReLU", "data_format": "HWC"},
        {"op": "conv2d", "kernel_size": "3x3", "pad": 1, "in_channels": 2, "in_skip": read_gap},
    ]
    if skip:
        layers[1]["in_channel_skip"] = skip
    (folder / "tests").mkdir()
    rng = np.random.default_rng(7)
    with open(folder / "tests" / "weights_gap.npy", "wb") as stream:
        for shape in ((128, 3, 3, 3), (8, 2, 3, 3)):
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    sample = rng.integers(-128, 128, size=(3, 6, 6), dtype=np.int64)
    np.save(folder / "tests" / "sample_gap.npy", sample)
    spec = {"arch": "test", "dataset": "gap", "layers": layers}
    (folder / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder / "net.yaml"


@pytest.mark.parametrize("skip", [0, 5])
def test_a_read_gap_reader_gets_its_channels_processors_of_the_source(tmp_path, skip):
    _gap_network(tmp_path, read_gap=1, skip=skip)
    planned = _plan_and_prove(tmp_path, "MAX78002", ("--reshape-inputs",))
    first, second = planned.layers
    assert bin(first.output_processors).count("1") == 64
    assert second.in_offset == first.out_offset
    low = first.output_processors & -first.output_processors
    assert second.processors == (low | low << 1) << skip  # the source's processors it reads


def test_a_read_gap_that_skips_other_than_a_pass_is_refused_by_name(tmp_path):
    _gap_network(tmp_path, read_gap=2)
    with inside(tmp_path), pytest.raises(Unplaceable) as err:
        run_plan(
            PlanOptions(
                network=Path("net.yaml"),
                checkpoint=None,
                device="MAX78002",
                izer_options=("--reshape-inputs",),
            )
        )
    assert err.value.key == "read_gap" and err.value.layer == 1
    assert "writes 2 word(s) per pixel" in err.value.message


def test_an_element_wise_operand_also_read_with_a_gap(tmp_path):
    """The vendor's MAX78002 residual networks (EfficientNet, FPN detector): a tensor written
    interleaved for a later addition is also read by the next layer with `read_gap: 1`, with
    no passthrough copy. The planner keeps it in the interleaved block and gives the reader its
    word; the project's writes reproduce the known answer on the virtual device."""
    conv = {"op": "conv2d", "kernel_size": "3x3", "pad": 1}
    layers = [
        {**conv, "activate": "ReLU", "data_format": "HWC"},  # 0: the residual
        {**conv, "read_gap": 1, "activate": "ReLU"},  # 1: reads 0, every other word
        {**conv, "in_sequences": [1]},  # 2: the branch
        {"op": "none", "eltwise": "add", "in_sequences": [0, 2]},  # 3: 0 + 2, interleaved
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0},
    ]
    (tmp_path / "tests").mkdir()
    rng = np.random.default_rng(11)
    with open(tmp_path / "tests" / "weights_res.npy", "wb") as stream:
        for shape in ((24, 3, 3, 3), (16, 24, 3, 3), (24, 16, 3, 3), (5, 24, 1, 1)):
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    np.save(tmp_path / "tests" / "sample_res.npy", rng.integers(-128, 128, size=(3, 8, 8)))
    spec = {"arch": "test", "dataset": "res", "layers": layers}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    planned = _plan_and_prove(tmp_path, "MAX78002")
    assert planned.layers[0].write_gap == 1 and planned.layers[2].write_gap == 1
    assert planned.layers[1].in_offset == planned.layers[0].out_offset
    assert planned.layers[2].out_offset == planned.layers[0].out_offset + 4


def _buffer_network(folder: Path, placed: bool) -> Path:
    """A temporal network like the vendor's Kinetics TCN: a rolling data buffer shifted by one
    step, the newest 1x1 output inserted at its end, a Conv1d over the buffer."""
    rng = np.random.default_rng(5)
    (folder / "tests").mkdir(exist_ok=True)
    np.save(folder / "tests" / "sample_tcn.npy", rng.integers(-128, 128, size=(4, 1, 1)))
    with open(folder / "tests" / "weights_tcn.npy", "wb") as stream:
        for shape in ((4, 4, 1, 1), (8, 4, 1, 1), (3, 8, 3)):
            np.save(stream, rng.integers(-128, 128, size=shape))
    hand = [
        {"processors": 0xF, "output_processors": 0xF, "out_offset": 0x1000},
        {"processors": 0xFF << 32, "output_processors": 0xFF << 32, "in_offset": 0x7004,
         "out_offset": 0x7000},
        {"processors": 0xF, "output_processors": 0xFF << 32, "in_offset": 0x1000,
         "out_offset": 0x7010},
        {"processors": 0xFF << 32, "in_offset": 0x7000, "out_offset": 0x2000},
        {"processors": 0x7, "out_offset": 0x3000},
    ]  # fmt: skip
    layers = [
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0, "activate": "ReLU", "name": "prep"},
        {"op": "passthrough", "in_sequences": ["tcn"], "in_channels": 8, "in_dim": 4,
         "buffer_shift": 1, "name": "shift"},
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0, "in_sequences": ["prep"],
         "buffer_insert": 1, "activate": "ReLU"},
        {"op": "conv1d", "kernel_size": 3, "pad": 0, "in_sequences": ["tcn"], "in_dim": 5,
         "in_channels": 8},
        {"op": "passthrough"},
    ]  # fmt: skip
    if placed:
        layers = [{**layer, **keys} for layer, keys in zip(layers, hand, strict=True)]
    buffer = {"processors": 0xFF << 32, "dim": 5, "channels": 8, "offset": 0x7000, "name": "tcn"}
    spec = {"arch": "test", "dataset": "tcn", "data_buffer": [buffer], "layers": layers}
    path = folder / ("hand.yaml" if placed else "net.yaml")
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_data_buffer_network_is_placed_around_its_buffer(tmp_path, capsys):
    """The buffer's processors and offset are given; the layers that shift it, insert into it
    and read it get their keys from it, the rest is placed around it (alive for the whole
    run). Same known answer as the hand placement; on the virtual device the only unwritten
    reads are the buffer's earlier contents."""
    from edgesynth.cli import main

    _buffer_network(tmp_path, placed=True)
    _buffer_network(tmp_path, placed=False)
    planned = _plan_and_prove(tmp_path, "MAX78002")
    shift, insert, reader = planned.layers[1:4]
    assert (shift.in_offset, shift.out_offset, shift.processors) == (0x7004, 0x7000, 0xFF << 32)
    assert (insert.out_offset, insert.output_processors) == (0x7010, 0xFF << 32)
    assert (reader.in_offset, reader.processors) == (0x7000, 0xFF << 32)
    answers = []
    for name in ("hand.yaml", "planned.yaml"):
        argv = ["izer", "--device", "MAX78002", "--config-file", name, "--test-dir", name[:-5]]
        with inside(tmp_path):
            assert main([*argv, "--prefix", "p", "--sample-numpy-filename", "kat"]) == 0
        answers.append(np.load(tmp_path / name[:-5] / "p" / "kat.npy"))
    np.testing.assert_array_equal(answers[0], answers[1])
    capsys.readouterr()


def test_a_layer_writes_over_its_own_input_when_nothing_else_fits(tmp_path, capsys):
    """64 channels of 90x90 fill all 16 MAX78000 memory instances (8,100 of 8,192 words): a
    layer can only write its output over its own input, starting low enough that its writes
    trail the reads it still needs (1x1: at or below the input; 3x3 pad 1: a row and a pixel,
    91 words, below). Placed and proven; the known answer equals the plain convolutions."""
    from edgesynth.cli import main

    rng = np.random.default_rng(9)
    (tmp_path / "tests").mkdir()
    sample = rng.integers(-128, 128, size=(64, 90, 90))
    np.save(tmp_path / "tests" / "sample_big.npy", sample)
    with open(tmp_path / "tests" / "weights_big.npy", "wb") as stream:
        for shape in ((64, 64, 1, 1), (16, 64, 3, 3)):
            np.save(stream, rng.integers(-8, 9, size=shape))
    layers = [
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0, "activate": "ReLU", "data_format": "HWC"},
        {"op": "conv2d", "kernel_size": "3x3", "pad": 1},
    ]
    spec = {"arch": "test", "dataset": "big", "layers": layers}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    planned = _plan_and_prove(tmp_path, "MAX78000")
    first, second = planned.layers
    words = 90 * 90
    assert first.out_offset // 4 <= first.in_offset // 4  # writes trail the reads
    assert first.out_offset // 4 + words > first.in_offset // 4  # ... over its own input
    assert second.out_offset // 4 <= second.in_offset // 4 - 91
    argv = ["izer", "--device", "MAX78000", "--config-file", "planned.yaml", "--test-dir", "o"]
    with inside(tmp_path):
        assert main([*argv, "--prefix", "p", "--sample-numpy-filename", "kat"]) == 0
    capsys.readouterr()
    with open(tmp_path / "tests" / "weights_big.npy", "rb") as stream:
        w0, w1 = np.load(stream), np.load(stream)
    y = np.clip((np.einsum("oc,chw->ohw", w0[:, :, 0, 0], sample) + 64) >> 7, -128, 127)
    y = np.maximum(y, 0)
    padded = np.pad(y, ((0, 0), (1, 1), (1, 1)))
    acc = sum(
        np.einsum("oc,chw->ohw", w1[:, :, i, j], padded[:, i : i + 90, j : j + 90])
        for i in range(3)
        for j in range(3)
    )
    expected = np.clip((acc + 64) >> 7, -128, 127)
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "p" / "kat.npy"), expected)


# -- random networks ----------------------------------------------------------------------------


@st.composite
def networks(draw):
    """A random HWC network of convolutions, residual additions and concatenations (of one pass,
    or of two passes read word by word).

    Returns (layers as YAML dicts, weight shapes in YAML order, input shape)."""
    channels = draw(st.integers(1, 8))
    size = draw(st.integers(4, 12))
    layers: list[dict] = []
    weights: list[tuple[int, ...]] = []
    width = channels  # channels of the newest tensor

    def conv(source: int | None, out: int, in_ch: int) -> int:
        entry = {"op": "conv2d", "kernel_size": "3x3", "pad": 1, "activate": "ReLU"}
        if source is not None:
            entry["in_sequences"] = [source]
        layers.append(entry)
        weights.append((out, in_ch, 3, 3))
        return len(layers) - 1

    current = conv(None, draw(st.integers(1, 24)), channels)
    layers[0]["data_format"] = "HWC"
    width = weights[-1][0]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["conv", "add", "concat", "wide", "skip"]))
        if kind == "conv":
            current = conv(None, draw(st.integers(1, 80)), width)
            width = weights[-1][0]
        elif kind == "add":  # two branches from the same tensor, added element-wise
            out = draw(st.integers(1, 32))
            a = conv(current, out, width)
            b = conv(current, out, width)
            layers.append({"op": "none", "eltwise": "add", "in_sequences": [a, b]})
            current, width = len(layers) - 1, out
        elif kind == "concat":  # two branches concatenated into one convolution
            a_out, b_out = draw(st.integers(1, 16)), draw(st.integers(1, 16))
            a = conv(current, a_out, width)
            b = conv(current, b_out, width)
            layers.append({"op": "conv2d", "kernel_size": "1x1", "pad": 0, "in_sequences": [a, b]})
            weights.append((draw(st.integers(1, 32)), a_out + b_out, 1, 1))
            current, width = len(layers) - 1, weights[-1][0]
        elif kind == "wide":  # a concatenation of two passes (UNet decoders), read in two
            part = 4 * draw(st.integers(9, 16))
            a = conv(current, part, width)
            b = conv(current, part, width)
            layers.append({"op": "conv2d", "kernel_size": "1x1", "pad": 0, "in_sequences": [a, b]})
            weights.append((draw(st.integers(1, 32)), 2 * part, 1, 1))
            current, width = len(layers) - 1, weights[-1][0]
        else:  # a long-lived tensor: copied, then added after a branch of convolutions
            layers.append({"op": "none", "in_sequences": [current]})
            copy = len(layers) - 1
            branch = conv(current, width, width)
            for _ in range(draw(st.integers(0, 2))):
                branch = conv(None, width, width)
            layers.append({"op": "none", "eltwise": "add", "in_sequences": [copy, branch]})
            current = len(layers) - 1
    return layers, weights, (channels, size, size)


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(networks(), st.integers(0, 2**31 - 1), st.sampled_from(["MAX78000", "MAX78002"]))
def test_random_networks_are_placed_without_hazards(tmp_path_factory, net, seed, device):
    """Every generated network fits both chips with room to spare (at most 21 layers, 128
    channels of at most 12x12 pixels, kernels far below kernel memory), so the planner must
    place it: a refusal fails the test, as does a hazard or a wrong known-answer word."""
    layers, shapes, input_shape = net
    folder = tmp_path_factory.mktemp("net")
    (folder / "tests").mkdir()
    rng = np.random.default_rng(seed)
    with open(folder / "tests" / "weights_rand.npy", "wb") as stream:
        for shape in shapes:
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    np.save(
        folder / "tests" / "sample_rand.npy",
        rng.integers(-128, 128, size=input_shape, dtype=np.int64),
    )
    spec = {"arch": "test", "dataset": "rand", "layers": layers}
    (folder / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with inside(folder), contextlib.redirect_stdout(None):
        lines = run_plan(PlanOptions(network=Path("net.yaml"), checkpoint=None, device=device))
    # run_plan raises when the virtual device finds a hazard or a wrong known-answer word
    assert lines[-1].startswith("known answer reproduced on the virtual")


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
def test_an_unread_output_keeps_the_write_gap_the_yaml_gives(tmp_path, device):
    """The final layer's `write_gap` (its words spaced for whoever reads the output) is kept
    and placed around; the known answer reads the spaced words (as the vendor's test-widegap)."""
    layers = [
        {"op": "conv2d", "kernel_size": "3x3", "pad": 1, "data_format": "HWC"},
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0, "write_gap": 3},
    ]
    (tmp_path / "tests").mkdir()
    rng = np.random.default_rng(3)
    with open(tmp_path / "tests" / "weights_wg.npy", "wb") as stream:
        for shape in ((16, 3, 3, 3), (8, 16, 1, 1)):
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    np.save(tmp_path / "tests" / "sample_wg.npy", rng.integers(-128, 128, size=(3, 6, 5)))
    spec = {"arch": "test", "dataset": "wg", "layers": layers}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    planned = _plan_and_prove(tmp_path, device)
    assert planned.layers[1].write_gap == 3


@pytest.mark.parametrize("device", ["MAX78000", "MAX78002"])
@pytest.mark.parametrize(
    ("one_d", "channels", "top"),
    [(True, 8, 2), (False, 80, 1)],  # a Conv1d; a two-pass 2-D output
)
def test_in_crop_reads_past_the_dropped_rows(tmp_path, device, one_d, channels, top):
    """A layer with `in_crop: [top, bottom]` reads its source from `top` rows in: HWC, one word
    per pixel and pass (a Conv1d row is one step). The hand placement at that offset is what
    the vendor's tool generates too (checked by hand with ai8xize.py)."""
    rng = np.random.default_rng(channels)
    (tmp_path / "tests").mkdir()
    if one_d:
        sample, rows, cols = rng.integers(-100, 100, size=(4, 20)), 20, 1
        shapes = ((channels, 4, 3), (8, channels, 3))
        kernel, op = 3, "conv1d"
    else:
        sample, rows, cols = rng.integers(-100, 100, size=(4, 6, 5)), 6, 5
        shapes = ((channels, 4, 3, 3), (8, channels, 3, 3))
        kernel, op = "3x3", "conv2d"
    np.save(tmp_path / "tests" / "sample_crop.npy", sample)
    with open(tmp_path / "tests" / "weights_crop.npy", "wb") as stream:
        for shape in shapes:
            np.save(stream, rng.integers(-100, 100, size=shape, dtype=np.int64))
    kept = rows - top - 2
    layers = [
        {"op": op, "kernel_size": kernel, "pad": 1, "activate": "ReLU", "data_format": "HWC"},
        {"op": op, "kernel_size": kernel, "pad": 1, "in_crop": [top, 2],
         "in_dim": kept if one_d else [kept, cols]},
    ]  # fmt: skip
    spec = {"arch": "test", "dataset": "crop", "layers": layers}
    (tmp_path / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    planned = _plan_and_prove(tmp_path, device)
    passes = -(-channels // 64)
    skip = planned.layers[1].in_offset - planned.layers[0].out_offset
    assert skip == 4 * top * cols * passes
