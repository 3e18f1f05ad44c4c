"""Attribute sets of data points, read once and remembered across requests, a metric or a node's export at a time.

A node daemon sends the same few attribute sets every export — one per GPU,
rank, throttle reason, XID code — in the same order under the same metrics;
reading one through the generated API (a wrapper per key-value pair and per
value) costs several times what the rest of its point does. So a point's
value and time are taken and zeroed in place (:func:`take_values`: its
value's case, double or int, stays), and a metric's sets are recognised all
at once by what the metric then serializes to (its points' attributes, value
cases and flags, and their start times and exemplars, which only make two
exports with the same sets look different: a second reading, never a wrong
one); a node's whole scope likewise, against that node's previous export
(:meth:`AttributeSets.node_layout`). Only the first time is a set read: its
dict (one per check group and attributes, under every metric that carries
them), its sorted pairs (the series key) and what its checks found wrong.
Identical bytes are identical content, so what is remembered for them is what
reading them again would give. Bounded: the oldest go first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, NumberDataPoint

from .points import NO_RECORDED_VALUE, AttributeValue, attribute_dict

#: Attribute sets remembered at most (a 64-node job of 8 GPUs and 8 ranks each has ~5,000).
MAX_ATTRIBUTE_SETS = 65_536
#: Metrics' sets remembered at most (a 64-node job's exports carry ~60 metrics a node: ~4,000).
MAX_METRIC_SETS = 16_384

#: Nodes whose export layout is remembered at most (one each, its zeroed bytes ~25 kB at 8 GPUs and 8 ranks).
MAX_LAYOUTS = 4096

Pairs = tuple[tuple[str, AttributeValue], ...]
#: An attribute set as read: its attributes, their sorted pairs, and what is wrong with them (None: nothing).
AttributeSet = tuple[dict[str, AttributeValue], Pairs, str | None]
Judge = Callable[[dict[str, AttributeValue]], str | None]


#: What a point whose value reads as zero holds, by its value's case: a double as read (-0.0 stays), an int 0, none.
ZERO_OF: dict[str | None, type[float] | int | None] = {"as_double": float, "as_int": 0, None: None}


@dataclass(frozen=True, slots=True)
class MetricSets:
    """The attribute sets of one metric's points, in point order, and what can be said of them all at once."""

    sets: tuple[AttributeSet, ...]
    attributes: tuple[dict[str, AttributeValue], ...]  # each set's dict
    pairs: tuple[Pairs, ...]  # each set's sorted pairs
    distinct: bool  # no set twice: no series twice
    clean: bool  # nothing wrong with any set
    hostnames: bool  # some set names a ``hostname``
    zeros: tuple[type[float] | int | None, ...]  # each point's zero, by its value's case (see ZERO_OF)
    recorded: tuple[bool, ...] | None  # each point's "has a recorded value" flag; None: all have
    value_type: type | None  # every value's type (float: all doubles, int: all ints); None: not one type

    @classmethod
    def of(cls, sets: tuple[AttributeSet, ...], points: Sequence[NumberDataPoint]) -> MetricSets:
        """The sets of ``points`` (values taken), with their values' cases and flags (part of what they are)."""
        attributes = tuple(attrs for attrs, _, _ in sets)
        pairs = tuple(p for _, p, _ in sets)
        clean = all(wrong is None for _, _, wrong in sets)
        zeros = tuple(ZERO_OF[point.WhichOneof("value")] for point in points)
        recorded = tuple(not point.flags & NO_RECORDED_VALUE for point in points)
        distinct = len(set(pairs)) == len(sets)
        hostnames = any("hostname" in a for a in attributes)
        cases = set(zeros)
        value_type = int if cases == {0} else float if cases == {float} else None
        unrecorded = None if all(recorded) else recorded
        return cls(sets, attributes, pairs, distinct, clean, hostnames, zeros, unrecorded, value_type)

    def values_of(self, taken: list[float | int]) -> list[float | int | None]:
        """The points' values from what :func:`take_values` read: a zero is its case's (an int 0, a double as
        read, None for a point without a value), and a point flagged as having no recorded value is None."""
        if self.recorded is not None:
            taken = [v if rec else None for v, rec in zip(taken, self.recorded, strict=True)]  # type: ignore[misc]
        return zero_cases(taken, self.zeros)  # type: ignore[arg-type]


