"""Attribute sets of data points, read once and remembered across requests, a metric's at a time.

A node daemon sends the same few attribute sets every export — one per GPU,
rank, throttle reason, XID code — in the same order under the same metrics;
reading one through the generated API (a wrapper per key-value pair and per
value) costs several times what the rest of its point does. So a metric's
sets are recognised all at once, by what the metric serializes to once its
points' times and values are cleared (their attributes, and their flags,
start times and exemplars, which only make two exports with the same sets
look different: a second reading, never a wrong one), and read only the first
time: each point's set as a dict, its sorted pairs (the series key) and what
its checks found wrong. A set is read once for every metric that carries it
(a GPU's under each of its measurements: one dict per GPU, recognised by the
point's own bytes). Identical bytes are identical content, so what is
remembered for them is what reading them again would give. Bounded: the
oldest go first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, NumberDataPoint

from .points import NO_RECORDED_VALUE, AttributeValue, attribute_dict

#: Attribute sets remembered at most (a 64-node job of 8 GPUs and 8 ranks each has ~5,000).
MAX_ATTRIBUTE_SETS = 65_536
#: Metrics' sets remembered at most (a 64-node job's exports carry ~60 metrics a node: ~4,000).
MAX_METRIC_SETS = 16_384

#: Nodes whose export layout is remembered at most (one each, its cleared bytes ~25 kB at 8 GPUs and 8 ranks).
MAX_LAYOUTS = 4096

Pairs = tuple[tuple[str, AttributeValue], ...]
#: An attribute set as read: its attributes, their sorted pairs, and what is wrong with them (None: nothing).
AttributeSet = tuple[dict[str, AttributeValue], Pairs, str | None]
Judge = Callable[[dict[str, AttributeValue]], str | None]


@dataclass(frozen=True, slots=True)
class MetricSets:
    """The attribute sets of one metric's points, in point order, and what can be said of them all at once."""

    sets: tuple[AttributeSet, ...]
    attributes: tuple[dict[str, AttributeValue], ...]  # each set's dict
    pairs: tuple[Pairs, ...]  # each set's sorted pairs
    distinct: bool  # no set twice: no series twice
    clean: bool  # nothing wrong with any set
    hostnames: bool  # some set names a ``hostname``

    @classmethod
    def of(cls, sets: tuple[AttributeSet, ...]) -> MetricSets:
        attributes = tuple(attrs for attrs, _, _ in sets)
        pairs = tuple(p for _, p, _ in sets)
        clean = all(wrong is None for _, _, wrong in sets)
        return cls(
            sets, attributes, pairs, len(set(pairs)) == len(sets), clean, any("hostname" in a for a in attributes)
        )


def take_values(points: Iterable[NumberDataPoint]) -> tuple[list[float | int | None], list[int]]:
    """Each point's value (None: none recorded) and time, cleared from the point as read, so that what is left
    tells its attribute set: only decode a request of one's own. One pass: a point's wrapper is made once."""
    values: list[float | int | None] = []
    times: list[int] = []
    for point in points:
        kind = point.WhichOneof("value")
        if point.flags & NO_RECORDED_VALUE or kind is None:
            values.append(None)
        else:
            values.append(point.as_double if kind == "as_double" else point.as_int)
        times.append(point.time_unix_nano)
        point.ClearField("time_unix_nano")
        point.ClearField("value")
    return values, times


class AttributeSets:
    """The attribute sets read so far, by (check group, identity). Not thread-safe: the receiver's lock covers it."""

    def __init__(
        self, max_sets: int = MAX_ATTRIBUTE_SETS, max_metrics: int = MAX_METRIC_SETS, max_layouts: int = MAX_LAYOUTS
    ) -> None:
        self.max_sets = max_sets
        self.max_metrics = max_metrics
        self.max_layouts = max_layouts
        self._known: dict[tuple[str, bytes], AttributeSet] = {}
        self._metrics: dict[tuple[str, bytes], MetricSets] = {}
        self._layouts: dict[str, tuple[bytes, tuple[object, ...]]] = {}

    def node_layout(self, node: str, identity: bytes) -> tuple[object, ...] | None:
        """What a node's export with these (cleared) bytes was read as, if its previous export had the same."""
        known = self._layouts.get(node)
        return known[1] if known is not None and known[0] == identity else None

    def remember_layout(self, node: str, identity: bytes, layout: tuple[object, ...]) -> None:
        """Remember how a node's export was read (one per node: a node's exports look alike; bounded)."""
        self._layouts.pop(node, None)
        self._layouts[node] = (identity, layout)
        if len(self._layouts) > self.max_layouts:
            del self._layouts[next(iter(self._layouts))]

    def of_metric(self, group: str, metric: Metric, points: Sequence[NumberDataPoint], judge: Judge) -> MetricSets:
        """The sets of ``metric``'s ``points`` (its data points, read by :func:`take_values`), judged for ``group``."""
        key = (group, metric.SerializeToString())
        known = self._metrics.get(key)
        if known is None:
            known = self._metrics[key] = MetricSets.of(tuple(self._point_set(group, point, judge) for point in points))
            if len(self._metrics) > self.max_metrics:
                del self._metrics[next(iter(self._metrics))]
        return known

    def _point_set(self, group: str, point: NumberDataPoint, judge: Judge) -> AttributeSet:
        """One (cleared) point's set: the one already read for its bytes, else read, judged and remembered."""
        key = (group, point.SerializeToString())
        known = self._known.get(key)
        if known is None:
            attributes = attribute_dict(point.attributes)
            known = self._known[key] = (attributes, tuple(sorted(attributes.items())), judge(attributes))
            if len(self._known) > self.max_sets:
                del self._known[next(iter(self._known))]
        return known
