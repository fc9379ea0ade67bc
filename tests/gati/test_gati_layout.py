"""Byte layouts in DRAM: NHW8C8 maps, vectors, CONV weight tiles, padded FC weights, bias."""

from __future__ import annotations

import numpy as np

from edgesynth.targets.gati import layout


def test_map_layout_addresses() -> None:
    rng = np.random.default_rng(0)
    c, h, w = 11, 5, 3  # 2 channel groups, 15 pixels -> 2 pixel blocks
    x = rng.integers(-128, 128, size=(2, c, h, w))
    raw = layout.pack_map(x, 1)
    assert raw.shape == (2, 2 * 2 * 64)
    pb = 2
    for ch in range(c):
        for p in range(h * w):
            off = ((ch // 8) * pb + p // 8) * 64 + (ch % 8) * 8 + p % 8
            assert raw[1, off].view(np.int8) == x[1, ch, p // w, p % w]
    # channels 11..15 and pixels 15 of each block are zero
    assert raw[0, 128 + 3 * 8 : 128 + 64].view(np.int8).tolist() == [0] * 40
    assert np.array_equal(layout.unpack_map(raw, c, h, w, 1), x)


def test_map_layout_int32() -> None:
    x = np.array([[[[1 << 20, -5]]]])  # 1 channel, 1x2
    raw = layout.pack_map(x, 4)
    assert raw.shape == (1, 256)
    assert raw[0, :8].view("<i4").tolist() == [1 << 20, -5]
    assert np.array_equal(layout.unpack_map(raw, 1, 1, 2, 4), x)


def test_vector_layout() -> None:
    x = np.array([[1, -2, 3, 4, 5]])
    raw = layout.pack_vector(x, 1)
    assert raw.shape == (1, 8)
    assert raw[0].view(np.int8).tolist() == [1, -2, 3, 4, 5, 0, 0, 0]
    assert np.array_equal(layout.unpack_vector(raw, 5, 1), x)


def test_conv_weight_tiles() -> None:
    rng = np.random.default_rng(1)
    kn, ic, kh, kw = 10, 9, 3, 3  # 2 kernel iterations x 2 channel iterations
    w = rng.integers(-127, 128, size=(kn, ic, kh, kw)).astype(np.int8)
    raw = np.frombuffer(layout.pack_conv_weights(w), dtype=np.int8)
    assert raw.size == 2 * 2 * 576
    for k in range(kn):
        for c in range(ic):
            for i in range(kh):
                for j in range(kw):
                    off = (((k // 8) * 2 + c // 8) * 8 + c % 8) * 72 + (i * kw + j) * 8 + k % 8
                    assert raw[off] == w[k, c, i, j]
    assert np.count_nonzero(raw) <= w.size


def test_conv_weight_tiles_small_kernel() -> None:
    w = np.arange(1, 5, dtype=np.int8).reshape(1, 1, 2, 2)
    tile = np.frombuffer(layout.pack_conv_weights(w), dtype=np.int8).reshape(8, 9, 8)
    assert tile[0, :4, 0].tolist() == [1, 2, 3, 4]  # taps in rows 0..3 of engine 0, column 0
    assert np.count_nonzero(tile) == 4


def test_fc_weights_padded_with_zero_columns() -> None:
    rng = np.random.default_rng(2)
    m, n = 40, 7  # 40 outputs -> 2 column blocks of 32, the second padded with 24 zero columns
    w = rng.integers(-127, 128, size=(m, n)).astype(np.int8)
    raw = np.frombuffer(layout.pack_fc_weights(w), dtype=np.int8).reshape(2, n, 32)
    assert np.array_equal(raw[0], w[:32].T)
    assert np.array_equal(raw[1, :, :8], w[32:].T)
    assert not raw[1, :, 8:].any()


def test_bias_widths() -> None:
    b = np.array([1, -1, 300])
    assert layout.pack_bias(b, 32, 8) == np.array([1, -1, 300, 0, 0, 0, 0, 0], "<i4").tobytes()
    assert layout.pack_bias(np.array([5, -6]), 8, 8) == bytes([5, 250, 0, 0, 0, 0, 0, 0])


def test_planner_alignment() -> None:
    p = layout.Planner()
    a = p.add("a", "weights", 5)
    b = p.add("b", "bias", 33)
    c = p.add("c", "input", 1)
    assert (a.start, b.start, c.start) == (0, 32, 96)
    assert all(r.start % 32 == 0 for r in p.regions)
    assert p.total == 128
