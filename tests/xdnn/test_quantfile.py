"""The (pre-shift, scale, post-shift) solver against every channel of ml-suite's GoogLeNet
quantization files, and its properties."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgesynth.errors import EdgesynthError
from edgesynth.targets.xdnn import device as dev
from edgesynth.targets.xdnn.quantfile import (
    MLSUITE,
    check_quant,
    edgesynth_policy,
    effective,
    parse_quant,
    read_quant,
    solve,
)


@pytest.mark.parametrize("name", ["googlenet_v1_8b.json", "googlenet_v1_16b.json"])
def test_check_quant_reproduces_every_mlsuite_triple(mlsuite: Path, name: str) -> None:
    report = check_quant(read_quant(mlsuite / name))
    assert report.layers == 57
    assert report.channels == 7280
    assert report.mismatches == []
    assert report.out_of_field == []
    assert report.policy == MLSUITE


def test_the_scale_factors_are_thresholds_over_the_integer_range(mlsuite: Path) -> None:
    for name, bits in (("googlenet_v1_8b.json", 8), ("googlenet_v1_16b.json", 16)):
        for layer in json.loads((mlsuite / name).read_text())["network"]:
            top = (1 << (bits - 1)) - 1
            assert layer["sf_layer_in"] == pytest.approx(layer["th_layer_in"] / top)
            np.testing.assert_allclose(
                layer["sf_params"],
                np.asarray(layer["th_params"]) / top,
                rtol=1e-6,  # float32 values
            )


def test_a_changed_triple_is_reported(mlsuite: Path) -> None:
    data = json.loads((mlsuite / "googlenet_v1_8b.json").read_text())
    data["network"][3]["scale"][5] += 1
    report = check_quant(parse_quant(data))
    assert len(report.mismatches) == 1
    m = report.mismatches[0]
    assert (m.layer, m.channel) == (data["network"][3]["name"], 5)
    assert m.file[1] == m.solved[1] + 1


def test_exact_powers_of_two_take_the_top_of_the_scale_range() -> None:
    # ml-suite's ResNet-50 8-bit file: a multiplier of exactly 2**-8 is (8, 128, 7)
    t = solve(np.array([2.0**-8]), MLSUITE)
    assert (t.pre[0], t.scale[0], t.post[0]) == (8, 128, 7)


def test_edge_cases_of_the_fields() -> None:
    pol = edgesynth_policy(8)
    assert (pol.postshift, pol.scale_min) == (15, 128)
    assert (edgesynth_policy(16).postshift, edgesynth_policy(16).scale_min) == (7, 64)
    t = solve(np.array([0.0, 300.0, 2.0**-90, 3.0]), pol)
    assert (t.pre[0], t.scale[0], t.post[0]) == (0, 0, 0)  # a zero channel
    assert not t.ok[1]  # 300 > 255: no triple represents it
    assert t.pre[2] == dev.PRESHIFT_MAX and t.scale[2] == 0  # below the smallest step
    assert t.ok[3] and t.pre[3] == 0 and effective(t.pre, t.scale, t.post)[3] == 3.0


@given(st.floats(1e-12, 200.0), st.sampled_from([8, 16]))
def test_solved_triples_fit_their_fields_and_approximate(m: float, bits: int) -> None:
    for pol in (MLSUITE, edgesynth_policy(bits)):
        t = solve(np.array([m]), pol)
        pre, scale, post = int(t.pre[0]), int(t.scale[0]), int(t.post[0])
        assert 0 <= pre <= dev.PRESHIFT_MAX
        assert 0 <= scale <= dev.SCALE_MAX
        assert 0 <= post <= dev.POSTSHIFT_MAX
        if t.ok[0] and pre < dev.PRESHIFT_MAX and scale > pol.scale_min:
            # the scale is rounded to the nearest integer: half a step of relative error
            assert abs(scale / 2.0 ** (pre + post) - m) <= 0.5 / 2.0 ** (pre + post)


def test_malformed_files_name_the_layer() -> None:
    with pytest.raises(EdgesynthError, match="missing `scale`"):
        parse_quant(
            {
                "network": [
                    {
                        "name": "c",
                        "bw_layer_in": 8,
                        "bw_layer_out": 8,
                        "bw_params": 8,
                        "th_params": [1.0],
                        "prescale_shift": [1],
                        "postscale_shift": [7],
                    }
                ]
            }
        )
    with pytest.raises(EdgesynthError, match="no `network`"):
        parse_quant({"layers": []})
