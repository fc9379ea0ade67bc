"""`dataclass` as the standard library makes it, with `__repr__`, `__eq__` and `__hash__` that
are not compiled per class.

Python 3.11 writes each method of a dataclass as source text and compiles it when the class is
defined. For the 60-odd classes `edgesynth izer` loads that is 260 compilations of 220 kB of
source, a fifth of the instructions of a small run, and most classes never have their `repr`
taken or two instances compared. Here the standard library makes `__init__` (and a frozen
class's `__setattr__` and `__delattr__`); `__repr__`, `__eq__` and `__hash__` are shared
functions that read the class's fields, with the same results: the repr
`Name(field=value, ...)` of the fields with `repr=True` ("..." for a repr that reaches itself),
equality of instances of the same class as the tuples of the fields with `compare=True`
(NotImplemented for another class), and, for a frozen class, the hash of the fields with
`hash=True`, or `hash=None` and `compare=True`; an unfrozen class is unhashable. A class that
asks for anything else (order, eq=False, unsafe_hash, slots...) or defines one of these methods
itself is made by the standard library unchanged.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

T = TypeVar("T", bound=type)
_OWN = ("__repr__", "__eq__", "__hash__")


@overload
def dataclass(cls: T, /) -> T: ...


@overload
def dataclass(*, frozen: bool = False, **options: Any) -> Callable[[T], T]: ...


def dataclass(cls: Any = None, /, *, frozen: bool = False, **options: Any) -> Any:
    """`dataclasses.dataclass(cls, frozen=frozen, **options)`, its repr, eq and hash made
    without compiling (see the module's docstring)."""

    def wrap(cls: T) -> T:
        if options or any(name in cls.__dict__ for name in _OWN):
            return dataclasses.dataclass(cls, frozen=frozen, **options)
        made = dataclasses.dataclass(cls, frozen=frozen, repr=False, eq=False)
        _add_methods(made, frozen)
        return made

    return wrap if cls is None else wrap(cls)


def _add_methods(cls: type, frozen: bool) -> None:
    fields = dataclasses.fields(cls)
    shown = tuple(f.name for f in fields if f.repr)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({values})"

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        mine = tuple(getattr(self, name) for name in compared)
        return mine == tuple(getattr(other, name) for name in compared)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, name) for name in hashed))

    for method in (__repr__, __eq__, __hash__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    cls.__repr__ = __repr__  # type: ignore[method-assign]
    cls.__eq__ = __eq__  # type: ignore[method-assign]
    cls.__hash__ = __hash__ if frozen else None  # type: ignore[method-assign,assignment]
