"""YAML features that change the computed numbers, run through `edgesynth izer` on tiny
networks and compared value for value with the independent reference in `simref`."""

from __future__ import annotations

import numpy as np
import pytest
import simref
from simref import Project

RNG = np.random.default_rng(11)


def data(*shape: int, low: int = -128, high: int = 128) -> np.ndarray:
    return RNG.integers(low, high, size=shape, dtype=np.int64)


def procs(n: int, first: int = 0) -> str:
    return f"0x{((1 << n) - 1) << first:016x}"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Project:
    return Project(tmp_path / "p", monkeypatch)


def test_conv_relu_then_pooling_passthrough(project, capsys) -> None:
    x, w = data(4, 8, 8), data(6, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, activate: relu}}
          - {{processors: {procs(6)}, out_offset: 0, op: passthrough, max_pool: 2,
              pool_stride: 2}}
        """,
        sample=x,
        weights=[w],
    )
    y = simref.relu(simref.requantize(simref.conv2d(x, w, pad=(1, 1)), 0))
    expected = simref.pool2d(y, (2, 2), (2, 2))
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_in_dim_turns_1d_data_into_2d(project, capsys) -> None:
    x, w1, w2 = data(4, 32), data(4, 4, 3), data(5, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv1d, kernel_size: 3, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, in_dim: [4, 8]}}
        """,
        sample=x,
        weights=[w1, w2],
    )
    y = simref.requantize(simref.conv1d(x, w1, pad=1), 0).reshape(4, 4, 8)
    expected = simref.requantize(simref.conv2d(y, w2, pad=(1, 1)), 0)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_in_dim_turns_2d_data_into_1d_and_changes_w_l(project, capsys) -> None:
    x, w1, w2, w3 = data(4, 8, 8), data(4, 4, 3, 3), data(4, 4, 3, 3), data(3, 4, 5)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, in_dim: [4, 16]}}
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv1d, kernel_size: 5,
              pad: 2, in_dim: 64}}
        """,
        sample=x,
        weights=[w1, w2, w3],
    )
    y = simref.requantize(simref.conv2d(x, w1, pad=(1, 1)), 0).reshape(4, 4, 16)
    y = simref.requantize(simref.conv2d(y, w2, pad=(1, 1)), 0).reshape(4, 64)
    expected = simref.requantize(simref.conv1d(y, w3, pad=2), 0)[:, :, None]
    got = project.run(capsys=capsys)
    assert got.shape == (3, 64, 1)
    np.testing.assert_array_equal(got, expected)


def test_in_crop_drops_rows_before_the_reshape(project, capsys) -> None:
    """`in_crop: [2, 3]` drops the first 2 and last 3 samples of the previous output;
    `in_dim` is the size after cropping (docs example: L=512, in_dim 506, in_crop [3, 3])."""
    x, w1, w2 = data(4, 32), data(4, 4, 3), data(2, 4, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv1d, kernel_size: 3, pad: 1}}
          - {{processors: {procs(4)}, in_offset: 0x2008, out_offset: 0, op: conv1d,
              kernel_size: 3, pad: 0, in_dim: 27, in_crop: [2, 3]}}
        """,
        sample=x,
        weights=[w1, w2],
    )
    y = simref.requantize(simref.conv1d(x, w1, pad=1), 0)[:, 2:-3]
    expected = simref.requantize(simref.conv1d(y, w2), 0)[:, :, None]
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


@pytest.mark.parametrize(
    ("crop", "dim", "message"),
    [("[2, 0]", "30", "crop at least one row at the end"), ("[1, 1]", None, "needs `in_dim`")],
)
def test_in_crop_the_vendor_cannot_run_is_refused(project, capsys, crop, dim, message) -> None:
    x, w1, w2 = data(4, 32), data(4, 4, 3), data(2, 4, 3)
    in_dim = f", in_dim: {dim}" if dim else ""
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv1d, kernel_size: 3, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv1d, kernel_size: 3, pad: 1,
              in_crop: {crop}{in_dim}}}
        """,
        sample=x,
        weights=[w1, w2],
    )
    err = project.refuse(capsys=capsys)
    assert "in_crop" in err and message in err


def test_in_channel_skip_with_reshape_inputs(project, capsys) -> None:
    """--reshape-inputs drops `in_channel_skip` leading channels, then keeps as many as the
    weights take."""
    x, w = data(6, 5, 5), data(4, 3, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(3)}, out_offset: 0, op: conv2d, pad: 1, in_channel_skip: 2}}
        """,
        sample=x,
        weights=[w],
    )
    expected = simref.requantize(simref.conv2d(x[2:5], w, pad=(1, 1)), 0)
    np.testing.assert_array_equal(project.run("--reshape-inputs", capsys=capsys), expected)
    assert "input dimensions do not match" in project.refuse(capsys=capsys)


