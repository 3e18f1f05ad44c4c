"""TrainPulse's own instruments, as a node daemon exports them, back into that node's samples.

A node daemon exports the catalogue's measurements (``trainpulse.gpu.*`` with
``gpu.index``, ``trainpulse.host.*``, ``trainpulse.training.*``,
``trainpulse.rank.*`` with ``rank``, the XID totals) from the
``trainpulse_otel`` meter. They are read back by the same
:class:`~trainpulse_otel.telemetry.conversion.FrameAssembler` the daemon's own
reader uses, after each point is checked with the sample model's field rules,
so a node's GPUs arrive as they left. TrainPulse's *outputs* (health,
signals, goodput, the daemon's counters) and a relaying job daemon's view of
its other nodes (points naming another ``hostname``, ``node.*``) are not
inputs: they are counted as ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, ScopeMetrics

from ..samples import (
    GPU_RULES,
    HOST_RULES,
    RANK_PHASES,
    RANK_RULES,
    THROTTLE_REASONS,
    TRAINING_RULES,
    NodeReport,
    Rule,
    SampleError,
    check_value,
)
from ..samples.validation import COUNT, STR, XID_CODE
from ..telemetry.catalog import (
    ALL_INPUTS,
    GPU,
    GPU_THROTTLE,
    GPU_XID,
    HOST,
    NODE,
    NONFINITE,
    RANK,
    RANK_PHASE,
    TRAINING,
    TRAINING_INFO,
    TRAINING_INFO_ATTRIBUTES,
    MetricSpec,
)
from ..telemetry.conversion import NONFINITE_FIELDS, FrameAssembler
from .attributes import AttributeSets, MetricSets, Pairs, take_values
from .points import GAUGE, SUM, Attributes, Series, is_delta, point_count
from .series import SeriesState
from .tally import Tally

#: The meter (instrumentation scope) TrainPulse's instruments come from.
TRAINPULSE_SCOPE = "trainpulse_otel"
SPECS: dict[str, MetricSpec] = {spec.suffix: spec for spec in ALL_INPUTS}
RULES: dict[str, Mapping[str, Rule]] = {GPU: GPU_RULES, HOST: HOST_RULES, TRAINING: TRAINING_RULES, RANK: RANK_RULES}
NONFINITE_TOKENS = ("nan", "inf", "-inf")
#: Scopes whose points, when they name a ``hostname``, are another node's (relayed by a job daemon).
NODE_LOCAL = (GPU, HOST)


class OwnInstruments:
    """The TrainPulse instruments of one resource (one node), gathered into its :class:`NodeReport`.

    A node daemon's scope is read at once (:meth:`add_scope`): its points'
    values and times are taken, and the plan made for the node's previous
    export — each metric's reading, temporality and attribute sets, checks and
    all (:mod:`.attributes`) — is used again while the scope looks the same,
    so a point costs its value and, with the rest of its metric's, its value
    check; any other scope goes metric by metric. A metric whose points are
    all good is kept whole; one with a point to ignore, total up or reject is
    judged point by point. The newest point of each series is what the report
    holds; only when a series came twice (a set twice in a metric, a metric
    twice) are the points' times compared. Taking a value zeroes it in the
    point: hand it a request of its own (see ``decode_request``).
    """

    def __init__(
        self, hostname: str, namespace: str, series: SeriesState, tally: Tally, attribute_sets: AttributeSets
    ) -> None:
        self.hostname = hostname
        self.prefix = namespace + "."
        self.series = series
        self.tally = tally
        self.attribute_sets = attribute_sets
        self._kept: list[Kept] = []
        self._names: set[str] = set()
        self._distinct = True  # no series came twice (so far)

    def understands(self, scope: str, metric: str) -> bool:
        """Whether ``metric`` of ``scope`` is one of TrainPulse's instruments (inputs and outputs alike)."""
        return scope == TRAINPULSE_SCOPE and metric.startswith(self.prefix)

    def add_scope(self, scope_metrics: ScopeMetrics) -> bool:
        """Read a scope's metrics together when all of them are TrainPulse's (a node daemon's export); False,
        reading nothing, when the scope or some metric is not (then each goes to whoever understands it).

        A node sends the same metrics over the same attribute sets every
        export; once its points' values and times are taken (and zeroed), the
        scope's bytes equal its previous export's, and the plan made then — each
        metric's reading, temporality and attribute sets — is used again, so a
        metric costs its values and their check, not its name, kind and sets.
        """
        metrics = scope_metrics.metrics
        names = [metric.name for metric in metrics]
        if scope_metrics.scope.name != TRAINPULSE_SCOPE or not all(name.startswith(self.prefix) for name in names):
            return False
        taken = [take_metric(metric) for metric in metrics]
        identity = scope_metrics.SerializeToString()
        plans = self.attribute_sets.node_layout(self.hostname, identity)
        if plans is None:
            plans = tuple(self._plan(metric, name) for metric, name in zip(metrics, names, strict=True))
            self.attribute_sets.remember_layout(self.hostname, identity, plans)
        for plan, name, (values, times) in zip(plans, names, taken, strict=True):
            self._add(plan, name, values, times)  # type: ignore[arg-type]
        return True

    def add_metric(self, metric: Metric) -> None:
        """Check one metric's points and keep the good ones; outputs and relayed views are ignored."""
        name = metric.name
        values, times = take_metric(metric)
        self._add(self._plan(metric, name), name, values, times)

    def _plan(self, metric: Metric, name: str) -> MetricPlan | None:
        """How ``metric`` (its values taken) is read: its reading, temporality and attribute sets; None: ignored
        (an output, a relayed view, a kind no instrument is: its points are counted as ignored)."""
        reading = READINGS.get(name[len(self.prefix) :])
        kind = metric.WhichOneof("data")
        if reading is None or kind not in (GAUGE, SUM):
            return None
        data = metric.sum if kind == SUM else metric.gauge
        sets = self.attribute_sets.of_metric(reading.group, metric, data.data_points, reading.judge)
        return MetricPlan(reading, kind == SUM, kind == SUM and is_delta(data), sets)

    def _add(self, plan: MetricPlan | None, name: str, values: list[float | int | None], times: list[int]) -> None:
        """Keep a metric's good points: all at once when nothing is wrong with them, else one by one."""
        if plan is None:
            if values:
                self.tally.ignore(name, len(values))
            return
        reading, known = plan.reading, plan.sets
        values = known.values_of(values)  # type: ignore[arg-type]
        fine = known.clean and not (reading.relayed and known.hostnames) and not plan.delta and None not in values
        if fine and reading.fit(values, known.value_type):  # type: ignore[arg-type]
            kept = Kept(name, reading.spec.suffix, plan.delta, values, known.attributes, known.pairs, times)  # type: ignore[arg-type]
        else:  # something to ignore, total up or reject: point by point
            kept = self._checked(Kept(name, reading.spec.suffix, plan.delta, [], [], [], []), plan, values, times)
        if kept.values:
            self.tally.accept(len(kept.values))
            self._distinct = self._distinct and known.distinct and name not in self._names
            self._names.add(name)
            self._kept.append(kept)

    def _checked(self, kept: Kept, plan: MetricPlan, values: list[float | int | None], times: list[int]) -> Kept:
        """One metric's points judged one by one into ``kept``: ignored, totalled (a sum), rejected with why, or kept."""
        reading, known = plan.reading, plan.sets
        name = kept.metric
        for value, at, (attributes, pairs, wrong) in zip(values, times, known.sets, strict=True):
            if value is None or (reading.relayed and "hostname" in attributes):
                self.tally.ignore(name)
                continue
            if plan.summed:
                value = self.series.running_total(self.hostname, (name, pairs), kept.delta, value)
            if wrong is None and not reading.fit((value,), type(value)):  # a bool, a NaN, out of bounds
                wrong = value_error(reading, value if reading.scale == 1.0 else value / reading.scale)
            if wrong is not None:
                self.tally.reject(f"{name}: {wrong}")
                continue
            kept.values.append(value)  # type: ignore[attr-defined]
            kept.attributes.append(attributes)  # type: ignore[attr-defined]
            kept.pairs.append(pairs)  # type: ignore[attr-defined]
            kept.times.append(at)  # type: ignore[attr-defined]
        return kept

    def report(self) -> NodeReport | None:
        """The node's samples from the points kept; None when the request had none of them."""
        if not self._kept:
            return None
        assembler = FrameAssembler(self.hostname)
        assembler.add_observations(self._newest())
        frame = assembler.frame(0.0)
        return NodeReport(
            self.hostname,
            gpus=frame.gpus or None,
            host=frame.host,
            training=frame.training,
            xid_counts=frame.xid_counts or None,
        )

    def _newest(self) -> dict[str, Iterable[tuple[float | int, Attributes]]]:
        """The newest point of each series, by instrument suffix (a delta's last is its newest: its total)."""
        if self._distinct:  # every point is the only one of its series
            return {kept.suffix: zip(kept.values, kept.attributes, strict=True) for kept in self._kept}
        newest: dict[Series, tuple[int, str, Attributes, float | int]] = {}
        for kept in self._kept:
            for value, attributes, pairs, at in zip(kept.values, kept.attributes, kept.pairs, kept.times, strict=True):
                series = (kept.metric, pairs)
                known = newest.get(series)
                if known is None or at >= known[0] or kept.delta:
                    newest[series] = (max(at, known[0] if known else 0), kept.suffix, attributes, value)
        out: dict[str, list[tuple[float | int, Attributes]]] = {}
        for _, suffix, attributes, value in newest.values():
            out.setdefault(suffix, []).append((value, attributes))
        return out


