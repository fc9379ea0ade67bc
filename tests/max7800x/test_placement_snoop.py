"""Automatic placement of MAX78002 networks whose layer sequence a snoop unit decides.

The unit watches data-memory addresses, so which layers run depends on where the planner puts
the outputs it watches: the planner must give the run the YAML declares (`simulated_sequence`,
`snoop_sequence`). Checked on networks other than the vendor's tests: the planned project runs
on the virtual device, which follows the unit's registers, and must reproduce the known answer
with the declared layers. The offsets the planner allows are checked against the device's own
unit model, write by write.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import needs
from edgesynth.errors import EdgesynthError
from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions
from edgesynth.targets.max7800x.commands.plan_cmd import run_plan as plan_command
from edgesynth.targets.max7800x.description.yamlcfg import load_spec
from edgesynth.targets.max7800x.placement import snoop
from edgesynth.targets.max7800x.placement.verify import device_check, run_plan
from edgesynth.targets.max7800x.snoop_unit import SnoopUnit
from izer_helpers import plan_in

NAMES = ("A1", "A2", "D1", "D2", "X1", "X2", "C1", "C2", "ACC", "HIT", "MAX", "AM")
EQUAL_WORD = 0x1 | 0x2 << 12 | 0x2 << 16 | 1 << 31  # enable, address == A1, word == D1
LINK, STOP = 0x4, 0x2


def _network(folder: Path, snoop_words: list[int] | None, first: dict, placed: bool) -> Path:
    """Layer 0 (8 channels) -> 1 -> 2 (passthrough) -> 3; the run may skip 1 and 2."""
    rng = np.random.default_rng(11)
    tests = folder / "tests"
    tests.mkdir(exist_ok=True)
    np.save(tests / "sample_snp.npy", rng.integers(-128, 128, size=(4, 6, 7)))
    with open(tests / "weights_snp.npy", "wb") as stream:
        for shape in ((8, 4, 3, 3), (8, 8, 1, 1), (8, 8, 1, 1)):
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    layers: list[dict] = [
        {"op": "conv2d", "kernel_size": "3x3", "pad": 1, **first},
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0},
        {"op": "passthrough"},
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0},
    ]
    if placed:  # the hand placement, only to simulate the outputs
        hand = ((0xF, 0x3000), (0xFF, 0x6000), (0xFF, 0x3000), (0xFF, 0))
        for layer, (procs, out) in zip(layers, hand, strict=True):
            layer.update(processors=procs, out_offset=out)
    spec: dict = {"arch": "test", "dataset": "snp", "layers": layers}
    if snoop_words is not None:
        spec["snoop"] = snoop_words
    path = folder / ("placed.yaml" if placed else "net.yaml")
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _snoop_words(address: int, data: int, control: int) -> list[int]:
    unit = [address, 0, data, 0, 0, 0, control, 0x3000, 0, 0, 0, 0]
    return [*unit, *[0] * 12, *[0] * 8]


@pytest.fixture(scope="module")
def layer0(tmp_path_factory) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Layer 0's output (8 x 42 pixels): it does not depend on the placement."""
    folder = tmp_path_factory.mktemp("reference")
    _network(folder, None, {}, placed=True)
    result, _ = plan_in(folder, "MAX78002", config="placed.yaml")
    return result.layers[0].output.reshape(8, -1)


def _word(layer0: np.ndarray, pixel: int, quad: int) -> int:
    lanes = layer0[4 * quad : 4 * quad + 4, pixel]
    return sum((int(v) & 0xFF) << 8 * lane for lane, v in enumerate(lanes))


def _plan(folder: Path, snooped: bool = True):  # type: ignore[no-untyped-def]
    """`edgesynth plan net.yaml -o planned.yaml` (which proves the plan on the device), then
    the planned network's layer sequence on the device and its spec."""
    options = PlanOptions(
        network=Path("net.yaml"), checkpoint=None, device="MAX78002", output=folder / "p.yaml"
    )
    with contextlib.chdir(folder), contextlib.redirect_stdout(None):
        lines = plan_command(options)
    assert any(line.startswith("known answer reproduced on the virtual") for line in lines)
    assert any(line.startswith("snoop: snoop unit 1 must") for line in lines) == snooped
    _, plan = plan_in(folder, "MAX78002", config="p.yaml", prefix="planned")
    check = device_check(plan, "MAX78002")
    assert check.ok, (check.details, check.hazards)
    return [r.layer for r in run_plan(plan, "MAX78002").layers], load_spec(folder / "p.yaml")


