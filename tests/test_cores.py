"""`cores.side_by_side_threads` (threads only where a core is idle) and `proof.side_by_side`
(a proof's two halves at once, or one after the other on a busy machine: the same results and
errors either way)."""

from __future__ import annotations

import builtins
import os
import threading
from pathlib import Path

import pytest

from edgesynth import cores
from edgesynth.proof import side_by_side


@pytest.mark.parametrize(
    ("cpus", "others", "threads"), [(2, 0, 2), (2, 0.9, 2), (2, 1, 1), (4, 2, 2), (1, 0, 1)]
)
def test_threads_only_where_a_core_is_idle(
    monkeypatch: pytest.MonkeyPatch, cpus: int, others: float, threads: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(cores, "_others_running", lambda: others)
    assert cores.side_by_side_threads(2) == threads


def test_the_runnable_count_of_proc_loadavg_less_this_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_open = builtins.open
    fake = tmp_path / "loadavg"
    fake.write_text("2.30 3.25 2.95 3/95 25125\n")

    def fake_open(name: object, *args: object, **kwargs: object) -> object:
        return real_open(fake if name == "/proc/loadavg" else name, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", fake_open)
    assert cores._others_running() == 2
    fake.write_text("")  # unreadable: the 1-minute load average
    monkeypatch.setattr(os, "getloadavg", lambda: (0.25, 0.5, 0.75))
    assert cores._others_running() == 0.25


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