def test_write_gap_and_read_gap_do_not_change_the_values(project, capsys) -> None:
    x, w1, w2 = data(4, 6, 6), data(4, 4, 3, 3), data(4, 4, 3, 3)

    def network(gap1: str, gap2: str) -> str:
        return f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1{gap1}}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1{gap2}}}
        """

    project.write(network("", ""), sample=x, weights=[w1, w2])
    plain = project.run(capsys=capsys)
    project.write(network(", write_gap: 1", ", read_gap: 1"), sample=x, weights=[w1, w2])
    np.testing.assert_array_equal(project.run(capsys=capsys), plain)


@pytest.mark.parametrize("pool_first", [True, False])
def test_eltwise_with_pooling(project, capsys, pool_first) -> None:
    """Each operand is pooled before the element-wise sum (or after it: `pool_first: false`),
    and the sum is clipped to 8 bits."""
    x = data(8, 6, 6)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: add, max_pool: 2,
              pool_stride: 2, pool_first: {str(pool_first).lower()}}}
        """,
        sample=x,
    )
    a, b = x[:4], x[4:]
    if pool_first:
        expected = np.clip(
            simref.pool2d(a, (2, 2), (2, 2)) + simref.pool2d(b, (2, 2), (2, 2)), -128, 127
        )
    else:
        expected = simref.pool2d(np.clip(a + b, -128, 127), (2, 2), (2, 2))
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_three_operand_subtraction_splits_the_channels(project, capsys) -> None:
    x = data(6, 4, 4)
    project.write(
        f"""
        layers:
          - {{processors: {procs(2)}, out_offset: 0x2000, op: sub, operands: 3}}
        """,
        sample=x,
    )
    expected = np.clip(x[0:2] - x[2:4] - x[4:6], -128, 127)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_passthrough_pools_1d_data_along_its_length(project, capsys) -> None:
    """A passthrough of 1D data pools only along the length (the vendor forces the pool width
    to 1), here after a Conv1d."""
    x, w = data(4, 24), data(4, 4, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv1d, kernel_size: 3, pad: 1}}
          - {{processors: {procs(4)}, out_offset: 0, op: passthrough, avg_pool: 3,
              pool_stride: 3}}
        """,
        sample=x,
        weights=[w],
    )
    y = simref.requantize(simref.conv1d(x, w, pad=1), 0)[:, :, None]
    expected = simref.pool2d(y, (3, 1), (3, 3), average=True)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_conv1d_pooling_dilation(project, capsys) -> None:
    """1D average pooling with `pool_dilation` covers only samples inside the data and
    truncates even with --avg-pool-rounding; 1D max pooling ignores the dilation. The dilated
    window reads past the input on the chip, so the project's own proof refuses it (as it
    does the corpus' dilated Conv1d networks' reads past their input); --no-verify writes it."""
    x, w = data(4, 30), data(3, 4, 1)
    for kind in ("avg_pool", "max_pool"):
        project.write(
            f"""
            layers:
              - {{processors: {procs(4)}, out_offset: 0, op: conv1d, kernel_size: 1, pad: 0,
                  {kind}: 3, pool_stride: 2, pool_dilation: 2}}
            """,
            sample=x,
            weights=[w],
        )
        pooled = simref.pool1d(x, 3, 2, average=kind == "avg_pool", dilation=2)
        expected = simref.requantize(simref.conv1d(pooled, w), 0)[:, :, None]
        refusal = project.refuse("--avg-pool-rounding", capsys=capsys)
        assert "layer 0's input is never written in full" in refusal, refusal
        got = project.run("--avg-pool-rounding", "--no-verify", capsys=capsys)
        np.testing.assert_array_equal(got, expected)


def test_non_square_and_dilated_2d_pooling(project, capsys) -> None:
    x, w = data(4, 9, 10), data(4, 4, 1, 1)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, kernel_size: 1x1, pad: 0,
              avg_pool: [3, 2], pool_stride: 2, pool_dilation: [2, 1]}}
        """,
        sample=x,
        weights=[w],
    )
    for extra, rounding in (((), False), (("--avg-pool-rounding",), True)):
        pooled = simref.pool2d(x, (3, 2), (2, 2), average=True, dilation=(2, 1), rounding=rounding)
        expected = simref.requantize(simref.conv2d(pooled, w), 0)
        np.testing.assert_array_equal(project.run(*extra, capsys=capsys), expected)


