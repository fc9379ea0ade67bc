"""`edgesynth plan --picture` on the real MNIST network: one lane per memory instance in use, one
legend entry per tensor, no two texts overlapping, every text at least 9 pt."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from edgesynth.targets.max7800x.commands.plan_cmd import PlanOptions, run_plan
from edgesynth.targets.max7800x.placement import picture
from edgesynth.targets.max7800x.placement.report import tensors

HERE = Path(__file__).resolve().parent
MNIST = HERE.parents[2] / "shared" / "corpus" / "cases" / "MAX78000" / "mnist"


def test_colours_differ_and_ticks_are_powers_of_two():
    colors = picture.palette(20)
    assert len(set(colors)) == 20 and picture.palette(21)[20] == colors[0]
    assert picture._tick_step(0x1100) == 0x400
    assert picture._tick_step(5) == 1
    assert picture.instances_of(0b1_0000_0001_0001, 4) == {0, 1, 3}


def _planned_mnist(tmp_path: Path, monkeypatch) -> tuple[object, object, Path]:
    """Plan MNIST without its placement keys; the placement and plan the picture was drawn from."""
    data = yaml.safe_load((MNIST / "networks" / "mnist-chw-ai85.yaml").read_text())
    for layer in data["layers"]:
        for key in ("processors", "output_processors", "in_offset", "out_offset"):
            layer.pop(key, None)
    network = tmp_path / "mnist.yaml"
    network.write_text(yaml.safe_dump(data, sort_keys=False))
    drawn = []
    real_draw = picture.draw

    def spy(placement, plan, path, **kw):
        drawn.append((placement, plan))
        return real_draw(placement, plan, path, **kw)

    monkeypatch.setattr(picture, "draw", spy)
    monkeypatch.chdir(MNIST)
    png = tmp_path / "map.png"
    checkpoint = MNIST / "trained" / "ai85-mnist-qat8-q.pth.tar"
    run_plan(PlanOptions(network=network, checkpoint=checkpoint, picture=png))
    ((placement, plan),) = drawn
    return placement, plan, png


def _undrawn_tick_labels(fig) -> set[int]:
    """Tick labels outside their axis's view: matplotlib keeps them but does not draw them."""
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            eps = (high - low) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - eps <= tick.get_loc() <= high + eps:
                    hidden |= {id(tick.label1), id(tick.label2)}
    return hidden


@pytest.mark.corpus
@pytest.mark.usefixtures("corpus")
def test_mnist_picture_has_lanes_a_legend_and_no_overlapping_text(tmp_path, monkeypatch, capsys):
    from matplotlib.text import Text

    placement, plan, png = _planned_mnist(tmp_path, monkeypatch)
    capsys.readouterr()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    fig = picture.figure(placement, plan)
    data_ax = fig.axes[0]
    places = tensors(placement)
    shared = placement.problem.shared
    used = set().union(*(picture.instances_of(t.processors, shared) for t in places))
    assert len(used) == 16  # layer 0 writes 60 channels from processor 4: every instance
    lanes = [t.get_text() for t in data_ax.get_yticklabels()]
    assert len(lanes) == len(used) and lanes[0] == "0 (P0-3)" and lanes[-1] == "15 (P60-63)"

    (legend,) = fig.legends
    entries = [t.get_text() for t in legend.get_texts()]
    assert len(entries) == len(places) == 6
    assert entries[0].startswith("input 1x28x28: P0, steps 0-1")
    assert entries[1].startswith("layer 0 out 60x28x28: P4-63") and "layer 1" in entries[1]

    renderer = fig.canvas.get_renderer()
    texts = [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and id(t) not in _undrawn_tick_labels(fig)
    ]
    assert len(texts) > 40  # tick labels, axis labels, titles, legend entries, box labels
    for t in texts:
        assert t.get_fontsize() >= 9, t.get_text()
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())
    kernel_labels = {t.get_text() for t in fig.axes[1].texts if t.get_visible()}
    assert {"layer 1", "layer 2"} <= kernel_labels
