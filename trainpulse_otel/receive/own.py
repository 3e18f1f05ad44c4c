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

from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric

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
from .attributes import AttributeSets, identity_of
from .points import GAUGE, SUM, Attributes, AttributeValue, Series, is_delta, number, point_count
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

    A metric's points are read in one pass: its spec, kind, temporality and
    value rule are looked up once per metric, and each point's attribute set
    is recognised among those already read (:mod:`.attributes`), checks and
    all, so a point costs its value, its value check and the newest-of-its-
    series comparison. The points' times and values are cleared as they are
    read: hand it a request of its own (``decode_request`` does).
    """

    def __init__(
        self, hostname: str, namespace: str, series: SeriesState, tally: Tally, attribute_sets: AttributeSets
    ) -> None:
        self.hostname = hostname
        self.prefix = namespace + "."
        self.series = series
        self.tally = tally
        self.attribute_sets = attribute_sets
        self._newest: dict[Series, tuple[int, str, dict[str, AttributeValue], float | int]] = {}

    def understands(self, scope: str, metric: str) -> bool:
        """Whether ``metric`` of ``scope`` is one of TrainPulse's instruments (inputs and outputs alike)."""
        return scope == TRAINPULSE_SCOPE and metric.startswith(self.prefix)

    def add_metric(self, metric: Metric) -> None:
        """Check each point and keep the newest of each series; outputs and relayed views are ignored."""
        name = metric.name
        spec = SPECS.get(name[len(self.prefix) :])
        kind = metric.WhichOneof("data")
        if spec is None or spec.scope == NODE or kind not in (GAUGE, SUM):
            points = point_count(metric)
            if points:
                self.tally.ignore(name, points)
            return
        data = metric.sum if kind == SUM else metric.gauge
        delta = kind == SUM and is_delta(data)
        reading = READINGS[spec.suffix]
        group, rule, relayed, suffix = reading.group, reading.rule, reading.relayed, spec.suffix
        exact, floor, ceiling = (rule.exact_type, rule.floor, rule.ceiling) if rule else (None, 0.0, 0.0)
        sets, newest, accepted = self.attribute_sets, self._newest, 0
        for point in data.data_points:
            value, at = number(point), point.time_unix_nano
            identity = identity_of(point)
            known = sets.get(group, identity) or sets.read(group, identity, point, reading.judge)
            attributes, pairs, wrong = known
            if value is None or (relayed and "hostname" in attributes):
                self.tally.ignore(name)
                continue
            series = (name, pairs)
            if kind == SUM:
                value = self.series.running_total(self.hostname, series, delta, value)
            if wrong is None and rule is not None:
                scaled = value if reading.scale == 1.0 else value / reading.scale
                if not (type(scaled) is exact and floor <= scaled <= ceiling):  # the validators' own fast path
                    wrong = value_error(reading, scaled)
            if wrong is not None:
                self.tally.reject(f"{name}: {wrong}")
                continue
            accepted += 1
            kept = newest.get(series)
            if kept is None or at >= kept[0] or delta:  # a delta's total is its newest
                newest[series] = (max(at, kept[0] if kept else 0), suffix, attributes, value)
        if accepted:
            self.tally.accept(accepted)

    def report(self) -> NodeReport | None:
        """The node's samples from the points kept; None when the request had none of them."""
        if not self._newest:
            return None
        assembler = FrameAssembler()
        for _, suffix, attributes, value in self._newest.values():
            assembler.add(suffix, attributes, value)
        frame = assembler.frame(0.0)
        return NodeReport(
            self.hostname,
            gpus=frame.gpus or None,
            host=frame.host,
            training=frame.training,
            xid_counts=frame.xid_counts or None,
        )


@dataclass(frozen=True)
class Reading:
    """How one instrument's points are judged: the check group of their attribute sets, the rule of their value."""

    spec: MetricSpec
    group: str  # the scope for an identity (a GPU, a rank), the instrument itself when its attributes say more
    rule: Rule | None  # None: the value is always 1, the attributes say it all
    field: str  # the field an error names
    scale: float
    relayed: bool  # points naming a ``hostname`` are another node's, relayed by a job daemon

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


READINGS: dict[str, Reading] = {suffix: reading(spec) for suffix, spec in SPECS.items()}


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
