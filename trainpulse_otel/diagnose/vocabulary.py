"""The registry of signals, causes and knobs: checked once, every table the core needs derived from it.

:class:`Vocabulary` takes the detectors and root-cause rules a pipeline is made
of (classes or instances), checks their declarations the way pluggy checks
hook implementations — a missing or clashing name, a cause that explains an
unknown signal, a knob without a unit or a reason is a :class:`SpecError`
naming the part — and derives the health impacts, the step-budget components,
the forecasts, the tie order of causes, the components booked to one cause and
the listing of every knob. :meth:`Vocabulary.resolve` checks threshold
overrides (config ``detectors``) against the knobs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .spec import CAUSE_LAYERS, COMPONENTS, ROLES, SIGNAL_LAYERS, CauseSpec, FactSpec, SignalSpec
from .thresholds import BASES, Knob, ThresholdError, Thresholds
from .types import Policy

_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: Config key the overrides live under.
OVERRIDES_KEY = "detectors"


class SpecError(Exception):
    """A detector or rule whose declarations do not fit the vocabulary; the message names the part."""


@dataclass(frozen=True, slots=True)
class KnobEntry:
    """One knob in the listing: its full name ``SIGNAL.KNOB``, the declaration, and the detectors that read it
    (two detectors of one signal may share a knob: the GPU's and the host's memory forecast)."""

    key: str
    signal: str
    knob: Knob
    detectors: tuple[str, ...]


def describe_part(part: Any) -> str:
    """How an error names a part when its caller gives no better words (discovery names the entry point)."""
    name = getattr(part, "name", None) or getattr(part, "__name__", None) or type(part).__name__
    return f"{name!r}"


class Vocabulary:
    """Every signal, cause and knob of one set of detectors and rules, checked; the core's tables derived."""

    def __init__(
        self,
        detectors: Iterable[Any],
        rules: Iterable[Any],
        describe: Callable[[Any], str] = describe_part,
        off: frozenset[str] = frozenset(),
    ) -> None:
        self.signals: dict[str, SignalSpec] = {}
        self.causes: dict[str, CauseSpec] = {}
        #: Every detector's declared facts, and the detector each comes from.
        self.facts: dict[str, FactSpec] = {}
        self.fact_owner: dict[str, str] = {}
        #: The signal that holds each role (:data:`~.spec.ROLES`).
        self.roles: dict[str, str] = {}
        self.knobs: tuple[KnobEntry, ...] = ()
        self._describe = describe
        #: Signals turned off (their detectors disabled): a cause may still name them among what it explains.
        self.off = off
        self._declared_by: dict[str, str] = {}
        self._namespaces: dict[str, str] = {}  # detector name -> the signal its knobs are named under
        self._tables: dict[str, tuple[Knob, ...]] = {}  # detector name -> its knobs
        self._reads: dict[str, tuple[Knob, ...]] = {}  # detector name -> the other signals' knobs it reads
        for detector in detectors:
            self._add_detector(detector)
        for detector in detectors:
            self._add_reads(detector)
        for rule in rules:
            self._add_rule(rule)
        self.impacts: dict[str, float] = {n: s.impact for n, s in self.signals.items()}
        self.component_of: dict[str, str] = {n: s.component for n, s in self.signals.items() if s.component}
        self.predictive = frozenset(n for n, s in self.signals.items() if s.predictive)
        self.explainer_claims = frozenset(n for n, s in self.signals.items() if s.explainer_claims)
        order = sorted(enumerate(self.causes.values()), key=lambda ic: (CAUSE_LAYERS.index(ic[1].layer), ic[0]))
        self.tie_rank: dict[str, int] = {c.name: rank for rank, (_, c) in enumerate(order)}
        self.booked: dict[str, str] = {c.books: c.name for c in self.causes.values() if c.books}
        self.waits = frozenset(c.name for c in self.causes.values() if c.wait)

    @property
    def signal_names(self) -> tuple[str, ...]:
        return tuple(self.signals)

    @property
    def cause_names(self) -> tuple[str, ...]:
        return tuple(self.causes)

    # ----------------------------------------------------------------- checks

    def _add_detector(self, detector: Any) -> None:
        who = f"detector {self._describe(detector)}"
        name = getattr(detector, "name", None)
        if not isinstance(name, str) or not name:
            raise SpecError(f"{who}: declares no name")
        if name in self._namespaces:
            raise SpecError(f"{who}: the name {name!r} is taken by detector {self._declared_by['detector:' + name]}")
        if not callable(getattr(detector, "update", None)):
            raise SpecError(f"{who}: has no update(tick)")
        signals = getattr(detector, "signals", None)
        if not isinstance(signals, (tuple, list)) or not signals:
            raise SpecError(f"{who}: declares no signals (a tuple of trainpulse_otel.diagnose.SignalSpec)")
        for spec in signals:
            self._add_signal(who, spec)
        self._declared_by["detector:" + name] = self._describe(detector)
        self._namespaces[name] = signals[0].name
        knobs = getattr(detector, "knobs", ())
        self._add_knobs(who, name, signals[0].name, knobs)
        self._tables[name] = tuple(knobs)
        self._add_facts(who, name, getattr(detector, "provides", ()))
        unknown = sorted({k.at_least for k in knobs if k.at_least} - {k.name for k in knobs})
        if unknown:
            raise SpecError(f"{who}: a knob must be at least {', '.join(unknown)}, which it does not declare")
        broken = _order_broken(signals[0].name, knobs, {})
        if broken:
            raise SpecError(f"{who}: knob {broken.key} {broken.message} (as declared)")

    def _add_facts(self, who: str, detector: str, provides: Any) -> None:
        if not isinstance(provides, (tuple, list)):
            raise SpecError(f"{who}: its provides are not a tuple of trainpulse_otel.diagnose.FactSpec")
        for spec in provides:
            if not isinstance(spec, FactSpec):
                raise SpecError(f"{who}: provides {spec!r}, which is not a trainpulse_otel.diagnose.FactSpec")
            owner = self.fact_owner.get(spec.name)
            if owner is not None:
                raise SpecError(
                    f"{who}: fact {spec.name!r} is already declared by detector {self._declared_by['detector:' + owner]}"
                )
            if not spec.name or not spec.meaning:
                raise SpecError(f"{who}: fact {spec.name!r} needs a name and a meaning")
            self.facts[spec.name] = spec
            self.fact_owner[spec.name] = detector

    def _add_reads(self, detector: Any) -> None:
        """A detector's bounds derived from another signal's knobs (``reads``: ``(signal, Knob)`` pairs): each must
        be declared, identically, by its owner; the reader is listed beside the owner and gets the same value."""
        who, name = f"detector {self._describe(detector)}", detector.name
        reads = getattr(detector, "reads", ())
        entries = {e.key: e for e in self.knobs}
        own = {k.name for k in self._tables[name]}
        for signal, knob in reads:
            key = f"{signal}.{knob.name}"
            entry = entries.get(key)
            if entry is None and signal in self.off:  # its owner is turned off: the reader keeps the bound
                entry = KnobEntry(key, signal, knob, ())
            if entry is None:
                raise SpecError(f"{who}: reads knob {key!r}, which no detector declares")
            if entry.knob != knob:
                raise SpecError(f"{who}: reads knob {key!r} other than {entry.detectors[0]!r} declares it")
            if knob.name in own:
                raise SpecError(f"{who}: reads knob {key!r}, and declares a knob of that name itself")
            entries[key] = KnobEntry(key, entry.signal, knob, (*entry.detectors, name))
        self.knobs = tuple(entries.values())
        self._reads[name] = tuple(knob for _, knob in reads)

    def _add_signal(self, who: str, spec: Any) -> None:
        if not isinstance(spec, SignalSpec):
            raise SpecError(f"{who}: declares signal {spec!r}, which is not a trainpulse_otel.diagnose.SignalSpec")
        known = self.signals.get(spec.name)
        if known is not None:
            if known != spec:
                raise SpecError(
                    f"{who}: signal {spec.name!r} is already declared, differently, by {self._declared_by[spec.name]}"
                )
            return  # one signal raised by two detectors (a GPU's and a host's memory pressure): one declaration
        problem = _signal_problem(spec)
        if problem:
            raise SpecError(f"{who}: signal {spec.name!r} {problem}")
        if spec.role is not None and spec.role in self.roles:
            raise SpecError(
                f"{who}: signal {spec.name!r} takes role {spec.role!r}, which {self.roles[spec.role]!r} holds"
            )
        self.signals[spec.name] = spec
        self._declared_by[spec.name] = who
        if spec.role is not None:
            self.roles[spec.role] = spec.name

    def _add_knobs(self, who: str, detector: str, signal: str, knobs: Any) -> None:
        if not isinstance(knobs, (tuple, list)):
            raise SpecError(f"{who}: its knobs are not a tuple of trainpulse_otel.diagnose.Knob")
        entries = {e.key: e for e in self.knobs}
        for knob in knobs:
            if not isinstance(knob, Knob):
                raise SpecError(f"{who}: declares knob {knob!r}, which is not a trainpulse_otel.diagnose.Knob")
            key = f"{signal}.{knob.name}"
            problem = _knob_problem(knob)
            if problem:
                raise SpecError(f"{who}: knob {key!r} {problem}")
            known = entries.get(key)
            if known is not None and known.knob != knob:
                raise SpecError(f"{who}: knob {key!r} is already declared, differently, by {known.detectors[0]!r}")
            readers = (*known.detectors, detector) if known is not None else (detector,)
            entries[key] = KnobEntry(key, signal, knob, readers)
        self.knobs = tuple(entries.values())

    def _add_rule(self, rule: Any) -> None:
        who = f"rule {self._describe(rule)}"
        spec = getattr(rule, "spec", None)
        if not isinstance(spec, CauseSpec):
            raise SpecError(f"{who}: declares no cause (its spec must be a trainpulse_otel.diagnose.CauseSpec)")
        if not callable(getattr(rule, "propose", None)):
            raise SpecError(f"{who}: has no propose(evidence)")
        if spec.name in self.causes:
            raise SpecError(
                f"{who}: cause {spec.name!r} is already declared by {self._declared_by['cause:' + spec.name]}"
            )
        problem = _cause_problem(spec, [*self.signals, *sorted(self.off)])
        if problem:
            raise SpecError(f"{who}: cause {spec.name!r} {problem}")
        if spec.books and spec.books in {c.books for c in self.causes.values()}:
            owner = next(c.name for c in self.causes.values() if c.books == spec.books)
            raise SpecError(f"{who}: cause {spec.name!r} books {spec.books!r}, which {owner!r} books already")
        self.causes[spec.name] = spec
        self._declared_by["cause:" + spec.name] = who

    # -------------------------------------------------------------- overrides

    def resolve(self, overrides: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
        """The overridden knob values by detector name, from ``{"SIGNAL": {"KNOB": value}}``; a ThresholdError
        names an unknown signal or knob, or a value that does not fit."""
        by_key = {e.key: e for e in self.knobs}
        out: dict[str, dict[str, float]] = {}
        for signal, values in (overrides or {}).items():
            where = f"{OVERRIDES_KEY}.{signal}"
            if signal not in {e.signal for e in self.knobs}:
                known = sorted({e.signal for e in self.knobs})
                raise ThresholdError(where, f"no detector has thresholds for this signal; known: {', '.join(known)}")
            if not isinstance(values, Mapping):
                raise ThresholdError(where, f"must be an object of knob values, got {values!r}")
            for name, value in values.items():
                entry = by_key.get(f"{signal}.{name}")
                if entry is None:
                    known = sorted(e.knob.name for e in self.knobs if e.signal == signal)
                    raise ThresholdError(f"{where}.{name}", f"unknown threshold; {signal}'s: {', '.join(known)}")
                try:
                    accepted = entry.knob.accept(value)
                except ValueError as exc:
                    raise ThresholdError(f"{where}.{name}", str(exc)) from None
                for detector in entry.detectors:
                    out.setdefault(detector, {})[name] = accepted
        for detector, values in out.items():
            broken = _order_broken(self._namespaces[detector], self._tables[detector], values)
            if broken:
                raise ThresholdError(f"{OVERRIDES_KEY}.{broken.key}", broken.message)
        return out

    def thresholds(self, detector: Any, overrides: Mapping[str, dict[str, float]] | None = None) -> Thresholds:
        """A detector's knob values: its declared ones with the resolved ``overrides`` (:meth:`resolve`)."""
        knobs = (*getattr(detector, "knobs", ()), *self._reads.get(detector.name, ()))
        return Thresholds(knobs, (overrides or {}).get(detector.name))

    def knob_values(self, overrides: Mapping[str, dict[str, float]] | None = None) -> dict[str, float]:
        """Every knob's value by ``SIGNAL.KNOB``, with the resolved ``overrides``."""
        given = overrides or {}
        return {e.key: given.get(e.detectors[0], {}).get(e.knob.name, e.knob.value) for e in self.knobs}


def _signal_problem(spec: SignalSpec) -> str:
    if not _NAME.fullmatch(spec.name):
        return "must be lower_snake_case"
    if not spec.meaning:
        return "has no meaning (one line saying what it is)"
    if spec.layer not in SIGNAL_LAYERS:
        return f"has layer {spec.layer!r}; known: {', '.join(SIGNAL_LAYERS)}"
    if not (isinstance(spec.impact, (int, float)) and 0.0 <= spec.impact <= 1.0):
        return f"has impact {spec.impact!r}; it must be a share of health between 0 and 1"
    if spec.component is not None and spec.component not in COMPONENTS:
        return f"has component {spec.component!r}; known: {', '.join(COMPONENTS)}"
    if not isinstance(spec.policy, Policy):
        return "has a policy that is not a trainpulse_otel.diagnose.Policy"
    if spec.role is not None and spec.role not in ROLES:
        return f"has role {spec.role!r}; known: {', '.join(ROLES)}"
    return ""


def _cause_problem(spec: CauseSpec, signals: Sequence[str]) -> str:
    if not _NAME.fullmatch(spec.name):
        return "must be lower_snake_case"
    if not spec.meaning or not spec.remediation:
        return "needs a meaning and a remediation"
    if spec.layer not in CAUSE_LAYERS:
        return f"has layer {spec.layer!r}; known: {', '.join(CAUSE_LAYERS)}"
    if not spec.explains:
        return "explains no signal"
    unknown = [s for s in spec.explains if s not in signals]
    if unknown:
        return f"explains unknown signal(s) {', '.join(map(repr, unknown))}; declared: {', '.join(signals)}"
    if spec.books is not None and spec.books not in COMPONENTS:
        return f"books component {spec.books!r}; known: {', '.join(COMPONENTS)}"
    return ""


def _order_broken(signal: str, knobs: tuple[Knob, ...], overrides: Mapping[str, float]) -> ThresholdError | None:
    """The first knob of a detector's table that falls below the knob it must be at least, with ``overrides``."""
    values = {k.name: overrides.get(k.name, k.value) for k in knobs}
    for knob in knobs:
        floor = knob.at_least
        if floor and values[knob.name] < values.get(floor, -math.inf):
            return ThresholdError(
                f"{signal}.{knob.name}",
                f"must be at least {signal}.{floor} ({values[floor]:g}), got {values[knob.name]:g}",
            )
    return None


def _knob_problem(knob: Knob) -> str:
    if not knob.name.isidentifier() or knob.name.startswith("_"):
        return "needs a name that is an identifier"
    if not knob.unit or not knob.reason:
        return "needs a unit and a reason"
    if knob.basis not in BASES:
        return f"has basis {knob.basis!r}; known: {', '.join(BASES)}"
    value = knob.value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"has value {value!r}; it must be a finite number"
    if not knob.minimum <= value <= knob.maximum:
        return f"has value {value!r} outside its own range {knob.minimum:g}..{knob.maximum:g}"
    return ""
