"""The MAX78002 snoop units on the virtual device: the comparisons, the accumulators, and the
layer sequence they decide (stop, a link taken or not), on networks other than the vendor's
tests from which the fields were inferred."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.targets.max7800x.placement.verify import device_check, run_plan
from edgesynth.targets.max7800x.snoop_unit import SnoopUnit, compare
from edgesynth.targets.max7800x.vdevice.snoop import write_order
from izer_helpers import plan_in

NAMES = ("A1", "A2", "D1", "D2", "X1", "X2", "C1", "C2", "ACC", "HIT", "MAX", "AM")


def _unit(**regs: int) -> SnoopUnit:
    return SnoopUnit(0, 1, {name: regs.get(name, 0) for name in NAMES})


def _reference(code: int, value: int, low: int, high: int) -> bool:
    tests = [value >= low, value == low, value <= high, value == high]
    return all(t for bit, t in enumerate(tests) if code >> bit & 1)


@given(
    st.integers(0, 15),
    st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20),
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
)
def test_comparison_codes(code: int, values: list[int], low: int, high: int) -> None:
    got = compare(code, np.array(values, dtype=np.uint64), low, high)
    assert got.tolist() == [_reference(code, v, low, high) for v in values]


@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 2**16))
def test_write_order_is_pixel_by_pixel(channels: int, pixels: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    instance = rng.integers(0, 3, size=(channels, pixels))
    word = np.broadcast_to(rng.permutation(64)[:pixels], (channels, pixels))
    q, w = write_order(instance.ravel(), word.ravel(), pixels)
    expected = []
    for x in range(pixels):
        for c in range(channels):
            pair = (int(instance[c, x]), int(word[c, x]))
            if pair not in expected:
                expected.append(pair)
    assert list(zip(q.tolist(), w.tolist(), strict=True)) == expected


def test_accumulators_on_a_byte_lane() -> None:
    """Byte lane 3 of the words in an address window, within [D1, D2]: counted, summed, the
    largest kept with its (first) address."""
    addresses = np.array([10, 11, 12, 13, 14, 20], dtype=np.uint64)
    words = np.array([0x30000000, 0x10FFFFFF, 0x50000000, 0x50000001, 0x60000000, 0x40000000])
    c1 = 0x1 | 0x8 | 0x10 | 0x20 | 0x5 << 12 | 0x5 << 16 | 3 << 29
    unit = _unit(A1=10, A2=14, D1=0x20, D2=0x50, C1=c1, ACC=1, HIT=2, MAX=3, AM=4)
    unit.observe(7, addresses, words.astype(np.uint32))
    assert unit.regs["HIT"] == 2 + 3  # 0x30, 0x50, 0x50 (0x10 and 0x60 out of range, 20 outside)
    assert unit.regs["ACC"] == 1 + 0x30 + 0x50 + 0x50
    assert (unit.regs["MAX"], unit.regs["AM"]) == (0x50, 12)
    assert unit.triggered == {7}


def test_whole_words_layer_filter_and_count_window() -> None:
    word_equal = 0x1 | 0x2 << 12 | 0x2 << 16 | 1 << 31
    unit = _unit(A1=5, D1=0xDEADBEEF, C1=word_equal | 0x2, C2=0x200 | 3)
    unit.observe(2, np.array([5], dtype=np.uint64), np.array([0xDEADBEEF], dtype=np.uint32))
    assert unit.triggered == set()  # only layer 3 is watched
    unit.observe(3, np.array([5], dtype=np.uint64), np.array([0xDEADBEEE], dtype=np.uint32))
    assert unit.triggered == set()
    unit.observe(3, np.array([5], dtype=np.uint64), np.array([0xDEADBEEF], dtype=np.uint32))
    assert unit.triggered == {3}
    # with a count window, a layer that wrote in the address window triggers when its number
    # of matches falls outside [X1, X2]
    counted = 0x1 | 0x2 | 0x5 << 12 | 0x1 << 16 | 0x5 << 20 | 1 << 31
    unit = _unit(A1=0, A2=9, X1=2, X2=3, C1=counted)
    unit.observe(0, np.arange(3, dtype=np.uint64), np.ones(3, dtype=np.uint32))
    unit.observe(1, np.arange(1, dtype=np.uint64), np.ones(1, dtype=np.uint32))
    unit.observe(2, np.arange(20, 30, dtype=np.uint64), np.ones(10, dtype=np.uint32))
    assert unit.triggered == {1}


# --- on the device ---------------------------------------------------------------------------

WATCHED = 3  # the word of layer 0's output the unit watches (pixel 3 of instance 0)
OUT0 = 0x3000  # bytes


def _plan(folder: Path, snoop: list[int] | None, first: dict, name: str):  # type: ignore[no-untyped-def]
    """Layer 0 (8 channels) -> 1 -> 2 (passthrough back to layer 0's place) -> 3: layer 3
    reads layer 2's copy of layer 1's output, or layer 0's output when the run skips 1 and 2."""
    rng = np.random.default_rng(5)
    tests = folder / "tests"
    tests.mkdir(exist_ok=True)
    np.save(tests / "sample_snp.npy", rng.integers(-128, 128, size=(4, 6, 7)))
    with open(tests / "weights_snp.npy", "wb") as stream:  # one array per layer with weights
        for shape in ((8, 4, 3, 3), (8, 8, 1, 1), (8, 8, 1, 1)):
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    layers = [
        {"processors": 0xF, "out_offset": OUT0, "op": "conv2d", "kernel_size": "3x3", "pad": 1,
         "output_processors": 0xFF, **first},
        {"processors": 0xFF, "out_offset": 0x6000, "op": "conv2d", "kernel_size": "1x1",
         "pad": 0},
        {"processors": 0xFF, "out_offset": OUT0, "op": "passthrough"},
        {"processors": 0xFF, "out_offset": 0x0, "op": "conv2d", "kernel_size": "1x1", "pad": 0},
    ]  # fmt: skip
    spec: dict = {"arch": "test", "dataset": "snp", "layers": layers}
    if snoop is not None:
        spec["snoop"] = snoop
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return plan_in(folder, "MAX78002", config=f"{name}.yaml", prefix=name)[1]


def _snoop(data: int, control: int) -> list[int]:
    address = 0x200000 | (OUT0 // 4 + WATCHED)
    unit = [address, 0, data, 0, 0, 0, control, 0x3000, 0, 0, 0, 0]
    off = [0] * 12
    return [*unit, *off, 0, 1, 0, 0, 0, 0, 0, 0]


EQUAL_WORD = 0x1 | 0x2 << 12 | 0x2 << 16 | 1 << 31


@pytest.fixture(scope="module")
def watched_word(tmp_path_factory) -> int:  # type: ignore[no-untyped-def]
    """The word layer 0 writes at the watched address."""
    plan = _plan(tmp_path_factory.mktemp("plain"), None, {}, "plain")
    first = run_plan(plan, "MAX78002").layers[0].output  # (channels, rows, cols)
    pixel = first.reshape(first.shape[0], -1)[:4, WATCHED]  # processors 0-3: byte lanes 0-3
    return sum((int(v) & 0xFF) << 8 * lane for lane, v in enumerate(pixel))


@pytest.mark.parametrize(
    ("action", "hit", "first", "layers"),
    [
        ("link", True, {"snoop_sequence": 3, "simulated_sequence": 3}, [0, 3]),
        ("link", False, {"snoop_sequence": 3}, [0, 1, 2, 3]),
        ("stop", True, {"simulated_sequence": "stop"}, [0]),
        ("stop", False, {}, [0, 1, 2, 3]),
    ],
)
def test_the_unit_decides_the_layer_sequence(
    tmp_path: Path, watched_word: int, action: str, hit: bool, first: dict, layers: list[int]
) -> None:
    """The known answer follows the sequence the YAML says the unit causes; the device gets
    there from the unit's registers and the data layer 0 writes."""
    control = EQUAL_WORD | (0x4 if action == "link" else 0x2)
    data = watched_word if hit else watched_word ^ 0x100
    plan = _plan(tmp_path, _snoop(data, control), first, f"{action}{hit}")
    result = run_plan(plan, "MAX78002")
    assert [r.layer for r in result.layers] == layers
    check = device_check(plan, "MAX78002")
    assert check.ok, (check.details, check.hazards)


def test_a_unit_that_does_not_trigger_breaks_a_skip(tmp_path: Path, watched_word: int) -> None:
    """Firmware whose unit watches the wrong value: the device runs every layer and the known
    answer (of the skipping run) fails at the last layer."""
    first = {"snoop_sequence": 3, "simulated_sequence": 3}
    plan = _plan(tmp_path, _snoop(watched_word + 1, EQUAL_WORD | 0x4), first, "broken")
    check = device_check(plan, "MAX78002")
    assert not check.kat_ok