@dataclass(frozen=True, slots=True)
class MetricPlan:
    """How one metric is read: its instrument's reading, whether it is a sum and a delta one, its attribute sets."""

    reading: Reading
    summed: bool
    delta: bool
    sets: MetricSets


def take_metric(metric: Metric) -> tuple[list[float | int | None], list[int]]:
    """A metric's values and times (:func:`take_values`); a kind without number points has its data cleared,
    so that only its name tells it apart, and one None per point (to be counted)."""
    kind = metric.WhichOneof("data")
    if kind in (GAUGE, SUM):
        return take_values(metric.sum.data_points if kind == SUM else metric.gauge.data_points)
    points = point_count(metric)
    if kind is not None:
        metric.ClearField(kind)
    return [None] * points, []


@dataclass(slots=True)
class Kept:
    """One metric's good points, as parallel sequences: values, attributes, their sorted pairs, times."""

    metric: str
    suffix: str
    delta: bool
    values: Sequence[float | int]
    attributes: Sequence[Attributes]
    pairs: Sequence[Pairs]
    times: Sequence[int]


@dataclass(frozen=True)
class Reading:
    """How one instrument's points are judged: the check group of their attribute sets, the rule of their value."""

    spec: MetricSpec
    group: str  # the scope for an identity (a GPU, a rank), the instrument itself when its attributes say more
    rule: Rule | None  # None: the value is always 1, the attributes say it all
    field: str  # the field an error names
    scale: float
    relayed: bool  # points naming a ``hostname`` are another node's, relayed by a job daemon

    def fit(self, values: Sequence[float | int], value_type: type | None) -> bool:
        """Whether every value (none of them None; all of ``value_type``, None when they differ) is exactly of
        the rule's type inside its bounds, once scaled: the validators' own fast path, for a metric's values at
        once (C loops: least, greatest and sum — a NaN makes the sum NaN). One that is not is judged by
        :func:`value_error`."""
        rule = self.rule
        if rule is None or not values:
            return True
        scaled = values if self.scale == 1.0 else [v / self.scale for v in values]
        if (value_type if self.scale == 1.0 else float) is not rule.exact_type:
            return False
        return (
            rule.floor <= min(scaled)
            and max(scaled) <= rule.ceiling
            and not (rule.exact_type is float and math.isnan(sum(scaled)))
        )

    def judge(self, attributes: Attributes) -> str | None:
        """What is wrong with a point's attributes (None: nothing)."""
        try:
            checked_attributes(self.spec, attributes)
        except SampleError as exc:
            return str(exc)
        return None