def _word_address(instance: int, word: int) -> int:
    return 0x200000 | instance << 15 | word


@pytest.mark.parametrize(
    ("control", "first", "layers"),
    [
        (EQUAL_WORD | LINK, {"snoop_sequence": 3, "simulated_sequence": 3}, [0, 3]),
        (EQUAL_WORD | STOP, {"simulated_sequence": "stop"}, [0]),
    ],
    ids=["link taken", "stop"],
)
def test_the_watched_word_is_placed_where_the_unit_looks(
    tmp_path: Path, layer0: np.ndarray, control: int, first: dict, layers: list[int]
) -> None:
    """The unit watches word 0x150 of memory instance 2 for the word layer 0 writes at pixel 9
    for channels 4-7: the only placement that triggers it puts those channels on processors
    8-11 (layer 0's output on 4-11) at word 0x150 - 9."""
    data = _word(layer0, 9, 1)
    assert sum(_word(layer0, p, q) == data for p in range(42) for q in range(2)) == 1
    _network(tmp_path, _snoop_words(_word_address(2, 0x150), data, control), first, placed=False)
    sequence, spec = _plan(tmp_path)
    assert sequence == layers
    assert spec.layers[0].output_processors == 0xFF0
    assert spec.layers[0].out_offset == 4 * (0x150 - 9)
    if layers == [0, 3]:  # the layer after the skip reads layer 0's output
        assert spec.layers[3].in_offset == spec.layers[0].out_offset


@pytest.mark.parametrize(
    ("control", "first"),
    [(EQUAL_WORD | LINK, {"snoop_sequence": 3}), (EQUAL_WORD | STOP, {})],
    ids=["link passed by", "no stop"],
)
def test_a_placement_that_would_trigger_the_unit_is_avoided(
    tmp_path: Path, layer0: np.ndarray, control: int, first: dict
) -> None:
    """The unit watches exactly where the planner puts layer 0's pixel 5 when no unit is
    configured; with the unit, that placement would skip (or stop) the run: it is moved."""
    plain = tmp_path / "plain"
    plain.mkdir()
    _network(plain, None, {}, placed=False)
    _, spec = _plan(plain, snooped=False)
    base, procs = spec.layers[0].out_offset, spec.layers[0].output_processors
    instance = (procs & -procs).bit_length() // 4  # the first processor's memory instance
    address = _word_address(instance, base // 4 + 5)
    _network(tmp_path, _snoop_words(address, _word(layer0, 5, 0), control), first, placed=False)
    sequence, spec = _plan(tmp_path)
    assert sequence == [0, 1, 2, 3]
    moved = (spec.layers[0].out_offset, spec.layers[0].output_processors)
    assert moved != (base, procs)


def test_a_declared_trigger_no_placement_can_give_is_refused(
    tmp_path: Path, layer0: np.ndarray
) -> None:
    words = {_word(layer0, p, q) for p in range(42) for q in range(2)}
    absent = next(v for v in range(1, 1 << 32, 0x01010101) if v not in words)
    first = {"snoop_sequence": 3, "simulated_sequence": 3}
    _network(
        tmp_path, _snoop_words(_word_address(0, 0x40), absent, EQUAL_WORD | LINK), first, False
    )
    with pytest.raises(EdgesynthError) as err:
        _plan(tmp_path)
    assert err.value.layer == 0 and err.value.key == "simulated_sequence"
    assert "snoop unit 1 must trigger in layer 0" in err.value.message
    assert "but no placement of its output gives that" in err.value.message
    assert f"addresses == 0x200040 for words == {absent:#010x}" in err.value.message


# --- the allowed offsets against the device's unit, write by write ---------------------------


def _unit(regs: dict[str, int]) -> SnoopUnit:
    return SnoopUnit(0, 1, {name: regs.get(name, 0) for name in NAMES})


@st.composite
def cases(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 12))
    instance = np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    word = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)))
    values = np.array(
        draw(st.lists(st.sampled_from([3, 5, 0x105, 0x7F000005]), min_size=n, max_size=n))
    )
    masks = np.array(
        draw(st.lists(st.sampled_from([0xFFFFFFFF, 0xFF, 0xFFFF00]), min_size=n, max_size=n))
    )
    address_code = draw(st.sampled_from([0, 1, 2, 4, 5, 8]))
    data_code = draw(st.sampled_from([0, 1, 2, 5]))
    count_code = draw(st.sampled_from([0, 0, 1, 2, 5, 10]))
    lane = draw(st.integers(0, 3))
    whole = draw(st.booleans())
    c1 = 1 | address_code << 12 | data_code << 16 | count_code << 20 | lane << 29 | whole << 31
    base = 0x200000 | draw(st.integers(0, 3)) << 15
    regs = {
        "A1": base + draw(st.integers(0, 20)),
        "A2": base + draw(st.integers(0, 30)),
        "D1": draw(st.sampled_from([0, 3, 5, 0x105])),
        "D2": draw(st.sampled_from([5, 0x105, 0x7F000005])),
        "X1": draw(st.integers(0, 3)),
        "X2": draw(st.integers(0, 4)),
        "C1": c1,
    }
    return instance, word, values, masks, regs