def zero_cases(taken: list[float | int], zeros: Sequence[type[float] | int | None]) -> list[float | int]:
    """``taken`` with each value read as zero in its case's zero (``zeros``, one per value: see ZERO_OF)."""
    if 0 not in taken:  # nothing read as zero (a NaN is not): every value is as read
        return taken
    return [v if v or z is float else z for v, z in zip(taken, zeros, strict=True)]  # type: ignore[misc]


def take_values(points: Iterable[NumberDataPoint]) -> tuple[list[float | int], list[int]]:
    """Each point's value and time, zeroed in the point as read, so that what is left tells its attribute set
    (its value's case, as_double or as_int, stays: it is part of what the set says; only decode a request of
    one's own). A value that reads as zero in both cases is resolved by :meth:`MetricSets.values_of`.

    One pass, the fewest calls into the message: a point's wrapper is made once, and its double, then its int,
    read as plain fields (a oneof's case costs more to ask than both of them).
    """
    values: list[float | int] = []
    times: list[int] = []
    for point in points:
        double = point.as_double
        if double:  # nonzero (a NaN too): the double case
            values.append(double)
            point.as_double = 0.0
        else:
            integer = point.as_int
            values.append(integer or double)
            if integer:
                point.as_int = 0
        times.append(point.time_unix_nano)
        point.time_unix_nano = 0
    return values, times


#: What a node's export was read as (the receiver of TrainPulse's own instruments says: its layout).
Layout = TypeVar("Layout")


class AttributeSets(Generic[Layout]):
    """The attribute sets read so far, by (check group, identity), and the layout each node's export was read as.
    Not thread-safe: the receiver's lock covers it."""

    def __init__(
        self, max_sets: int = MAX_ATTRIBUTE_SETS, max_metrics: int = MAX_METRIC_SETS, max_layouts: int = MAX_LAYOUTS
    ) -> None:
        self.max_sets = max_sets
        self.max_metrics = max_metrics
        self.max_layouts = max_layouts
        self._known: dict[tuple[str, bytes], AttributeSet] = {}
        self._dicts: dict[tuple[str, Pairs, tuple[type, ...]], dict[str, AttributeValue]] = {}
        self._metrics: dict[tuple[str, bytes], MetricSets] = {}
        self._layouts: dict[str, tuple[bytes, Layout]] = {}

    def node_layout(self, node: str, identity: bytes) -> Layout | None:
        """What a node's export with these (zeroed) bytes was read as, if its previous export had the same."""
        known = self._layouts.get(node)
        return known[1] if known is not None and known[0] == identity else None

    def remember_layout(self, node: str, identity: bytes, layout: Layout) -> None:
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
            sets = tuple(self._point_set(group, point, judge) for point in points)
            known = self._metrics[key] = MetricSets.of(sets, points)
            if len(self._metrics) > self.max_metrics:
                del self._metrics[next(iter(self._metrics))]
        return known

    def _point_set(self, group: str, point: NumberDataPoint, judge: Judge) -> AttributeSet:
        """One (zeroed) point's set: the one already read for its bytes, else read, judged and remembered."""
        key = (group, point.SerializeToString())
        known = self._known.get(key)
        if known is None:
            read = attribute_dict(point.attributes)
            pairs = tuple(sorted(read.items()))
            # one dict for the same attributes under every metric of the group (a GPU's, whatever its values'
            # case or start time): the frame assembler resolves a dict's GPU or rank once (so never across
            # groups: a host's and a job's empty sets are two targets). Typed: 1, 1.0 and True are not alike.
            alike = (group, pairs, tuple(type(v) for _, v in pairs))
            attributes = self._dicts.setdefault(alike, read)
            known = self._known[key] = (attributes, pairs, judge(attributes))
            if len(self._known) > self.max_sets:
                del self._known[next(iter(self._known))]
                if len(self._dicts) > self.max_sets:
                    del self._dicts[next(iter(self._dicts))]
        return known