def reading(spec: MetricSpec) -> Reading:
    relayed = spec.scope in NODE_LOCAL
    if spec is GPU_XID:
        return Reading(spec, spec.suffix, COUNT, "xid_counts.count", 1.0, relayed)
    if spec is GPU_THROTTLE:
        return Reading(spec, spec.suffix, Rule("int", 0, 1), "throttle_reasons", 1.0, relayed)
    if spec in (NONFINITE, TRAINING_INFO, RANK_PHASE):
        return Reading(spec, spec.suffix, None, "", 1.0, relayed)
    rule = RULES[spec.scope][spec.field] if spec.scope in RULES else None
    return Reading(spec, spec.scope, rule, f"{spec.scope}.{spec.field}", spec.scale, relayed)


#: How each input instrument is read, by suffix (a node's own liveness, ``node.*``, is a job daemon's output).
READINGS: dict[str, Reading] = {suffix: reading(spec) for suffix, spec in SPECS.items() if spec.scope != NODE}


def value_error(reading: Reading, scaled: float | int) -> str | None:
    """What ``check_value`` finds wrong with a (scaled) value under the reading's rule (None: nothing)."""
    if reading.rule is None:
        return None
    try:
        check_value(reading.field, scaled, reading.rule)
    except SampleError as exc:
        return str(exc)
    return None


