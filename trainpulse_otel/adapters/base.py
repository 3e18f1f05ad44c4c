"""What every framework adapter shares: the result type, key bookkeeping, unit tables.

An adapter turns one framework's own metric vocabulary into the contract's
training payload. It is pure (data in, a :class:`Translation` out: no I/O, no
clock) and it never guesses silently: every key it reads is recorded, every
key it does not understand is listed as ignored, and every unit decision that
a reader could doubt (a percent turned into a fraction, a per-device rate
scaled to the job, a value that could not be derived) is written as a note.

Validation stays in one place, :func:`trainpulse_otel.samples.parse_training`;
:meth:`Translation.sample` runs it and renames a failing field back to the
framework key it came from, so a client sees ``mfu(%)``, not ``mfu``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..samples import (
    DEFAULT_MAX_RANKS,
    TRAINING_RULES,
    SampleError,
    TrainingSample,
    parse_training,
    type_name,
)

#: Longer lines are no framework's log line (the longest real ones are a few KiB); they are skipped.
MAX_LOG_LINE = 64 * 1024
#: Keys whose object value holds the framework's dict; the other top-level keys are context.
ENVELOPE_KEYS: tuple[str, ...] = ("logs", "metrics")


@dataclass(frozen=True, slots=True)
class Translation:
    """An adapter's result: the contract payload plus an account of how it was made."""

    payload: Mapping[str, Any]
    mapped: Mapping[str, str] = field(default_factory=dict)  # contract field -> input key(s)
    ignored: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def sample(self, max_ranks: int = DEFAULT_MAX_RANKS) -> TrainingSample:
        """Validate the payload; errors name the framework's key, not ours."""
        try:
            return parse_training(self.payload, max_ranks=max_ranks)
        except SampleError as exc:
            raise self._blame(exc) from None

    def _blame(self, exc: SampleError) -> SampleError:
        if not exc.field:
            listed = ", ".join(self.ignored) or "none"
            return SampleError("", f"{exc.message}; nothing measurable was recognised (ignored keys: {listed})")
        top = exc.field.split("[", 1)[0].split(".", 1)[0]
        source = self.mapped.get(top)
        if source is None or source == top:
            return exc
        return SampleError(source, f"as TrainPulse field {exc.field}, {exc.message}")


@dataclass(frozen=True, slots=True)
class Adapter:
    """A named framework adapter: a dict translator and, optionally, a log-text one.

    Third-party plugins register an ``Adapter`` (or any object with ``translate``)
    under the ``trainpulse.adapters`` entry-point group.
    """

    name: str
    translate: Callable[[Mapping[str, Any]], Translation]
    translate_text: Callable[[str, Mapping[str, Any]], Translation] | None = None
    description: str = ""

    def normalize(self, payload: Mapping[str, Any]) -> TrainingSample:
        """Translate and validate a dict payload in one call."""
        return self.translate(payload).sample()

    def parse_text(self, text: str, context: Mapping[str, Any] | None = None) -> TrainingSample:
        """Translate and validate log text in one call (text adapters only)."""
        if self.translate_text is None:
            raise TypeError(f"adapter {self.name!r} does not read log text")
        return self.translate_text(text, context or {}).sample()


@dataclass(frozen=True, slots=True)
class Rule:
    """Input ``key`` feeds contract ``field``; ``scale`` converts units (None: pass as is)."""

    key: str
    field: str
    scale: float | None = None


#: Every adapter also understands the contract's own names and the original tool's keys.
COMMON_RULES: tuple[Rule, ...] = (
    *(Rule(name, name) for name in (*TRAINING_RULES, "ranks")),
    Rule("model", "model_name"),
    Rule("step", "global_step"),
    Rule("iteration", "global_step"),
    Rule("train_tokens_per_second", "tokens_per_sec"),
    Rule("model_flops_utilization", "mfu"),
    Rule("gradient_allreduce_ms", "all_reduce_wait_ms"),
)


class Fields:
    """Working state of one translation: input read so far, output set so far."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.out: dict[str, Any] = {}
        self.mapped: dict[str, str] = {}
        self.used: set[str] = set()
        self.notes: list[str] = []

    @classmethod
    def from_payload(cls, payload: Any) -> Fields:
        """Accept a flat dict or an envelope ``{"logs"|"metrics": {...}, <context>}``."""
        if not isinstance(payload, Mapping):
            raise SampleError("", f"body must be a JSON object, got {type_name(payload)}")
        return cls(unwrap(payload))

    @classmethod
    def from_log(cls, record: Mapping[str, Any] | None, context: Mapping[str, Any], missing: str) -> Fields:
        """The newest record parsed from log text, over the request's context; ``missing`` if none."""
        if record is None:
            raise SampleError("", missing)
        return cls({**context, **record})

    # ------------------------------------------------------------------ input

    def has(self, key: str) -> bool:
        """True when ``key`` is present, not null and not yet consumed."""
        return key not in self.used and self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        """The value of ``key``, marking it read."""
        self.used.add(key)
        return self.data.get(key)

    def number(self, key: str) -> float | None:
        """The finite number under ``key`` (marking it read), None when absent."""
        value = self.raw(key)
        if value is None:
            return None
        return as_number(key, value)

    def keys_matching(self, accept: Callable[[str], bool]) -> list[str]:
        """Unread keys that ``accept`` approves, in input order."""
        return [k for k in self.data if k not in self.used and accept(k) and self.data[k] is not None]

    # ----------------------------------------------------------------- output

    def wants(self, field_name: str) -> bool:
        return field_name not in self.out

    def set(self, field_name: str, value: Any, source: str) -> None:
        """Set ``field_name`` unless a higher-priority key already did."""
        if value is not None and self.wants(field_name):
            self.out[field_name] = value
            self.mapped[field_name] = source

    def note(self, text: str) -> None:
        self.notes.append(text)

    def apply(self, rules: Iterable[Rule]) -> None:
        """Apply a rule table in priority order: the first present key wins a field (a table's rules for the keys
        present only, where the table is a tuple: :func:`_present`)."""
        data, used, out = self.data, self.used, self.out
        for rule in _present(rules, data) if isinstance(rules, tuple) else rules:
            if data.get(rule.key) is None or rule.key in used or rule.field in out:  # (``has`` and ``wants``, inline)
                continue
            if rule.scale is None:
                self.set(rule.field, self.raw(rule.key), rule.key)
            else:
                self.set(rule.field, converted(self.number(rule.key) * rule.scale), rule.key)  # type: ignore[operator]

    def finish(self, framework: str | None) -> Translation:
        """Apply the common names, stamp the framework, and account for every key."""
        self.apply(COMMON_RULES)
        if framework is not None:
            self.out.setdefault("framework", framework)
        ignored = tuple(k for k in self.data if k not in self.used)
        return Translation(dict(self.out), dict(self.mapped), ignored, tuple(self.notes))


