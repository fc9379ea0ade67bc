"""The numbers `edgesynth validate` prints: properties that hold for any reference and result."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from edgesynth.validate.metrics import (
    JUMP_FLOOR,
    ErrorSums,
    agreement,
    confusion,
    error_metrics,
    first_jump,
    format_confusion,
    top1,
)

SETTINGS = settings(max_examples=80, deadline=None)
# zero or at least 1e-6 in size: the sums of squares the metrics keep would underflow to zero
# for values under about 1e-154, which no network's outputs come near
values = st.one_of(st.just(0.0), st.floats(1e-6, 1e3), st.floats(-1e3, -1e-6))


@st.composite
def pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    shape = draw(hnp.array_shapes(min_dims=2, max_dims=3, max_side=6))
    ref = draw(hnp.arrays(np.float64, shape, elements=values))
    got = draw(hnp.arrays(np.float64, shape, elements=values))
    return ref, got


@SETTINGS
@given(pairs())
def test_metrics_agree_with_numpy(pair: tuple[np.ndarray, np.ndarray]) -> None:
    ref, got = pair
    m = error_metrics(ref, got)
    err = got - ref
    assert m.rmse == pytest.approx(np.sqrt(np.mean(err**2)), rel=1e-9, abs=1e-9)
    assert m.mae == pytest.approx(np.mean(np.abs(err)), rel=1e-9, abs=1e-9)
    assert m.mean == pytest.approx(err.mean(), rel=1e-9, abs=1e-9)
    assert m.std == pytest.approx(err.std(), rel=1e-6, abs=1e-6)
    assert m.mae <= m.rmse + 1e-9
    if np.any(ref):
        assert m.l2r == pytest.approx(np.linalg.norm(err) / np.linalg.norm(ref), rel=1e-9)
    else:
        assert m.l2r is None
    if m.cosine is not None:
        assert -1.0 <= m.cosine <= 1.0


@SETTINGS
@given(pairs(), st.integers(1, 5))
def test_batches_add_up_to_the_whole(pair: tuple[np.ndarray, np.ndarray], cut: int) -> None:
    """Adding the samples in two batches gives the metrics of all of them at once."""
    ref, got = pair
    cut = min(cut, len(ref))
    sums = ErrorSums().add(ref[:cut], got[:cut]).add(ref[cut:], got[cut:])
    whole, parts = error_metrics(ref, got), sums.result()
    for name in ("rmse", "mae", "mean", "l2r", "cosine"):
        a, b = getattr(whole, name), getattr(parts, name)
        assert (a is None) == (b is None)
        if a is not None:
            assert b == pytest.approx(a, rel=1e-9, abs=1e-9)


@SETTINGS
@given(pairs(), st.floats(0.01, 100))
def test_relative_metrics_do_not_depend_on_the_unit(
    pair: tuple[np.ndarray, np.ndarray], k: float
) -> None:
    ref, got = pair
    a, b = error_metrics(ref, got), error_metrics(k * ref, k * got)
    assert b.rmse == pytest.approx(k * a.rmse, rel=1e-9, abs=1e-9)
    if a.l2r is not None and b.l2r is not None:
        assert b.l2r == pytest.approx(a.l2r, rel=1e-6)
    if a.cosine is not None and b.cosine is not None:
        assert b.cosine == pytest.approx(a.cosine, rel=1e-6, abs=1e-9)


@SETTINGS
@given(hnp.arrays(np.float64, (4, 5), elements=st.floats(0.5, 10)))
def test_the_same_values_have_no_error(ref: np.ndarray) -> None:
    m = error_metrics(ref, ref.copy())
    assert (m.rmse, m.mae, m.l2r, m.mean, m.std) == (0, 0, 0, 0, 0)
    assert m.cosine == pytest.approx(1.0)
    assert agreement(top1(ref), top1(ref)) == 1.0


@SETTINGS
@given(
    st.integers(1, 6).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(st.tuples(st.integers(0, k - 1), st.integers(0, k - 1)), min_size=1),
        )
    )
)
def test_the_confusion_matrix_counts_every_sample_once(
    case: tuple[int, list[tuple[int, int]]],
) -> None:
    classes, pairs_ = case
    truth, predicted = (np.array(c) for c in zip(*pairs_, strict=True))
    matrix = confusion(truth, predicted, classes)
    assert matrix.sum() == len(truth)
    assert np.trace(matrix) / len(truth) == pytest.approx(agreement(truth, predicted))
    assert (matrix.sum(axis=1) == np.bincount(truth, minlength=classes)).all()
    assert len(format_confusion(matrix)) == classes + 1


def test_top1_takes_the_first_of_equal_largest_values() -> None:
    assert top1(np.array([[1, 3, 3], [5, 0, 5]])).tolist() == [1, 0]


def test_first_jump_names_the_layer_where_the_error_leaps() -> None:
    assert first_jump([0.003, 0.015, 0.01, 3.0, 3.1]) == 3
    assert first_jump([0.003, 0.015, 0.02, 0.03, 0.05]) is None  # grows slowly: no jump
    assert first_jump([0.5]) == 0  # wrong from the start
    assert first_jump([0.01, None, 0.2]) == 2  # an undefined error is skipped
    assert first_jump([0.05, JUMP_FLOOR * 1.2]) is None  # not 3x the largest before it