@given(cases(), st.integers(0, 2))
@settings(max_examples=300, deadline=None)
def test_allowed_offsets_agree_with_the_device_unit(case, first: int) -> None:  # type: ignore[no-untyped-def]
    """For every offset: where the planner's evaluation is certain, the device's unit, shown
    the same writes at that offset (unwritten bytes as zeros and as ones), decides the same."""
    instance, word, values, masks, regs = case
    key = instance << 8 | word  # one write per word, as the device shows them
    _, keep = np.unique(key, return_index=True)
    writes = snoop.Written(instance[keep], word[keep], masks[keep], values[keep] & masks[keep])
    low, high = 0, 40
    fires, known = snoop.triggers(_unit(regs), writes, 7, first, low, high)
    for offset in range(low, high + 1):
        address = 0x200000 | (writes.instance + first) << 15 | (writes.word + offset)
        seen = []
        for filler in (0, 0xFFFFFFFF):
            unit = _unit(regs)
            data = (writes.value | (filler & ~writes.mask)) & 0xFFFFFFFF
            unit.observe(7, address.astype(np.uint64), data.astype(np.uint32))
            seen.append(7 in unit.triggered)
        if known[offset - low]:
            assert seen == [bool(fires[offset - low])] * 2, offset


@given(st.lists(st.booleans(), max_size=40), st.integers(0, 100))
def test_intervals_are_the_runs_of_allowed_offsets(allowed: list[bool], low: int) -> None:
    runs = snoop.intervals(np.array(allowed, dtype=bool), low)
    rebuilt = [False] * len(allowed)
    for a, b in runs:
        assert a <= b
        for o in range(a, b + 1):
            rebuilt[o - low] = True
    assert rebuilt == allowed
    assert all(b + 1 < c for (_, b), (c, _) in itertools.pairwise(runs))


CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "cases" / "MAX78002"


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("case", "hidden"),
    [
        ("test-eltwiseadd-avgpool", True),
        ("test-eltwiseadd-combined-avgpool", True),
        ("test-eltwiseadd-poolafter-avg", False),
    ],
)
def test_hardware_layer_numbers_count_the_hidden_layers(case: str, hidden: bool) -> None:
    """A unit's layer filter counts the registers' layers: an average pool after an element-wise
    layer gets a hidden reset layer on the MAX78002, which shifts the numbers after it."""
    from edgesynth.targets.max7800x.device import get_device
    from edgesynth.targets.max7800x.plan.hwlayers import hardware_numbers

    folder = needs.in_corpus(CORPUS / case)
    config = next((folder / "tests").glob("*.yaml")).relative_to(folder)
    result, plan = plan_in(folder, "MAX78002", config=str(config))
    numbers = hardware_numbers(result.network, get_device("MAX78002"))
    assert numbers == {h.index: h.index + h.hw_add for h in plan.settings.hw}
    assert any(h.hw_add for h in plan.settings.hw) == hidden