#: Each rule table (a tuple, by its id) with its rules by key and their order: a payload holds a dozen of a table's
#: sixty keys.
_TABLES: dict[int, tuple[tuple[Rule, ...], dict[str, tuple[tuple[int, Rule], ...]]]] = {}
MAX_TABLES = 64


def _present(rules: tuple[Rule, ...], data: Mapping[str, Any]) -> list[Rule]:
    """The rules of ``rules`` whose key ``data`` holds, in the table's order."""
    table = _TABLES.get(id(rules))
    if table is None or table[0] is not rules:
        if len(_TABLES) >= MAX_TABLES:  # (tables are module constants: a caller building one per call is not held)
            _TABLES.clear()
        by_key: dict[str, list[tuple[int, Rule]]] = {}
        for order, rule in enumerate(rules):
            by_key.setdefault(rule.key, []).append((order, rule))
        table = _TABLES[id(rules)] = (rules, {key: tuple(each) for key, each in by_key.items()})
    index = table[1]
    found = [each for key in data if key in index for each in index[key]]
    found.sort(key=lambda each: each[0])
    return [rule for _, rule in found]


def unwrap(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Merge an envelope's inner dict over its context keys; a flat dict is kept as is."""
    for key in ENVELOPE_KEYS:
        inner = payload.get(key)
        if isinstance(inner, Mapping):
            context = {k: v for k, v in payload.items() if k != key}
            return {**context, **inner}
    return dict(payload)


def as_number(key: str, value: Any) -> float:
    """``value`` as a finite float, or a SampleError naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SampleError(key, f"must be a number, got {type_name(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise SampleError(key, f"must be finite, got {value!r}")
    return number


def whole(value: float) -> int | None:
    """``value`` as an int when it is one (a step computed by division may not be)."""
    return int(value) if float(value).is_integer() else None


def first_present(fields: Fields, keys: Iterable[str]) -> str | None:
    """The first of ``keys`` present and unread."""
    return next((k for k in keys if fields.has(k)), None)


def converted(value: float) -> float:
    """A number a unit conversion made, to 12 significant digits: ``39.89 × 0.01`` is 0.3989, not
    0.39890000000000003 (the input's own digits are never that many)."""
    return float(f"{value:.12g}") if math.isfinite(value) else value


def scaled_by_world(fields: Fields, key: str, field_name: str, what: str) -> None:
    """Scale a per-device rate under ``key`` to the whole job, when the world size is known.

    Without a world size the job rate is not derivable, so it is left out and
    the note says so (a per-device number in a whole-job field would mislead).
    """
    per_device = fields.number(key)
    if per_device is None or not fields.wants(field_name):
        return
    world = world_size(fields)
    if world is None:
        fields.note(f"{key} is {what} per device; {field_name} needs world_size, which this payload does not give")
        return
    fields.set(field_name, converted(per_device * world), key)
    fields.note(f"{field_name} = {key} x world_size {world:g}")


def world_size(fields: Fields) -> float | None:
    """The job's world size: set by an earlier rule, or given as ``world_size``."""
    if "world_size" in fields.out:
        return as_number(fields.mapped["world_size"], fields.out["world_size"])
    if fields.has("world_size"):
        value = fields.number("world_size")
        fields.set("world_size", value, "world_size")
        return value
    return None


def set_from_first(fields: Fields, accept: Callable[[str], bool], field_name: str) -> None:
    """Set ``field_name`` from the first unread key that ``accept`` approves (e.g. ``lr/AdamW``)."""
    keys = fields.keys_matching(accept)
    if keys and fields.wants(field_name):
        fields.set(field_name, fields.raw(keys[0]), keys[0])  # validated later, naming keys[0] (a NaN loss is data)


def note_not_training(fields: Fields, prefixes: tuple[str, ...]) -> None:
    """Say why evaluation keys (``eval_``, ``validate/``, ...) were left out."""
    if fields.keys_matching(lambda k: k.startswith(prefixes)):
        fields.note(f"{'/'.join(p + '*' for p in prefixes)} keys describe evaluation, not a training step; ignored")


def numeric_out(fields: Fields, field_name: str) -> float | None:
    """An output field's value when it is a real number (inputs are validated later)."""
    value = fields.out.get(field_name)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def log_lines(text: str) -> Iterator[str]:
    """The lines of a log, leaving out any too long to be a framework's (bounds the parsers' work)."""
    return (line for line in text.splitlines() if len(line) <= MAX_LOG_LINE)
