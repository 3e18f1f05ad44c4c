"""Samples made through their slots: validation's fast path, one-field copies, a frame assembler's samples.

:class:`SampleBuilder` checks a plain dict against a table made once per
sample class and writes each value straight into the new object's slot (the
slot's descriptor, which a frozen class leaves working), skipping the dict of
accepted values and the frozen ``__init__`` of the checked path
(``_checked_fields`` in :mod:`.validation`). The first value not exactly of
its rule's type inside its bounds (an int where a float goes, a NaN, a bool, a
long string) answers ``None``, and the caller takes the checked path, which
converts it or words the error: both paths accept the same input into equal
samples (``tests/test_sample_builder.py`` holds them equal).

:func:`field_replacer` and :func:`field_maker` copy and make samples through
the same slots. Every class made here is slotted and frozen, without a
``__post_init__`` (which would never run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, Generic, TypeVar

from .rules import MAX_STRING_LENGTH, Rule

Sample = TypeVar("Sample")
#: A slot's setter: ``put(sample, value)`` (the slot's member descriptor, which a frozen class leaves working).
Put = Callable[[Any, Any], None]


class SampleBuilder(Generic[Sample]):
    """Builds one slotted, frozen sample class (no ``__post_init__``) from a dict, checking it on the way."""

    __slots__ = ("_cls", "_numbers", "_puts", "_rest", "_strings")

    def __init__(self, cls: type[Sample], rules: Mapping[str, Rule]) -> None:
        fields = _built_fields(cls)
        self._cls = cls
        self._puts: dict[str, Put] = {f.name: _put(cls, f.name) for f in fields}
        checked = [(f.name, rules[f.name], self._puts[f.name]) for f in fields if f.name in rules]
        self._numbers = tuple(
            (name, rule.exact_type, rule.floor, rule.ceiling, put) for name, rule, put in checked if rule.kind != "str"
        )
        self._strings = tuple((name, put) for name, rule, put in checked if rule.kind == "str")
        #: Fields the rules do not check (the caller parses them): their defaults, until the caller puts them.
        self._rest = tuple((self._puts[f.name], _default(f)) for f in fields if f.name not in rules)

    def build(self, data: dict[str, Any]) -> Sample | None:
        """The sample of ``data``'s checked fields, or None when one of them needs the checked path."""
        sample = object.__new__(self._cls)
        get = data.get
        for name, exact, floor, ceiling, put in self._numbers:
            value = get(name)
            if value is not None and not (type(value) is exact and floor <= value <= ceiling):
                return None
            put(sample, value)
        for name, put in self._strings:
            value = get(name)
            if value is not None and not (type(value) is str and len(value) <= MAX_STRING_LENGTH):
                return None
            put(sample, value)
        for put, default in self._rest:
            put(sample, default)
        return sample

    def put(self, sample: Sample, name: str, value: Any) -> None:
        """Set a field the rules do not check on a sample :meth:`build` just made (before anyone else sees it)."""
        self._puts[name](sample, value)


def _built_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of a class built without its ``__init__``: refused when it has a ``__post_init__``, which would
    then never run."""
    if "__post_init__" in vars(cls):
        raise TypeError(f"{cls.__name__} has a __post_init__: build it through its __init__")
    return dataclasses.fields(cls)  # type: ignore[arg-type]


def _put(cls: type, name: str) -> Put:
    """The setter of ``cls``'s slot ``name``."""
    return vars(cls)[name].__set__


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is dataclasses.MISSING:
        raise TypeError(f"{field.name}: a field outside the rules needs a default")
    return field.default


def field_replacer(cls: type[Sample], *names: str) -> Callable[..., Sample]:
    """``replace(sample, *values)``: a copy of a slotted, frozen ``cls`` sample with the ``names`` fields set.

    The other fields are read in one ``attrgetter`` call and every field is written through its slot, without
    the frozen ``__init__``'s ``object.__setattr__`` per field or :func:`dataclasses.replace`'s keyword
    arguments.
    """
    fields = _built_fields(cls)
    unknown = set(names) - {f.name for f in fields}
    if unknown or not names or len(set(names)) != len(names):
        raise TypeError(f"{cls.__name__}: fields to replace must be distinct fields, got {names!r}")
    others = [f.name for f in fields if f.name not in names]
    puts = tuple(_put(cls, name) for name in (*others, *names))
    read = _reader(others)
    new = object.__new__

    def replace(sample: Sample, *values: Any) -> Sample:
        copy = new(cls)
        for put, value in zip(puts, (*read(sample), *values), strict=True):
            put(copy, value)
        return copy

    return replace


def _reader(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A reader of the ``names`` fields of a sample, as a tuple (of one, or none)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        get = attrgetter(names[0])
        return lambda sample: (get(sample),)
    return lambda sample: ()


def field_maker(cls: type[Sample], given: tuple[str, ...] = ()) -> Callable[..., Sample]:
    """``make(fields, *given)``: ``cls(**fields, **given)`` for a slotted, frozen ``cls``, each field written
    through its slot (as :func:`field_replacer`).

    For fields of one's own gathering, already checked — the frame assembler's: a key of ``fields`` that is no
    field of ``cls`` is not an error here, it is never read; a field neither given nor in ``fields`` takes its
    default.
    """
    fields = _built_fields(cls)
    names = {f.name for f in fields}
    if not set(given) <= names:
        raise TypeError(f"{cls.__name__} has no field {min(set(given) - names)!r}")
    for f in fields:
        if f.name not in given and f.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} has no default: it must be given")
    gathered = tuple((_put(cls, f.name), f.name, f.default) for f in fields if f.name not in given)
    given_puts = tuple(_put(cls, name) for name in given)
    new = object.__new__

    def make(values: Mapping[str, Any], *given_values: Any) -> Sample:
        sample = new(cls)
        get = values.get
        for put, name, default in gathered:
            put(sample, get(name, default))
        for put, value in zip(given_puts, given_values, strict=True):
            put(sample, value)
        return sample

    return make
