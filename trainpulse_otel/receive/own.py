"""TrainPulse's own instruments, as a node daemon exports them, back into that node's samples.

A node daemon exports the catalogue's measurements (``trainpulse.gpu.*`` with
``gpu.index``, ``trainpulse.host.*``, ``trainpulse.training.*``,
``trainpulse.rank.*`` with ``rank``, the XID totals) from the
``trainpulse_otel`` meter. They are read back by the same
:class:`~trainpulse_otel.telemetry.assembly.FrameAssembler` the daemon's own
reader uses, after each point is checked with the sample model's field rules
(:mod:`.readings`), so a node's GPUs arrive as they left. A node's every later
export of the same layout is checked and assembled as planned the first time
(:mod:`.layout`). TrainPulse's *outputs* (health,
signals, goodput, the daemon's counters) and a relaying job daemon's view of
its other nodes (points naming another ``hostname``, ``node.*``) are not
inputs: they are counted as ignored; the node daemon's verdict (its health
and its active signals' subjects) is read beside them (:mod:`.verdict`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, ScopeMetrics

from ..samples import NodeReport
from ..telemetry.assembly import FrameAssembler
from .attributes import AttributeSets, MetricSets, Pairs, take_values
from .layout import PlannedLayout, Taken, planned_layout
from .points import GAUGE, SUM, Attributes, Series, is_delta, point_count
from .readings import READINGS, Reading, value_error
from .series import SeriesState
from .tally import Tally
from .verdict import VerdictReader

#: The meter (instrumentation scope) TrainPulse's instruments come from.
TRAINPULSE_SCOPE = "trainpulse_otel"


class OwnInstruments:
    """The TrainPulse instruments of one resource (one node), gathered into its :class:`NodeReport`.

    A node daemon's scope is read at once (:meth:`add_scope`): its points'
    values and times are taken, and the plan made for the node's previous
    export — each metric's reading, temporality and attribute sets, checks and
    all (:mod:`.attributes`), and the whole scope's checks and assembly
    (:mod:`.layout`) — is used again while the scope looks the same, so a
    point costs its value and a share of its rule's check; any other scope
    goes metric by metric. A metric whose points are
    all good is kept whole; one with a point to ignore, total up or reject is
    judged point by point. The newest point of each series is what the report
    holds; only when a series came twice (a set twice in a metric, a metric
    twice) are the points' times compared. Taking a value zeroes it in the
    point: hand it a request of its own (see ``decode_request``).
    """

    def __init__(
        self,
        hostname: str,
        namespace: str,
        series: SeriesState,
        tally: Tally,
        attribute_sets: AttributeSets[NodeLayout],
    ) -> None:
        self.hostname = hostname
        self.prefix = namespace + "."
        self.series = series
        self.tally = tally
        self.attribute_sets = attribute_sets
        self._kept: list[Kept] = []
        self._names: set[str] = set()
        self._distinct = True  # no series came twice (so far)
        self._planned: Planned | None = None  # a scope read by its layout's planned assembly (add_scope)
        self.verdict = VerdictReader(hostname, self.prefix)

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
        for metric, name in zip(metrics, names, strict=True):
            self.verdict.read(metric, name)
        taken = [take_metric(metric) for metric in metrics]
        identity = scope_metrics.SerializeToString()
        layout = self.attribute_sets.node_layout(self.hostname, identity)
        if layout is None:
            layout = self._layout(metrics, names)
            self.attribute_sets.remember_layout(self.hostname, identity, layout)
        if not self._planned_scope(layout, names, taken):
            for plan, name, (values, times) in zip(layout.plans, names, taken, strict=True):
                self._add(plan, name, values, times)
        return True

    def _layout(self, metrics: Sequence[Metric], names: Sequence[str]) -> NodeLayout:
        """How a scope of this layout is read: each metric's plan, and the whole scope's when it has one."""
        plans = tuple(self._plan(metric, name) for metric, name in zip(metrics, names, strict=True))
        return NodeLayout(plans, planned_layout(self.hostname, names, plans))

    def _planned_scope(self, layout: NodeLayout, names: Sequence[str], taken: Sequence[Taken]) -> bool:
        """Take a scope through its layout's plan when every value passes its check (each metric is then kept
        whole, as :meth:`_add` would keep it); False, having taken nothing, when some value does not, when the
        layout has no plan, or when this resource already kept other points (their series may meet)."""
        planned = layout.planned
        if planned is None or self._kept or self._planned is not None:
            return False
        values = planned.values(taken)
        if values is None:
            return False
        for position, name in planned.ignored:
            if ignored := taken[position][0]:
                self.tally.ignore(name, len(ignored))
        self.tally.accept(len(values))
        self._planned = Planned(planned, layout.plans, names, values, taken)
        return True

    def add_metric(self, metric: Metric) -> None:
        """Check one metric's points and keep the good ones; outputs and relayed views are ignored."""
        name = metric.name
        self.verdict.read(metric, name)
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
        if self._planned is not None:  # more points for this resource: the planned scope's join them as kept
            self._unplan(self._planned)
        reading, known = plan.reading, plan.sets
        values = known.values_of(values)  # type: ignore[arg-type]
        fine = known.clean and not (reading.relayed and known.hostnames) and not plan.delta and None not in values
        if fine and reading.fit(values, known.value_type):  # type: ignore[arg-type]
            kept = Kept(name, reading.spec.suffix, plan.delta, values, known.attributes, known.pairs, times)  # type: ignore[arg-type]
        else:  # something to ignore, total up or reject: point by point
            kept = self._checked(Kept(name, reading.spec.suffix, plan.delta, [], [], [], []), plan, values, times)
        if kept.values:
            self.tally.accept(len(kept.values))
            self._keep(kept, known.distinct)

    def _keep(self, kept: Kept, distinct: bool) -> None:
        self._distinct = self._distinct and distinct and kept.metric not in self._names
        self._names.add(kept.metric)
        self._kept.append(kept)

    def _unplan(self, planned: Planned) -> None:
        """The planned scope's metrics as kept ones (their points already counted), to be assembled with others."""
        self._planned = None
        first = 0
        for position in planned.layout.kept:
            plan, (taken, times) = planned.plans[position], planned.taken[position]
            values = planned.values[first : first + len(taken)]
            first += len(taken)
            if values and plan is not None:
                sets, name = plan.sets, planned.names[position]
                kept = Kept(name, plan.reading.spec.suffix, False, values, sets.attributes, sets.pairs, times)
                self._keep(kept, sets.distinct)

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
        """The node's samples from the points kept, and its daemon's verdict; None when the request had
        neither."""
        signals = self.verdict.signals()
        if self._planned is not None:
            frame = self._planned.layout.assembly.frame(self._planned.values)
        elif self._kept:
            assembler = FrameAssembler(self.hostname)
            assembler.add_observations(self._newest())
            frame = assembler.frame(0.0)
        else:
            return None if signals is None else NodeReport(self.hostname, signals=signals)
        return NodeReport(
            self.hostname,
            gpus=frame.gpus or None,
            host=frame.host,
            training=frame.training,
            xid_counts=frame.xid_counts or None,
            signals=signals,
            ports=frame.ports or None,
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
class NodeLayout:
    """How a node's scope of one layout is read: each metric's plan (None: ignored) and, when every metric can be
    kept whole, the whole scope's (:mod:`.layout`; None: read metric by metric)."""

    plans: tuple[MetricPlan | None, ...]
    planned: PlannedLayout | None


@dataclass(frozen=True, slots=True)
class Planned:
    """A scope taken through its layout's plan: each metric's plan and name, the kept ones' values, what each
    metric gave."""

    layout: PlannedLayout
    plans: tuple[MetricPlan | None, ...]
    names: Sequence[str]
    values: list[float | int]
    taken: Sequence[Taken]


@dataclass(frozen=True, slots=True)
class MetricPlan:
    """How one metric is read: its instrument's reading, whether it is a sum and a delta one, its attribute sets."""

    reading: Reading
    summed: bool
    delta: bool
    sets: MetricSets


def take_metric(metric: Metric) -> Taken:
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
