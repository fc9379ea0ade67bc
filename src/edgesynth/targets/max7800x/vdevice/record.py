"""`Record`: the virtual device's plain data classes, without a dataclass's import cost.

A dataclass compiles its `__init__`, `__repr__` and `__eq__` each time its module is imported
(0.2 to 6 ms a class: most of the device's import time, which every proof pays). A Record
declares its fields the same way (annotations, defaults in the class body) and shares one
`__init__`, `__repr__` and `__eq__`, already compiled:

    class Wrap(Record):
        start: int
        end: int = 0
        notes: list[str] = Factory(list)  # a fresh list each time
        data: np.ndarray = Computed()  # not an argument: `__post_init__` sets it

Fields are passed by position or keyword, as to a dataclass; `__post_init__` runs when defined.
`FrozenRecord` refuses assignments and hashes its fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar


class Factory:
    """A field's default made afresh for each record (a dataclass's `default_factory`)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class Computed:
    """A field that is no argument: `__post_init__` sets it (a dataclass's `init=False`)."""


_NONE = object()  # a field without a default


class Record:
    """Fields from the class's annotations (its bases' first); see the module's text."""

    _fields: ClassVar[tuple[str, ...]] = ()  # every field, in order
    _arguments: ClassVar[tuple[str, ...]] = ()  # the fields `__init__` takes
    _accepted: ClassVar[frozenset[str]] = frozenset()  # the same, as a set
    _defaults: ClassVar[dict[str, Any]] = {}  # the arguments' defaults (or Factory)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [
            name
            # (inspect.get_annotations would import inspect: milliseconds more)
            for name, kind in cls.__dict__.get("__annotations__", {}).items()  # noqa: RUF063
            if not str(kind).startswith("ClassVar")
        ]
        cls._fields = cls._fields + tuple(n for n in own if n not in cls._fields)
        defaults = {n: getattr(cls, n, _NONE) for n in cls._fields}
        cls._arguments = tuple(n for n in cls._fields if not isinstance(defaults[n], Computed))
        cls._accepted = frozenset(cls._arguments)
        cls._defaults = {n: defaults[n] for n in cls._arguments if defaults[n] is not _NONE}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        if not kwargs and len(args) == len(cls._arguments):  # every field, by position
            self.__dict__.update(zip(cls._arguments, args, strict=True))
            if hasattr(cls, "__post_init__"):
                self.__post_init__()
            return
        values = kwargs
        if args:
            if len(args) > len(cls._arguments):
                raise TypeError(
                    f"{cls.__name__} takes {len(cls._arguments)} fields, not {len(args)}"
                )
            values = dict(zip(cls._arguments, args, strict=False))
            if values.keys() & kwargs.keys():
                raise TypeError(
                    f"{cls.__name__}: repeated fields {sorted(values.keys() & kwargs.keys())}"
                )
            values.update(kwargs)
        if not kwargs.keys() <= cls._accepted:
            raise TypeError(
                f"{cls.__name__}: unexpected fields {sorted(kwargs.keys() - cls._accepted)}"
            )
        if len(values) < len(cls._arguments):
            for name, default in cls._defaults.items():
                if name not in values:
                    values[name] = default.make() if isinstance(default, Factory) else default
            if len(values) < len(cls._arguments):
                missing = [n for n in cls._arguments if n not in values]
                raise TypeError(f"{cls.__name__}: missing fields {missing}")
        self.__dict__.update(values)
        if hasattr(cls, "__post_init__"):
            self.__post_init__()

    def _values(self) -> tuple[Any, ...]:
        return tuple(self.__dict__.get(name) for name in self._fields)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={self.__dict__.get(n)!r}" for n in self._fields)
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # (mutable, as an unfrozen dataclass)


class FrozenRecord(Record):
    """A Record whose fields are never reassigned; hashable by its fields."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot assign {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name}")

    def __hash__(self) -> int:
        return hash(self._values())
