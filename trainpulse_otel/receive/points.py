"""An OTLP request read through the generated API: each resource's node and metrics, and typed points.

The proto's nesting (resource → scope → metric → data points, a ``data``
oneof per metric, a ``value`` oneof per number point and per attribute) is
read through the generated API only (``WhichOneof``); what comes out are plain
values the mapping stages can judge without knowing protobuf.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    ExponentialHistogram,
    Histogram,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    Sum,
)

GAUGE, SUM, HISTOGRAM, OTHER = "gauge", "sum", "histogram", "other"
#: The resource attribute that names the node (OpenTelemetry's semantic conventions).
HOST_NAME = "host.name"
#: DataPointFlags.FLAG_NO_RECORDED_VALUE: a point that only says "no value now" (a stale marker).
NO_RECORDED_VALUE = 1

AttributeValue = str | int | float | bool
Attributes = Mapping[str, AttributeValue]
#: What identifies a series: its metric and its attributes, sorted.
Series = tuple[str, tuple[tuple[str, AttributeValue], ...]]


@dataclass(frozen=True, slots=True)
class Point:
    """One data point of one metric. ``value`` for gauges and sums; ``sum``/``count`` for histograms.

    ``value`` is None for a point without a number (a histogram's, or one
    flagged as having no recorded value); ``delta`` says the point covers only
    its own interval (delta temporality), not everything since the start.
    """

    metric: str
    scope: str
    kind: str
    attributes: Attributes
    time_unix_nano: int
    value: float | int | None = None
    sum: float | None = None
    count: int = 0
    delta: bool = False

    @property
    def series(self) -> Series:
        """What identifies the point's series: its metric and its attributes."""
        return (self.metric, tuple(sorted(self.attributes.items())))


def resource_node(resource_metrics: ResourceMetrics) -> tuple[str | None, dict[str, AttributeValue]]:
    """A resource's node (its ``host.name``; None when it has none) and its attributes."""
    attributes = attribute_dict(resource_metrics.resource.attributes)
    hostname = attributes.get(HOST_NAME)
    return (hostname if isinstance(hostname, str) and hostname else None), attributes


def scoped_metrics(resource_metrics: ResourceMetrics) -> Iterator[tuple[str, Metric]]:
    """A resource's metrics, each with the name of the scope (the meter) that made it."""
    for scope_metrics in resource_metrics.scope_metrics:
        scope = scope_metrics.scope.name
        for metric in scope_metrics.metrics:
            yield scope, metric


def point_count(metric: Metric) -> int:
    """How many points ``metric`` carries (a metric without data carries none)."""
    kind = metric.WhichOneof("data")
    return 0 if kind is None else len(getattr(metric, kind).data_points)


def is_delta(data: Sum | Histogram | ExponentialHistogram) -> bool:
    """Whether an aggregation covers only its own interval (delta temporality), not everything since the start."""
    return data.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


def attribute_dict(pairs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    """Scalar attributes as a dict; arrays, maps and bytes are left out (no instrument we read uses them)."""
    out: dict[str, AttributeValue] = {}
    for pair in pairs:
        value = scalar(pair.value)
        if value is not None:
            out[pair.key] = value
    return out


def scalar(value: AnyValue) -> AttributeValue | None:
    """An AnyValue's scalar, or None for an array, a map, bytes or nothing."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    return None


def metric_points(metric: Metric, scope: str) -> Iterator[Point]:
    """One metric's points, whatever its kind (kinds we never map come out as OTHER, to be counted)."""
    kind = metric.WhichOneof("data")
    name = metric.name
    if kind == "gauge":
        for p in metric.gauge.data_points:
            yield Point(name, scope, GAUGE, attribute_dict(p.attributes), p.time_unix_nano, number(p))
    elif kind == "sum":
        data = metric.sum
        delta = is_delta(data)
        for p in data.data_points:
            yield Point(name, scope, SUM, attribute_dict(p.attributes), p.time_unix_nano, number(p), delta=delta)
    elif kind in ("histogram", "exponential_histogram"):
        data = metric.histogram if kind == "histogram" else metric.exponential_histogram
        delta = is_delta(data)
        for h in data.data_points:
            total = h.sum if h.HasField("sum") else None
            attrs = attribute_dict(h.attributes)
            yield Point(name, scope, HISTOGRAM, attrs, h.time_unix_nano, sum=total, count=h.count, delta=delta)
    elif kind == "summary":
        for s in metric.summary.data_points:
            yield Point(name, scope, OTHER, attribute_dict(s.attributes), s.time_unix_nano)
    else:  # a metric without data carries no point to count
        return


def number(point: NumberDataPoint) -> float | int | None:
    """A NumberDataPoint's value (``as_double`` or ``as_int``); None when it has none."""
    if point.flags & NO_RECORDED_VALUE:
        return None
    kind = point.WhichOneof("value")
    if kind == "as_double":
        return point.as_double
    if kind == "as_int":
        return point.as_int
    return None