def test_a_given_offset_that_keeps_the_unit_from_triggering_is_named(
    tmp_path: Path, layer0: np.ndarray
) -> None:
    data = _word(layer0, 9, 1)
    first = {"snoop_sequence": 3, "simulated_sequence": 3, "out_offset": 0}
    _network(tmp_path, _snoop_words(_word_address(2, 0x150), data, EQUAL_WORD | LINK), first, False)
    with pytest.raises(EdgesynthError) as err:
        _plan(tmp_path)
    assert err.value.layer == 0
    assert "no placement of its output with `out_offset` of layer 0 gives that" in err.value.message


# --- random networks --------------------------------------------------------------------------

ACTIONS = {
    "link": (LINK, {"snoop_sequence": 3, "simulated_sequence": 3}, [0, 3]),
    "link passed by": (LINK, {"snoop_sequence": 3}, [0, 1, 2, 3]),
    "stop": (STOP, {"simulated_sequence": "stop"}, [0]),
    "no stop": (STOP, {}, [0, 1, 2, 3]),
}


@given(
    seed=st.integers(0, 2**16),
    channels=st.sampled_from([3, 4, 6, 8, 12, 16, 32, 64]),
    action=st.sampled_from(sorted(ACTIONS)),
    whole_word=st.booleans(),
)
@settings(max_examples=20, deadline=None)
def test_random_snoop_networks_run_the_declared_layers(
    tmp_path_factory, seed: int, channels: int, action: str, whole_word: bool
) -> None:  # type: ignore[no-untyped-def]
    """Layer 0 of `channels` channels; the unit watches, at an address some placement can give,
    one of its words (whole, or one byte lane): the planner places the network and the device
    runs exactly the declared layers with the known answer."""
    rng = np.random.default_rng(seed)
    folder = tmp_path_factory.mktemp("random")
    tests = folder / "tests"
    tests.mkdir()
    rows, cols, inputs = int(rng.integers(3, 8)), int(rng.integers(3, 8)), int(rng.integers(1, 5))
    np.save(tests / "sample_snp.npy", rng.integers(-128, 128, size=(inputs, rows, cols)))
    with open(tests / "weights_snp.npy", "wb") as stream:
        for shape in (
            (channels, inputs, 3, 3),
            (channels, channels, 1, 1),
            (channels,) * 2 + (1, 1),
        ):
            np.save(stream, rng.integers(-128, 128, size=shape, dtype=np.int64))
    layers = [
        {"op": "conv2d", "kernel_size": "3x3", "pad": 1},
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0},
        {"op": "passthrough"},
        {"op": "conv2d", "kernel_size": "1x1", "pad": 0},
    ]
    (folder / "ref.yaml").write_text(
        yaml.safe_dump({"arch": "test", "dataset": "snp", "layers": layers}, sort_keys=False)
    )
    result, _ = plan_in(folder, "MAX78002", config="ref.yaml")
    out = result.layers[0].output.reshape(channels, -1)
    quads = -(-channels // 4)
    pixel, quad = int(rng.integers(0, out.shape[1])), int(rng.integers(0, quads))
    lanes = out[4 * quad : 4 * quad + 4, pixel]
    if whole_word and lanes.size == 4:
        data = sum((int(v) & 0xFF) << 8 * i for i, v in enumerate(lanes))
        compare_bits = 1 << 31
    else:
        lane = int(rng.integers(0, lanes.size))
        data, compare_bits = int(lanes[lane]) & 0xFF, lane << 29
    first = int(rng.integers(0, 16 - quads + 1))  # a memory instance the block may start at
    word = pixel + int(rng.integers(0, 0x400))
    control, declared, layers_run = ACTIONS[action]
    c1 = 1 | 2 << 12 | 2 << 16 | compare_bits | control
    snoop_words = [_word_address(first + quad, word), 0, data, 0, 0, 0, c1, 0x3000]
    layers[0].update(declared)
    spec = {"arch": "test", "dataset": "snp", "snoop": [*snoop_words, *[0] * 24], "layers": layers}
    (folder / "net.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    sequence, _ = _plan(folder)
    assert sequence == layers_run
