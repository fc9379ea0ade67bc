"""vdevice.record: the device's plain data classes behave as the dataclasses they replace."""

from __future__ import annotations

import pytest

from edgesynth.targets.max7800x.vdevice.record import Computed, Factory, FrozenRecord, Record


class Sample(Record):
    x: int
    y: int = 2
    notes: list[int] = Factory(list)
    total: int = Computed()

    def __post_init__(self) -> None:
        self.total = self.x + self.y


class Key(FrozenRecord):
    a: int
    b: str = "q"


def test_fields_by_position_keyword_and_default() -> None:
    assert (Sample(1).y, Sample(1, 3).y, Sample(x=1, y=5).y) == (2, 3, 5)
    assert Sample(1, 3).total == 4  # __post_init__ ran
    assert repr(Sample(1)) == "Sample(x=1, y=2, notes=[], total=3)"


def test_factory_makes_a_fresh_default_each_time() -> None:
    assert Sample(1).notes is not Sample(1).notes


@pytest.mark.parametrize(
    ("args", "kwargs", "words"),
    [
        ((), {}, "missing fields ['x']"),
        ((1,), {"x": 2}, "repeated fields ['x']"),
        ((1, 2, [], 4), {}, "takes 3 fields, not 4"),
        ((1,), {"q": 3}, "unexpected fields ['q']"),
        ((1,), {"total": 3}, "unexpected fields ['total']"),  # computed: no argument
    ],
)
def test_bad_fields_are_refused(args: tuple, kwargs: dict, words: str) -> None:
    with pytest.raises(TypeError, match=words.replace("[", r"\[").replace("]", r"\]")):
        Sample(*args, **kwargs)


def test_equality_and_hash() -> None:
    assert Sample(1) == Sample(1) and Sample(1) != Sample(2)
    assert Key(1) == Key(1) and hash(Key(1)) == hash(Key(1)) and Key(1) != Key(2)
    with pytest.raises(TypeError):
        hash(Sample(1))  # mutable, as an unfrozen dataclass


def test_frozen_refuses_assignment() -> None:
    key = Key(1)
    with pytest.raises(AttributeError, match="frozen"):
        key.a = 3  # type: ignore[misc]