def test_flatten_feeds_every_pixel_of_every_channel_to_linear(project, capsys) -> None:
    x, w1, w2, b2 = data(3, 4, 4), data(4, 3, 3, 3), data(10, 16), data(10, low=-50, high=50)
    project.write(
        f"""
        layers:
          - {{processors: {procs(3)}, out_offset: 0x2000, op: conv2d, pad: 0}}
          - {{processors: {procs(4)}, out_offset: 0, op: mlp, flatten: true,
              output_width: 32}}
        """,
        sample=x,
        weights=[w1, w2],
        bias=[data(4, low=-10, high=10), b2],
    )
    b1 = np.load(project.root / "tests" / "bias_b.npy")  # the file's first array
    y = simref.requantize(simref.conv2d(x, w1, b1), 0)
    expected = (w2 @ y.reshape(-1) + b2 * 128).reshape(10, 1, 1)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_depthwise_conv1d(project, capsys) -> None:
    x, w = data(4, 20), data(4, 1, 5)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0, op: conv1d, kernel_size: 5, pad: 2,
              groups: 4, output_shift: 1}}
        """,
        sample=x,
        weights=[w],
    )
    expected = simref.requantize(simref.conv1d(x, w, pad=2, groups=4), 1)[:, :, None]
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_32_bit_intermediate_output_with_relu_is_clipped_to_127(project, capsys) -> None:
    """The vendor clips ReLU to 127 even on a 32-bit (unshifted) output. The virtual device
    (written from the hardware documentation) computes that layer otherwise, so the proof
    refuses the project naming no hazard: the two models disagree here and no board has
    settled which is right; --no-verify writes it."""
    x, w1, w2 = data(4, 5, 5), data(4, 4, 3, 3), data(3, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1,
              output_width: 32, activate: relu}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1}}
        """,
        sample=x,
        weights=[w1, w2],
    )
    y = simref.relu(simref.conv2d(x, w1, pad=(1, 1)))
    expected = simref.requantize(simref.conv2d(y, w2, pad=(1, 1)), 0)
    refusal = project.refuse(capsys=capsys)
    assert "layer 0 is the first to compute wrong values: no memory hazard" in refusal, refusal
    np.testing.assert_array_equal(project.run("--no-verify", capsys=capsys), expected)


