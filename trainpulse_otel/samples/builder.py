"""Validation's fast path: a well-formed JSON object into a sample in one pass over its class's fields.

Replay and ingest validate ~90 fields a tick, nearly all of them already of
the right type and inside their bounds. The checked path
(``_checked_fields`` in :mod:`.validation`) builds a dict of accepted values and
then calls the frozen dataclass's ``__init__`` with it — the dict, the
keyword call and the ``__init__``'s per-field ``object.__setattr__`` cost
about as much as the checks. :class:`SampleBuilder` checks each field against
a table made once per class and writes it straight into the new object's
slot; the first value that is not exactly of its rule's type inside its
bounds (an int where a float goes, a NaN, a bool, a long string) answers
``None`` and the caller takes the checked path, which converts it or words
the error. So both paths accept the same input into equal samples
(``tests/test_sample_builder.py`` holds them equal), and only the fast one is cheap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from .rules import MAX_STRING_LENGTH, Rule

Sample = TypeVar("Sample")
#: A slot's setter: ``put(sample, value)`` (the slot's member descriptor, which a frozen class leaves working).
Put = Callable[[Any, Any], None]


class SampleBuilder(Generic[Sample]):
    """Builds one slotted, frozen sample class (no ``__post_init__``) from a dict, checking it on the way."""

    __slots__ = ("_cls", "_numbers", "_puts", "_rest", "_strings")

    def __init__(self, cls: type[Sample], rules: Mapping[str, Rule]) -> None:
        if "__post_init__" in vars(cls):  # build() never calls __init__, so it would never run
            raise TypeError(f"{cls.__name__} has a __post_init__: build it through its __init__")
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        self._cls = cls
        self._puts: dict[str, Put] = {f.name: vars(cls)[f.name].__set__ for f in fields}
        self._numbers = tuple(
            (f.name, rules[f.name].exact_type, rules[f.name].floor, rules[f.name].ceiling, self._puts[f.name])
            for f in fields
            if f.name in rules and rules[f.name].kind != "str"
        )
        self._strings = tuple(
            (f.name, MAX_STRING_LENGTH, self._puts[f.name])
            for f in fields
            if f.name in rules and rules[f.name].kind == "str"
        )
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
        for name, longest, put in self._strings:
            value = get(name)
            if value is not None and not (type(value) is str and len(value) <= longest):
                return None
            put(sample, value)
        for put, default in self._rest:
            put(sample, default)
        return sample

    def put(self, sample: Sample, name: str, value: Any) -> None:
        """Set a field the rules do not check on a sample :meth:`build` just made (before anyone else sees it)."""
        self._puts[name](sample, value)


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is dataclasses.MISSING:
        raise TypeError(f"{field.name}: a field outside the rules needs a default")
    return field.default
