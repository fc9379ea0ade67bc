"""The one quantization pass: `ir.numformat` (steps, multipliers, shifts), `ir.ties`
(groups that share a step) and `sim.observe` (ranges through `sim.graph`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.ir import graph as g
from edgesynth.ir.numformat import NumberFormat, fit_multiplier, fit_shift, step, threshold
from edgesynth.ir.ties import graph_links, group_maxabs, tie
from edgesynth.sim.observe import maxabs, observe

FACTORS = st.floats(min_value=1e-6, max_value=1e4, allow_nan=False)


def fmt(**fields: object) -> NumberFormat:
    base: dict = dict(
        name="t",
        scale="mul_shift",
        activation_bits=(8,),
        weight_bits=(8,),
        bias_bits=32,
        accumulator_bits=32,
        shift_max=31,
    )
    return NumberFormat(**{**base, **fields})


@given(FACTORS, st.sampled_from(["half_up", "up"]), st.sampled_from([8, 16]))
def test_the_multiplier_is_the_largest_shift_that_fits(m: float, rounding: str, bits: int) -> None:
    f = fmt(multiplier_rounding=rounding, mul_bits=bits)
    (mul,), shift = fit_multiplier(np.array([m]), f)
    limit = (1 << bits) - 1
    exact = m * 2.0**shift
    if rounding == "up":
        assert exact <= mul < exact + 1
    else:
        assert abs(mul - exact) <= 0.5
    assert mul <= limit or shift == 0  # only a factor too large for any shift overflows
    if shift < f.shift_max and mul <= limit:  # one more bit would not fit
        bigger = m * 2.0 ** (shift + 1)
        assert (math.ceil(bigger) if rounding == "up" else math.floor(bigger + 0.5)) > limit


def test_one_shift_serves_every_channel() -> None:
    mul, shift = fit_multiplier(np.array([0.25, 1.0, 3.0]), fmt(multiplier_rounding="up"))
    assert (mul >> (shift - 2)).tolist() == [1 << 0, 1 << 2, 3 << 2]
    assert mul.max() < 1 << 16 <= 2 * 3 * 2**shift


@given(st.floats(min_value=1e-9, max_value=1e6, allow_nan=False))
def test_the_power_of_two_covers_the_factor(m: float) -> None:
    f = fmt(scale="power_of_two", shift_range=(-40, 40))
    e = fit_shift(m, f)
    assert 2.0**e >= m > 2.0 ** (e - 1)


def test_the_power_of_two_stays_in_its_range() -> None:
    f = fmt(scale="power_of_two", shift_range=(-3, 4))
    assert fit_shift(1e9, f) == 4 and fit_shift(1e-9, f) == -3 and fit_shift(0.0, f) == -3


@pytest.mark.parametrize(
    ("maxabs", "bits", "unsigned", "zero_step", "want"),
    [
        (2.54, 8, False, "unit_range", 2.54 / 127),
        (0.0, 8, False, "unit_range", 1 / 127),
        (0.0, 8, False, "one", 1.0),
        (5.1, 8, True, "one", 5.1 / 255),
        (3.0, 4, False, "one", 3.0 / 7),
    ],
)
def test_steps(maxabs: float, bits: int, unsigned: bool, zero_step: str, want: float) -> None:
    assert step(maxabs, fmt(zero_step=zero_step), bits, unsigned) == want


def test_headroom_widens_the_threshold_of_its_width_only() -> None:
    f = fmt(headroom_bits={16: 1})
    assert threshold(3.0, f, 16) == 6.0 and threshold(3.0, f, 8) == 3.0
    assert threshold(0.0, f, 16) == 2.0


def test_a_format_names_its_kinds() -> None:
    with pytest.raises(ValueError, match="scale"):
        fmt(scale="float")
    with pytest.raises(ValueError, match="weights"):
        fmt(weights="tensor")


def _graph() -> g.Graph:
    """x -> conv -> relu -> maxpool -> flatten -> linear, and conv + relu summed."""
    rng = np.random.default_rng(3)
    gr = g.Graph("t")
    gr.add_input("x", (2, 4, 4))
    w = rng.normal(size=(3, 2, 3, 3))
    gr.add(
        g.Conv(
            name="conv", inputs=["x"], outputs=["c"], weight=w, bias=np.zeros(3), pads=(1, 1, 1, 1)
        ),
        (3, 4, 4),
    )
    gr.add(g.Activation(name="relu", inputs=["c"], outputs=["r"], kind="relu"), (3, 4, 4))
    gr.add(g.Eltwise(name="sum", inputs=["c", "r"], outputs=["s"], kind="add"), (3, 4, 4))
    gr.add(
        g.Pool(name="pool", inputs=["s"], outputs=["p"], kind="max", kernel=(2, 2), stride=(2, 2)),
        (3, 2, 2),
    )
    gr.add(g.Flatten(name="flat", inputs=["p"], outputs=["f"]), (12,))
    gr.add(g.Linear(name="fc", inputs=["f"], outputs=["y"], weight=rng.normal(size=(5, 12))), (5,))
    gr.outputs = ["y"]
    return gr


def test_ties_group_the_operators_the_format_names() -> None:
    gr = _graph()
    groups = tie(graph_links(gr.nodes, ("eltwise:add", "pool:max", "flatten")))
    assert len({groups.find(t) for t in ("c", "r", "s", "p", "f")}) == 1
    assert groups.find("y") != groups.find("f") and groups.find("x") == "x"
    alone = tie(graph_links(gr.nodes, ("eltwise:sub",)))
    assert alone.find("s") != alone.find("c")


def test_observe_is_the_graph_reference_chunk_by_chunk() -> None:
    from edgesynth.sim.graph import run

    gr = _graph()
    x = np.random.default_rng(5).normal(size=(7, 2, 4, 4))
    values = run(gr, x)
    whole = {t: (float(v.min()), float(v.max())) for t, v in values.items()}
    for chunk in (0, 7, 64):  # the whole batch at once: the reference's own values
        assert observe(gr, x, chunk) == whole
    for chunk in (1, 3):  # a batched product may round differently: hence calibration_chunk
        ranges = observe(gr, x, chunk)
        assert ranges.keys() == whole.keys()
        assert all(np.allclose(ranges[t], whole[t], rtol=1e-12) for t in whole)
    big = maxabs(observe(gr, x))
    groups = tie(graph_links(gr.nodes, ("flatten",)))
    assert group_maxabs(groups, big)[groups.find("f")] == max(big["p"], big["f"])
    assert big["r"] == float(np.abs(values["r"]).max())
