"""Memory models: the packed kernel loader, data memory lanes, the stream view."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.targets.max7800x.vdevice.memory import (
    HOST,
    DataMemory,
    StreamMemory,
    mexpress_blocks,
)
from edgesynth.targets.max7800x.vdevice.regmap import MAX78000_MAP
from edgesynth.targets.max7800x.vdevice.state import replay
from edgesynth.targets.max7800x.vdevice.trace import MARKER_BASE, from_pairs

CTRL_MEXPRESS_INIT = 0x00100008


def _packed_writes(blocks, form: str) -> tuple[list[tuple[int, int]], dict]:
    """Writes of a packed ("mexpress") kernel loader, as devtrace records them, and the 72-bit
    words each processor ends up with. A block is (processor, column, bytes); the loader sets
    the address counter with a byte store of 0x01 at base + 4 x column + 1 and then writes the
    bytes as big-endian 32-bit words, from the set address (`form` "new") or from the
    processor's base ("old")."""
    memory: dict[int, int] = {}  # CPU-visible words, as devtrace's shadow page holds them
    writes = []
    expected: dict[tuple[int, int], np.ndarray] = {}
    for processor, column, data in blocks:
        base = MAX78000_MAP.mram_address(processor, 0)
        set_at = base + 4 * column
        value = (memory.get(set_at, 0) & ~0xFF00) | 0x0100
        memory[set_at] = value
        writes.append((set_at, value))
        padded = np.concatenate([data, np.zeros(-len(data) % 4, np.uint8)])
        words = padded.view(">u4")
        start = set_at if form == "new" else base
        for i, word in enumerate(words.tolist()):
            memory[start + 4 * i] = word
            writes.append((start + 4 * i, word))
        stream = padded
        for j in range(0, len(stream), 9):
            chunk = np.zeros(9, np.uint8)
            piece = stream[j : j + 9]
            chunk[: piece.size] = piece
            expected[(processor, column + j // 9)] = chunk
    return writes, expected


blocks_strategy = st.lists(
    st.tuples(
        st.integers(0, 63),
        st.integers(0, 700),
        st.integers(1, 40).flatmap(
            lambda n: st.lists(st.integers(0, 255), min_size=9 * n, max_size=9 * n)
        ),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(blocks_strategy, st.sampled_from(["new", "old"]))
def test_packed_kernel_loader(blocks, form):
    # Keep blocks of one processor apart so every expected word has one writer.
    used: dict[int, list[tuple[int, int]]] = {}
    chosen = []
    for processor, column, data in blocks:
        span = (column, column + len(data) // 9 + 1)
        if any(a < span[1] and span[0] < b for a, b in used.get(processor, [])):
            continue
        used.setdefault(processor, []).append(span)
        chosen.append((processor, column, np.array(data, dtype=np.uint8)))
    writes, expected = _packed_writes(chosen, form)
    pairs = [[MARKER_BASE + 1, 0], [0x50100000, CTRL_MEXPRESS_INIT], [MARKER_BASE + 2, 0]]
    pairs += [[a, v] for a, v in writes]
    machine = replay(from_pairs(np.array(pairs, dtype=np.uint32)), MAX78000_MAP)
    for (processor, word), content in expected.items():
        assert machine.kernels.data[processor, word].tolist() == content.tolist()


def test_set_address_on_the_last_data_word():
    """A block that ends on the word the next block's set-address store hits: the last of
    the repeated writes is the set."""
    processor = np.array([0] * 5)
    offset = np.array([0, 0, 4, 4, 4])
    is_set, run = mexpress_blocks(processor, offset)
    assert is_set.tolist() == [True, False, False, True, False]
    assert run.tolist()[1:3] == [0, 0] and run[4] == 1


def test_set_address_right_after_the_previous_block():
    """The older loader streams every block from the processor's base: when a block's data
    ends exactly where the next block's set-address store points, that store continues the
    run of addresses by chance; the restart at offset 0 after it still makes it the set (found
    by test_packed_kernel_loader)."""
    processor = np.zeros(6, dtype=np.int64)
    offset = np.array([8, 0, 4, 8, 0, 4])
    is_set, run = mexpress_blocks(processor, offset)
    assert is_set.tolist() == [True, False, False, True, False, False]
    assert run.tolist() == [-1, 0, 0, -1, 1, 1]
    # the last data word before a block set at offset 0 (set@0, data@0) stays data
    is_set, _ = mexpress_blocks(np.zeros(5, np.int64), np.array([4, 0, 4, 0, 0]))
    assert is_set.tolist() == [True, False, False, True, False]


def test_data_memory_lanes():
    memory = DataMemory(words=16)
    memory.host_write(np.array([0]), np.array([3]), np.array([0x80FF0102], dtype=np.uint32))
    q, w = np.zeros(4, int), np.full(4, 3)
    assert memory.read_bytes(q, w, np.arange(4)).tolist() == [2, 1, -1, -128]
    memory.write_bytes(np.array([0, 0]), np.array([3, 3]), np.array([1, 3]), np.array([-5, 7]), 4)
    assert memory.read_bytes(q, w, np.arange(4)).tolist() == [2, -5, -1, 7]
    assert memory.writer[0, 3] == 4
    assert memory.writer[0, 2] != HOST


def test_stream_memory_grows_and_keeps_writers():
    stream = StreamMemory()
    stream.write_bytes(
        np.array([2, 2]),
        np.array([5, 100_000]),
        np.array([0, 1]),
        np.array([9, -1]),
        3,
        np.array([11, 12]),
    )
    quad, word, lane = np.array([2, 2, 1]), np.array([5, 100_000, 5]), np.array([0, 1, 0])
    values, who = stream.read_words(quad, word, lane)
    assert values.tolist() == [9, 0xFF00, 0]
    assert who.tolist() == [11, 12, -1]


def test_stream_rows_equal_indexed_writes_and_reads():
    """write_rows/read_rows (one strided copy per row) store and read what write_bytes and
    read_bytes do with index arrays, a later row winning where rows overlap; a read past what
    was written is left to read_bytes (None)."""
    rng = np.random.default_rng(7)
    quad = np.array([0, 0, 3, 0])
    start = np.array([2, 4, 0, 2])  # rows 0 and 3 overlap: the last one wins
    lane = np.array([1, 1, 2, 1])
    step, count = 3, 11
    value = rng.integers(0, 256, size=(4, count)).astype(np.uint8)
    rows, indexed = StreamMemory(), StreamMemory()
    rows.write_rows(quad, start, step, lane, value)
    word = start[:, None] + step * np.arange(count)
    indexed.write_bytes(quad[:, None], word, lane[:, None], value, layer=0)
    np.testing.assert_array_equal(rows.data, indexed.data)
    got = rows.read_rows(quad, start, step, lane, count)
    expected, _ = indexed.read_bytes(quad[:, None], word, lane[:, None], owners=False)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int8
    assert rows.read_rows(quad, start + 1000, step, lane, count) is None