def test_default_pad_of_every_layer_follows_a_conv1d_without_pad(project, capsys) -> None:
    """The vendor's shared default padding list: a Conv1d without `pad` makes the default of
    the other layers [1, 0] (the Conv2d here loses its left/right padding)."""
    x, w1, w2 = data(4, 36), data(4, 4, 3), data(3, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv1d, kernel_size: 3}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, in_dim: [6, 6]}}
        """,
        sample=x,
        weights=[w1, w2],
    )
    y = simref.requantize(simref.conv1d(x, w1, pad=1), 0).reshape(4, 6, 6)
    expected = simref.requantize(simref.conv2d(y, w2, pad=(1, 0)), 0)
    got = project.run(capsys=capsys)
    assert got.shape == (3, 6, 4)
    np.testing.assert_array_equal(got, expected)


def test_data_buffer_shift_insert_and_read(project, capsys) -> None:
    """A rolling buffer (the vendor's TCN support): shift it by one, insert the newest 1x1
    output at the end, then a Conv1d reads it as channels x length.

    (The vendor checks a buffer reader's `in_dim` against the output size of the layer two
    from the end, if that one already ran; the passthrough at the end keeps that check
    quiet, as in the vendor's own TCN network.)

    The known answer assumes a buffer of zeros, which the firmware never writes: on the chip
    the first inference reads whatever the memory holds, and the proof refuses the project
    naming that read; --no-verify writes it."""
    x, w_in, w_tcn = data(4, 1, 1), data(8, 4, 1, 1), data(3, 8, 3)
    project.write(
        f"""
        data_buffer:
          - {{processors: {procs(8, 32)}, dim: 5, channels: 8, offset: 0x7000, name: tcn}}
        layers:
          - {{processors: {procs(8, 32)}, output_processors: {procs(8, 32)},
              in_offset: 0x7004, in_channels: 8, in_dim: 4, in_sequences: tcn,
              out_offset: 0x7000, op: passthrough, buffer_shift: 1, name: shift}}
          - {{processors: {procs(4)}, output_processors: {procs(8, 32)}, in_offset: 0,
              out_offset: 0x7010, op: conv2d, kernel_size: 1x1, pad: 0, in_sequences: input,
              buffer_insert: 1, activate: relu}}
          - {{processors: {procs(8, 32)}, in_offset: 0x7000, out_offset: 0x1000, op: conv1d,
              kernel_size: 3, pad: 0, in_sequences: tcn, in_dim: 5, in_channels: 8}}
          - {{processors: {procs(3)}, out_offset: 0x2000, op: passthrough}}
        """,
        sample=x,
        weights=[w_in, w_tcn],
    )
    newest = simref.relu(simref.requantize(simref.conv2d(x, w_in), 0)).reshape(8)
    buffer = np.zeros((5, 8), dtype=np.int64)  # (time, channels), newest last
    buffer = np.roll(buffer, -1, axis=0)
    buffer[-1] = newest
    expected = simref.requantize(simref.conv1d(buffer.T, w_tcn), 0)[:, :, None]
    refusal = project.refuse(capsys=capsys)
    assert "layer 1's input is never written in full" in refusal, refusal
    np.testing.assert_array_equal(project.run("--no-verify", capsys=capsys), expected)


def test_several_output_layers_keep_the_last_run_layer(project, capsys) -> None:
    x, w1, w2 = data(4, 5, 5), data(4, 4, 3, 3), data(2, 4, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, output: true}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, output: true}}
        """,
        sample=x,
        weights=[w1, w2],
    )
    y = simref.requantize(simref.conv2d(x, w1, pad=(1, 1)), 0)
    expected = simref.requantize(simref.conv2d(y, w2, pad=(1, 1)), 0)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_next_sequence_jump_hands_the_output_to_the_target(project, capsys) -> None:
    x, w1, w2, w3 = data(4, 5, 5), data(4, 4, 3, 3), data(4, 4, 3, 3), data(2, 4, 3, 3)

    def network(reads: str) -> str:
        return f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: conv2d, pad: 1, name: first,
              next_sequence: third}}
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, name: unused}}
          - {{processors: {procs(4)}, out_offset: 0x1000, op: conv2d, pad: 1, name: third
              {reads}}}
        """

    project.write(network(""), sample=x, weights=[w1, w2, w3])
    a = simref.requantize(simref.conv2d(x, w1, pad=(1, 1)), 0)
    expected = simref.requantize(simref.conv2d(a, w3, pad=(1, 1)), 0)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)
    # The vendor hands layer outputs along by the position of the next layer to run: `first`
    # handed its output to `third` (position 2), so nothing fills the slot `in_sequences:
    # first` reads (position 1), and the vendor tool cannot run the network.
    project.write(network(", in_sequences: first"), sample=x, weights=[w1, w2, w3])
    assert "has not produced" in project.refuse(capsys=capsys)


def test_names_in_in_sequences_concatenate_channels(project, capsys) -> None:
    x, w1, w2, w3 = data(4, 5, 5), data(4, 4, 3, 3), data(4, 4, 3, 3), data(2, 8, 3, 3)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, output_processors: {procs(4, 4)}, out_offset: 0x2000,
              op: conv2d, pad: 1, name: first}}
          - {{processors: {procs(4, 4)}, output_processors: {procs(4)}, out_offset: 0x2000,
              op: conv2d, pad: 1, name: second, next_sequence: last}}
          - {{processors: {procs(8)}, in_offset: 0x2000, out_offset: 0, op: conv2d, pad: 1,
              name: last, in_sequences: [second, first]}}
        """,
        sample=x,
        weights=[w1, w2, w3],
    )
    a = simref.requantize(simref.conv2d(x, w1, pad=(1, 1)), 0)
    b = simref.requantize(simref.conv2d(a, w2, pad=(1, 1)), 0)
    expected = simref.requantize(simref.conv2d(np.concatenate([b, a]), w3, pad=(1, 1)), 0)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_eltwise_on_1d_data_pools_every_operand_along_the_length(project, capsys) -> None:
    """An element-wise passthrough of 1D data pools like a 2D layer with a width-1 window, so
    (unlike a Conv1d layer) every operand is pooled before the sum."""
    x = data(8, 20)
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0x2000, op: add, avg_pool: 2, pool_stride: 2}}
        """,
        sample=x,
    )
    a, b = x[:4, :, None], x[4:, :, None]
    pooled = [simref.pool2d(v, (2, 1), (2, 2), average=True) for v in (a, b)]
    expected = np.clip(pooled[0] + pooled[1], -128, 127)
    np.testing.assert_array_equal(project.run(capsys=capsys), expected)


def test_out_channels_that_do_not_match_the_weights_are_refused(project, capsys) -> None:
    project.write(
        f"""
        layers:
          - {{processors: {procs(4)}, out_offset: 0, op: conv2d, pad: 1, out_channels: 5}}
        """,
        sample=data(4, 5, 5),
        weights=[data(3, 4, 3, 3)],
    )
    assert "out_channels" in project.refuse(capsys=capsys)
