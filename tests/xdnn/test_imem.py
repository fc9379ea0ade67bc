"""IMEM volume sizes and the planner, against ml-suite's GoogLeNet program (28x32 engine)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import commands
from edgesynth.targets.xdnn.device import ENGINES
from edgesynth.targets.xdnn.imem import Step, overlaps, plan_imem, row_pitch, volume_bytes

E28 = ENGINES["28x32"]


def test_imem_width_follows_the_dsp_width() -> None:
    # seed: 14 pixels x 2 bytes = 28 bytes -> a 32-byte IMEM
    assert ENGINES["14x32"].imem_width == 32
    assert ENGINES["28x32"].imem_width == 64
    assert ENGINES["56x32"].imem_width == 128


@pytest.mark.parametrize(
    ("shape", "size"),
    [
        ((3, 224, 224), 0x70000),  # the download region of googlenet_v1_28 (first output)
        ((64, 112, 112), 0x1C0000),
        ((1024, 7, 7), 0x70000),  # the 5b concatenation: 64-byte rows (width below the IMEM's)
        ((1024, 1, 1), 0x10000),
        ((3, 5, 5), 64 * 5 * 4),  # odd depth made even
        ((1, 1, 1), 64 * 2),
    ],
)
def test_volume_bytes(shape: tuple[int, int, int], size: int) -> None:
    assert volume_bytes(E28, shape) == size


@given(st.integers(1, 1023), st.sampled_from(sorted(ENGINES)))
def test_row_pitch_is_a_power_of_two_and_covers_the_row(width: int, name: str) -> None:
    e = ENGINES[name]
    pitch = row_pitch(e, width)
    assert pitch & (pitch - 1) == 0
    assert pitch >= width * 2 and pitch >= e.imem_width
    assert pitch < 2 * max(width * 2, e.imem_width)


def _googlenet(data: dict):
    """Steps, shapes and concatenations from the compiler output's layer list."""
    steps, shapes, concats, by_name = [], {}, {}, {}
    net = data["network"]
    for layer in net:
        _, c, h, w = layer["outputshapes"]
        shapes[layer["name"]] = (c, h, w)
        by_name[layer["name"]] = layer
        if layer["type"] in ("Convolution", "Pooling"):
            steps.append(Step(layer["name"], list(layer["bottoms"]), layer["name"]))
        elif layer["type"] == "Concat":
            concats[layer["name"]] = list(layer["bottoms"])
    return steps, shapes, concats, by_name


def test_planner_reproduces_googlenet_v1_28(googlenet_json: dict) -> None:
    steps, shapes, concats, _ = _googlenet(googlenet_json)
    plan = plan_imem(
        E28,
        steps,
        shapes,
        inputs=["data"],
        outputs=["pool5/7x7_s1"],
        concats=concats,
        reserve=False,
    )
    cmds = commands.parse_compiler_json(googlenet_json).commands
    checked = 0
    for cmd in cmds:
        if cmd.op not in ("XNConv", "XNMaxPool", "XNAvgPool"):
            continue
        step = next(s for s in steps if s.name == cmd.name)
        assert plan.address(step.output) == cmd.int("outaddr"), cmd.name
        assert plan.address(step.inputs[0]) == cmd.int("inaddr"), cmd.name
        checked += 1
    assert checked == 71
    # the concatenations ml-suite listed as `# XNConcat name start end size` comments
    notes = [
        n
        for n in commands.read_program(
            __import__("pathlib").Path(__file__).resolve().parents[2].parent
            / "shared/xdnn/ml-suite/googlenet_v1_28.cmd"
        ).notes
        if n.op == "XNConcat"
    ]
    assert len(notes) == 9
    for note in notes:
        _, _, name, start, end, nbytes = note.text.split()
        p = plan.placements[name]
        assert (p.address, p.end, p.size) == (int(start, 16), int(end, 16), int(nbytes))
    assert overlaps(plan) == []
    assert plan.peak <= E28.imem_bytes


def test_reserved_regions_keep_download_and_upload(googlenet_json: dict) -> None:
    steps, shapes, concats, _ = _googlenet(googlenet_json)
    plan = plan_imem(E28, steps, shapes, inputs=["data"], outputs=["pool5/7x7_s1"], concats=concats)
    assert plan.regions["download"] == (0, 0x70000)
    assert plan.regions["upload"] == (E28.imem_bytes - 0x10000, E28.imem_bytes)
    lo, hi = plan.regions["processing"]
    for p in plan.placements.values():
        if p.region == "processing":
            assert lo <= p.address and p.end <= hi
    assert overlaps(plan) == []


def test_overflow_names_the_command() -> None:
    shapes = {"x": (4, 224, 224), "y": (512, 224, 224)}
    with pytest.raises(EdgesynthError, match="IMEM overflow at `conv`"):
        plan_imem(E28, [Step("conv", ["x"], "y")], shapes, inputs=["x"], outputs=[], reserve=False)
