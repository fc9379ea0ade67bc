"""The pictures' geometry (`edgesynth.report.charts`): ticks cover the data; regions that share
addresses never share a row; every rectangle lies inside the picture."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from edgesynth.report import charts
from edgesynth.targets.report_model import AddressMap, Region

spans = st.tuples(st.integers(0, 1000), st.integers(1, 200)).map(lambda s: (s[0], s[0] + s[1]))


@given(st.floats(0.001, 1e9))
def test_ticks_cover_the_data(high: float) -> None:
    for ticks in (charts.nice_ticks(high), charts.byte_ticks(high)):
        assert ticks[0] == 0 and ticks[-1] >= high
        assert len(ticks) <= 12
        steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
        assert len(steps) == 1  # evenly spaced


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), spans), min_size=1, max_size=30))
def test_regions_sharing_addresses_take_their_own_rows(found: list) -> None:
    regions = [Region(lane, lo, hi, f"t{i}", "layer") for i, (lane, (lo, hi)) in enumerate(found)]
    picture = AddressMap("m", ["a", "b"], 1200, regions)
    rows = charts._rows(picture)
    for i, r in enumerate(regions):
        for j, s in enumerate(regions[:i]):
            if r.lane == s.lane and rows[i] == rows[j]:
                assert r.end <= s.start or s.end <= r.start, (r, s)
    chart = charts.address_map(picture)
    assert len(chart.rects) == len(regions)
    for rect in chart.rects:
        assert rect.x >= charts.LEFT and rect.x + rect.w <= charts.WIDTH
        assert chart.plot_top <= rect.y and rect.y + rect.h <= chart.plot_bottom
        assert rect.title.startswith("t")


def test_a_legend_names_each_tensor_by_its_own_colour() -> None:
    regions = [Region("a", 10 * i, 10 * i + 5, f"t{i % 3}", "layer") for i in range(6)]
    chart = charts.address_map(AddressMap("m", ["a"], 100, regions))
    assert [text for _, _, _, text in chart.keys] == ["t0", "t1", "t2"]
    assert len({colour for _, _, colour, _ in chart.keys}) == 3
    for x, y, _, text in chart.keys:  # below the axis label, inside the picture
        assert y > chart.xlabel_y and y + 12 <= chart.height
        assert x + 17 + charts.CHAR * len(text) <= chart.width


def test_no_legend_where_colours_repeat() -> None:
    many = len(charts.PALETTE) + 1
    regions = [Region("a", i, i + 1, f"t{i}", "layer") for i in range(many)]
    chart = charts.address_map(AddressMap("m", ["a"], 100, regions))
    assert chart.legend == []
    assert [(colour, text) for _, _, colour, text in chart.keys] == [("", chart.caption)]
    assert f"{many} tensors" in chart.caption


def test_labels_inside_rectangles_only_where_they_fit() -> None:
    lanes = [f"l{i}" for i in range(80)]  # 8 px rows: no 10 px label inside
    regions = [Region(lane, 0, 100, "t", "layer") for lane in lanes]
    assert all(
        r.label == "" for r in charts.address_map(AddressMap("m", lanes, 100, regions)).rects
    )
    one = charts.address_map(AddressMap("m", ["a"], 100, [Region("a", 0, 100, "t", "layer")]))
    assert [r.label for r in one.rects] == ["t"]
    assert charts.ink("#edc948") == "#222" and charts.ink("#4e79a7") == "#fff"
