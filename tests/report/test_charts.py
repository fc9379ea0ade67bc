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
