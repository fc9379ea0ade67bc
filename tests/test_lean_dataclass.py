"""`edgesynth.lean_dataclass.dataclass` makes classes that behave as the standard library's:
the same repr, equality, hashing, frozenness, fields and replace, side by side."""

from __future__ import annotations

import dataclasses
from dataclasses import field

import numpy as np
import pytest

from edgesynth.lean_dataclass import dataclass


def _pair(frozen: bool) -> tuple[type, type]:
    """The same class made by each decorator."""

    def body() -> dict:
        return {
            "__annotations__": {"a": "int", "b": "list[int]", "c": "str", "d": "int"},
            "b": field(default_factory=list),
            "c": field(default="x", repr=False),
            "d": field(default=0, compare=False),
        }

    ours = dataclass(frozen=frozen)(type("Point", (), body()))
    theirs = dataclasses.dataclass(frozen=frozen)(type("Point", (), body()))
    return ours, theirs


@pytest.mark.parametrize("frozen", [False, True])
def test_repr_eq_and_hash_are_the_standard_librarys(frozen: bool) -> None:
    ours, theirs = _pair(frozen)
    for make in (ours, theirs):
        assert dataclasses.is_dataclass(make)
    cases = [((1,), (1,)), ((1, [2]), (1, [2])), ((1,), (2,)), ((1, [], "y", 5), (1, [], "z", 6))]
    for left, right in cases:
        mine = ours(*left), ours(*right)
        std = theirs(*left), theirs(*right)
        assert repr(mine[0]) == repr(std[0])
        assert (mine[0] == mine[1]) == (std[0] == std[1])
        assert (mine[0] != mine[1]) == (std[0] != std[1])
        assert mine[0].__eq__(std[0]) is NotImplemented  # another class
    if frozen:
        assert hash(ours(1, (), "q", 7)) == hash(theirs(1, (), "q", 8))  # d: not compared
        with pytest.raises(dataclasses.FrozenInstanceError):
            ours(1).a = 2  # type: ignore[misc]
    else:
        assert ours.__hash__ is None and theirs.__hash__ is None
        p = ours(1)
        p.a = 3
        assert p == ours(3)


def test_fields_replace_and_asdict_work() -> None:
    ours, _ = _pair(frozen=True)
    p = ours(1, [2], "q", 4)
    assert [f.name for f in dataclasses.fields(p)] == ["a", "b", "c", "d"]
    assert dataclasses.replace(p, a=5) == ours(5, [2], "q", 4)
    assert dataclasses.asdict(p) == {"a": 1, "b": [2], "c": "q", "d": 4}


def test_a_repr_that_reaches_itself_shows_dots() -> None:
    @dataclass
    class Node:
        child: object = None

    @dataclasses.dataclass
    class Std:
        child: object = None

    mine, std = Node(), Std()
    mine.child, std.child = mine, std
    assert repr(mine) == "test_a_repr_that_reaches_itself_shows_dots.<locals>.Node(child=...)"
    assert repr(std) == "test_a_repr_that_reaches_itself_shows_dots.<locals>.Std(child=...)"


def test_arrays_compare_as_the_standard_library_compares_them() -> None:
    @dataclass
    class A:
        x: np.ndarray

    same = np.zeros(2)
    assert A(same) == A(same)  # the same object: equal without comparing the arrays
    with pytest.raises(ValueError):
        A(np.zeros(2)) == A(np.zeros(2))  # noqa: B015 - the comparison is the test


def test_other_options_and_own_methods_are_left_to_the_standard_library() -> None:
    @dataclass(order=True)
    class Ordered:
        a: int

    @dataclass
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

    assert Ordered(1) < Ordered(2)
    assert repr(Own(1)) == "own"
    assert Own(1) == Own(1)


def _made_pair(frozen: bool) -> tuple[type, type]:
    """A class with every kind of field `__init__` handles, made by each decorator."""

    def body() -> dict:
        def __post_init__(self: object) -> None:
            object.__setattr__(self, "seen", True)

        return {
            "__annotations__": {"a": "int", "b": "list[int]", "c": "list[int]", "d": "int"},
            "b": field(default_factory=list),
            "c": field(default_factory=lambda: [7], init=False),
            "d": 4,
            "__post_init__": __post_init__,
        }

    ours = dataclass(frozen=frozen)(type("Made", (), body()))
    theirs = dataclasses.dataclass(frozen=frozen)(type("Made", (), body()))
    return ours, theirs


@pytest.mark.parametrize("frozen", [False, True])
def test_init_is_the_standard_librarys(frozen: bool) -> None:
    ours, theirs = _made_pair(frozen)
    calls = [((1,), {}), ((1, [2], 3), {}), ((), {"a": 1, "d": 9}), ((1,), {"b": [5]})]
    for args, kwargs in calls:
        mine, std = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert vars(mine) == vars(std) and list(vars(mine)) == list(vars(std))
    assert ours(1).b is not ours(1).b  # a fresh default each time
    bad = [((), {}), ((1, [], 3, 4), {}), ((1,), {"a": 2}), ((1,), {"c": 2}), ((1,), {"e": 0})]
    for args, kwargs in bad:
        with pytest.raises(TypeError):
            theirs(*args, **kwargs)
        with pytest.raises(TypeError):
            ours(*args, **kwargs)


def test_a_frozen_class_refuses_assignment_and_deletion_and_can_be_derived() -> None:
    @dataclass(frozen=True)
    class Base:
        a: int

    p = Base(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.a = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.a  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.other = 2  # type: ignore[attr-defined]

    @dataclasses.dataclass(frozen=True)
    class Derived(Base):
        b: int = 0

    assert Derived(1, 2) == Derived(1, 2) and Derived(1).b == 0
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclasses.dataclass
        class Unfrozen(Base):
            pass


def test_fields_the_shared_init_cannot_take_are_refused() -> None:
    with pytest.raises(TypeError, match="InitVar"):

        @dataclass
        class WithInitVar:
            a: dataclasses.InitVar[int]

    with pytest.raises(TypeError, match="follows default argument"):

        @dataclass
        class Misordered:
            a: int = 0
            b: int  # type: ignore[misc]


def test_a_class_without_a_docstring_gets_its_fields_as_one(monkeypatch) -> None:
    """(Without inspect.signature, whose first call compiles tokenize's expressions.)"""
    import inspect

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("inspect.signature called")

    monkeypatch.setattr(inspect, "signature", refuse)

    @dataclass(frozen=True)
    class Pair:
        a: int
        b: int = 0

    assert Pair.__doc__ == "Pair(a, b)"
    assert Pair(1) == Pair(1, 0)
