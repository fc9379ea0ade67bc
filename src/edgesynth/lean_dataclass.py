"""`dataclass` as the standard library makes it, with methods that are not compiled per class.

Python 3.11 writes each method of a dataclass as source text and compiles it when the class is
defined: `__init__`, `__repr__`, `__eq__`, `__hash__`, and a frozen class's `__setattr__` and
`__delattr__`. For the 60-odd classes `edgesynth izer` loads that was a seventh of a small run's
instructions (28 of 200 ms of CPU), and most of these classes are made a few times a run.
Here the standard library collects the fields (so `fields`, `replace`, `asdict` and
`is_dataclass` work as for any dataclass) and every method is a shared function reading them,
with the same results:

- `__init__(*args, **kwargs)`: the fields that are arguments, by position or keyword, their
  defaults and default factories (a factory also for a field that is no argument), in field
  order, then `__post_init__()` where the class has one; a missing, repeated or unknown
  argument raises TypeError. All arguments given by position take a short path.
- the repr `Name(field=value, ...)` of the fields with `repr=True` ("..." for a repr that
  reaches itself); equality of instances of the same class as the tuples of the fields with
  `compare=True` (NotImplemented for another class); for a frozen class, the hash of the
  fields with `hash=True`, or `hash=None` and `compare=True`; an unfrozen class is unhashable.
- a frozen class refuses assignment and deletion of its fields (FrozenInstanceError), and its
  `__dataclass_params__.frozen` is true, as a subclass's checks expect.

A class that asks for anything else (order, eq=False, unsafe_hash, slots...), defines one of
these methods itself, inherits its own `__setattr__`, or derives from another dataclass is made
by the standard library (with the shared repr, eq and hash where it asks for nothing else).
InitVar, ClassVar and keyword-only fields are refused: use `dataclasses.dataclass` for those.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar, overload

T = TypeVar("T", bound=type)
_OWN = ("__repr__", "__eq__", "__hash__")
_MADE = (*_OWN, "__init__", "__setattr__", "__delattr__", "__slots__")
_MISSING = dataclasses.MISSING


@overload
def dataclass(cls: T, /) -> T: ...


@overload
def dataclass(*, frozen: bool = False, **options: Any) -> Callable[[T], T]: ...


def dataclass(cls: Any = None, /, *, frozen: bool = False, **options: Any) -> Any:
    """`dataclasses.dataclass(cls, frozen=frozen, **options)`, its methods made without
    compiling (see the module's docstring)."""

    def wrap(cls: T) -> T:
        if options or any(name in cls.__dict__ for name in _OWN):
            return dataclasses.dataclass(cls, frozen=frozen, **options)
        if not _all_shared(cls):
            made = dataclasses.dataclass(cls, frozen=frozen, repr=False, eq=False)
            _add_methods(made, frozen)
            return made
        # A class without a docstring gets its signature as one; the standard library would
        # take it with inspect.signature, whose first call compiles tokenize's expressions.
        undocumented = not cls.__doc__
        if undocumented:
            cls.__doc__ = cls.__name__
        made = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
        if undocumented:
            made.__doc__ = f"{cls.__name__}({', '.join(f.name for f in dataclasses.fields(made))})"
        _add_init(made, frozen)
        _add_methods(made, frozen)
        if frozen:
            _freeze(made)
        return made

    return wrap if cls is None else wrap(cls)


def _all_shared(cls: type) -> bool:
    """Whether every method can be a shared one: no own `__init__`, `__setattr__`...; no
    dataclass base (whose frozenness the standard library checks); no inherited `__setattr__`
    (an unfrozen dataclass's `__init__` assigns through it)."""
    if any(name in cls.__dict__ for name in _MADE):
        return False
    if any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return False
    return cls.__setattr__ is object.__setattr__ and cls.__delattr__ is object.__delattr__


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


def _check_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields, refusing what the shared `__init__` does not take (and, as the standard
    library does, an argument without a default after one with a default)."""
    fields = dataclasses.fields(cls)
    pseudo = set(cls.__dataclass_fields__) - {f.name for f in fields}  # type: ignore[attr-defined]
    keyword = [f.name for f in fields if f.kw_only is True]
    if pseudo or keyword:
        raise TypeError(
            f"{cls.__qualname__}: edgesynth.lean_dataclass takes no InitVar, ClassVar or "
            f"keyword-only fields ({', '.join(sorted(pseudo) + keyword)}); "
            "use dataclasses.dataclass"
        )
    seen_default = False
    for f in fields:
        if not f.init:
            continue
        has_default = f.default is not _MISSING or f.default_factory is not _MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has_default
    return fields


def _add_init(cls: type, frozen: bool) -> None:
    fields = _check_fields(cls)
    arguments = tuple(f.name for f in fields if f.init)
    accepted = frozenset(arguments)
    defaults = {f.name: f.default for f in fields if f.default is not _MISSING}
    factories = {f.name: f.default_factory for f in fields if f.default_factory is not _MISSING}
    # The attributes `__init__` sets, in field order: the arguments, and the fields that are
    # no argument but have a factory.
    order = tuple(f.name for f in fields if f.init or f.default_factory is not _MISSING)
    short = order == arguments  # all arguments by position: nothing else to set
    # From `plain` on, every argument has a plain default (no factory): the first k >= plain
    # arguments by position take the rest's defaults, tails[k] (made when first needed).
    plain = len(arguments)
    while plain and arguments[plain - 1] in defaults and arguments[plain - 1] not in factories:
        plain -= 1
    tails: dict[int, dict[str, Any]] = {}

    def tail(k: int) -> dict[str, Any] | None:
        if not short or k < plain or k > len(arguments):
            return None
        if k not in tails:
            tails[k] = {a: defaults[a] for a in arguments[k:]}
        return tails[k]

    post_init = hasattr(cls, "__post_init__")
    name = f"{cls.__qualname__}.__init__()"

    def values(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(arguments):
            raise TypeError(
                f"{name} takes {len(arguments) + 1} positional arguments "
                f"but {len(args) + 1} were given"
            )
        given = dict(zip(arguments, args, strict=False))
        if not kwargs.keys() <= accepted:
            unknown = next(key for key in kwargs if key not in accepted)
            raise TypeError(f"{name} got an unexpected keyword argument {unknown!r}")
        if not given.keys().isdisjoint(kwargs):
            repeated = next(key for key in kwargs if key in given)
            raise TypeError(f"{name} got multiple values for argument {repeated!r}")
        given.update(kwargs)
        for field_name in order:
            if field_name not in given:
                if field_name in factories:
                    given[field_name] = factories[field_name]()
                elif field_name in defaults:
                    given[field_name] = defaults[field_name]
                else:
                    missing = [a for a in arguments if a not in given]
                    raise TypeError(f"{name} missing required arguments: {', '.join(missing)}")
        return {field_name: given[field_name] for field_name in order}  # in field order

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        k = len(args)
        rest = None if kwargs else tails[k] if k in tails else tail(k)
        if rest is not None:
            self.__dict__.update(zip(arguments, args, strict=False))
            self.__dict__.update(rest)
        else:
            self.__dict__.update(values(args, kwargs))
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = __init__  # type: ignore[misc]


def _freeze(cls: type) -> None:
    """Refuse assignment and deletion of the fields, as a frozen dataclass does."""
    names = frozenset(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
    cls.__delattr__ = __delattr__  # type: ignore[method-assign]
    cls.__dataclass_params__.frozen = True  # type: ignore[attr-defined]
