"""`cores.side_by_side_threads` (threads only where a core is idle) and `proof.side_by_side`
(a proof's two halves at once, or one after the other on a busy machine: the same results and
errors either way)."""

from __future__ import annotations

import os
import threading

import pytest

from edgesynth import cores
from edgesynth.proof import side_by_side


@pytest.mark.parametrize(
    ("cpus", "load", "threads"), [(2, 0.2, 2), (2, 1.49, 2), (2, 1.5, 1), (2, 3.0, 1), (1, 0.0, 1)]
)
def test_threads_only_where_a_core_is_idle(
    monkeypatch: pytest.MonkeyPatch, cpus: int, load: float, threads: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert cores.side_by_side_threads(2) == threads


@pytest.mark.parametrize("spare", [1, 2])
def test_side_by_side_gives_both_results_and_either_error(
    monkeypatch: pytest.MonkeyPatch, spare: int
) -> None:
    monkeypatch.setattr(cores, "side_by_side_threads", lambda wanted: min(wanted, spare))
    where: list[str] = []

    def second() -> str:
        where.append(threading.current_thread().name)
        return "b"

    assert side_by_side(lambda: "a", second) == ("a", "b")
    assert (where[0] == "edgesynth-proof") == (spare == 2)

    def fails() -> None:
        raise ValueError("second")

    with pytest.raises(ValueError, match="second"):
        side_by_side(lambda: 1, fails)
    with pytest.raises(KeyError):
        side_by_side(lambda: {}["first"], lambda: 2)