def checked_attributes(spec: MetricSpec, attributes: Attributes) -> None:
    """Raise SampleError naming the attribute of a point that does not say what it is about."""
    if spec is GPU_XID:
        attribute(attributes, "gpu.index", COUNT)
        attribute(attributes, "xid", XID_CODE)
    elif spec is GPU_THROTTLE:
        attribute(attributes, "gpu.index", COUNT)
        one_of(attributes, "reason", THROTTLE_REASONS)
    elif spec is NONFINITE:
        one_of(attributes, "field", NONFINITE_FIELDS)
        one_of(attributes, "value", NONFINITE_TOKENS)
        attribute(attributes, "rank", COUNT, required=False)
    elif spec is TRAINING_INFO:
        for key in TRAINING_INFO_ATTRIBUTES.values():
            attribute(attributes, key, STR, required=False)
    elif spec is RANK_PHASE:
        attribute(attributes, "rank", COUNT)
        one_of(attributes, "phase", RANK_PHASES)
        attribute(attributes, "process.pid", COUNT, required=False)
    else:
        identity(spec.scope, attributes)


def identity(scope: str, attributes: Attributes) -> None:
    """The attributes that say which GPU or rank a point is about."""
    if scope == GPU:
        attribute(attributes, "gpu.index", COUNT)
        attribute(attributes, "gpu.uuid", STR, required=False)
        attribute(attributes, "gpu.name", STR, required=False)
    elif scope == RANK:
        attribute(attributes, "rank", COUNT)
        attribute(attributes, "gpu.index", COUNT, required=False)
        attribute(attributes, "hostname", STR, required=False)


def attribute(attributes: Attributes, key: str, rule: Rule, required: bool = True) -> None:
    """Check the attribute ``key`` against ``rule`` (a bool is no number here)."""
    if key not in attributes:
        if required:
            raise SampleError(f"attribute {key}", "is required")
        return
    check_value(f"attribute {key}", attributes[key], rule)


def one_of(attributes: Attributes, key: str, known: tuple[str, ...]) -> None:
    value = attributes.get(key)
    if value not in known:
        raise SampleError(f"attribute {key}", f"must be one of {', '.join(known)}, got {value!r}")
