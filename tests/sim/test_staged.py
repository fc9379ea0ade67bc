"""The staged requantization (xDNN's post-array pipeline): exact values at every saturation and
wrap, and a property test against an independent per-element reference in Python integers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.ir import graph as g
from edgesynth.sim.graph import run
from edgesynth.sim.staged import saturate, shift_scale_bias


def _one(acc: int, pre: int, scale: int, post: int, bias: int = 0, **kw) -> int:
    return int(
        shift_scale_bias(np.array([[acc]]), pre=pre, scale=scale, post=post, bias=bias, **kw)[0, 0]
    )


def test_preshift_saturates_to_16_bits() -> None:
    assert _one(1 << 20, 2, 1, 0) == 32767  # 2**18 does not fit: capped
    assert _one(-(1 << 20), 2, 1, 0) == -32768
    assert _one(32767 << 3, 3, 1, 0) == 32767  # exactly the top fits
    assert _one((32768 << 3), 3, 1, 0) == 32767
    assert _one(-(32768 << 3), 3, 1, 0) == -32768


def test_preshift_floors() -> None:
    assert _one(7, 1, 1, 0) == 3
    assert _one(-7, 1, 1, 0) == -4  # arithmetic shift: toward minus infinity


def test_postshift_keeps_the_low_16_bits() -> None:
    # 32767 * 255 = 8,355,585 = 127 * 65536 + 32513: the low 16 bits are 32513
    assert _one(32767, 0, 255, 0) == 32513
    # 8,355,585 >> 7 = 65,278 = 65536 - 258: the low 16 bits read as -258 (a wrap, no cap)
    assert _one(32767, 0, 255, 7) == -258
    assert _one(32767, 0, 255, 8) == 32639  # 8,355,585 >> 8 = 32,639 fits
    assert _one(-32768, 0, 255, 8) == -32640  # -8,355,840 >> 8


def test_bias_saturates() -> None:
    assert _one(100, 0, 1, 0, bias=32767) == 32767
    assert _one(-100, 0, 1, 0, bias=-32768) == -32768
    assert _one(10, 0, 1, 0, bias=-3) == 7


def test_accumulator_wraps_at_48_bits() -> None:
    assert _one((1 << 47) + 5, 0, 1, 0) == -32768  # wraps to a large negative, saturates
    assert _one((1 << 48) + 5, 0, 1, 0) == 5


def test_final_clip_and_per_channel_parameters() -> None:
    acc = np.array([[1000, 1000], [-1000, 1000]])
    out = shift_scale_bias(
        acc,
        pre=np.array([0, 2]),
        scale=np.array([1, 3]),
        post=np.array([0, 1]),
        bias=np.array([0, -1]),
        lo=-128,
        hi=127,
    )
    # channel 0: 1000 -> clip 127; channel 1: (250 * 3) >> 1 = 375, -1 -> 374 -> 127
    np.testing.assert_array_equal(out, [[127, 127], [-128, 127]])


def _reference(acc: int, pre: int, scale: int, post: int, bias: int) -> int:
    def sat(v: int) -> int:
        return max(-32768, min(32767, v))

    a = ((acc + (1 << 47)) % (1 << 48)) - (1 << 47)
    x = sat(a // (1 << pre))
    y = (x * scale) // (1 << post)
    y = ((y + 32768) % 65536) - 32768
    return sat(y + bias)


@given(
    st.integers(-(1 << 50), 1 << 50),
    st.integers(0, 63),
    st.integers(0, 255),
    st.integers(0, 15),
    st.integers(-32768, 32767),
)
def test_against_python_integers(acc: int, pre: int, scale: int, post: int, bias: int) -> None:
    assert _one(acc, pre, scale, post, bias) == _reference(acc, pre, scale, post, bias)


def test_graph_operator_runs_the_same() -> None:
    gr = g.Graph("t")
    gr.add_input("x", (2, 1, 1), g.QType(32))
    node = g.ShiftScaleBias(
        name="q",
        inputs=["x"],
        outputs=["y"],
        pre=np.array([1, 0]),
        scale=np.array([3, 200]),
        post=np.array([0, 7]),
        bias=np.array([1, -2]),
    )
    gr.add(node, (2, 1, 1), g.QType(16))
    gr.outputs = ["y"]
    x = np.array([[[[9]], [[30000]]]])
    y = run(gr, x)["y"]
    assert y.reshape(-1).tolist() == [_reference(9, 1, 3, 0, 1), _reference(30000, 0, 200, 7, -2)]


@pytest.mark.parametrize("bits", [8, 16])
def test_saturate(bits: int) -> None:
    top = 1 << (bits - 1)
    np.testing.assert_array_equal(saturate(np.array([-top - 5, top + 5]), bits), [-top, top - 1])
