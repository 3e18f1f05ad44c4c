"""``GET /v1/metrics``: the same instruments as Datadog-friendly JSON.

Each point becomes ``{"metric", "value", "type", "tags"}``:

- names are the OTel instrument names (``trainpulse.gpu.utilization``), as
  Datadog shows them when they arrive over OTLP;
- gauges (and non-monotonic sums) are ``gauge``;
- monotonic sums (counters) are ``rate`` carrying the cumulative total since
  the daemon started: the Datadog Agent's check API (``AgentCheck.rate``)
  turns successive totals into a per-second rate, so any number of pollers get
  correct numbers and the endpoint keeps no per-client state. (A ``count``
  would have to be "since the previous request", which breaks with two
  pollers.) Histograms become ``<name>.count`` and ``<name>.sum`` the same way;
- tags are the point's attributes (``gpu.index`` is ``gpu``, dots become
  underscores) plus Datadog's unified service tags from the resource:
  ``service``, ``host``, ``version``, ``env``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.sdk.metrics import ObservableCounter, ObservableGauge
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    HistogramDataPoint,
    InMemoryMetricReader,
    Metric,
    MetricsData,
    Sum,
)

from .instruments import DEFAULT_MAX_SERIES, METER_NAME

GAUGE, RATE = "gauge", "rate"

#: Resource attribute → Datadog unified service tag.
RESOURCE_TAGS = {
    "service.name": "service",
    "host.name": "host",
    "service.version": "version",
    "deployment.environment.name": "env",
    "deployment.environment": "env",
}
#: Point attributes whose tag name differs from the attribute with dots made underscores.
ATTRIBUTE_TAGS = {"gpu.index": "gpu"}


class DatadogJson:
    """A pull-only reader on the MeterProvider, rendered as the ``/v1/metrics`` list."""

    def __init__(self, max_series: int = DEFAULT_MAX_SERIES) -> None:
        self.reader = InMemoryMetricReader(
            cardinality_limits={ObservableGauge: max_series, ObservableCounter: max_series}
        )

    def render(self) -> list[dict[str, Any]]:
        """Collect now and return the points."""
        return datadog_points(self.reader.get_metrics_data())


def datadog_points(metrics_data: MetricsData | None) -> list[dict[str, Any]]:
    """Every point of TrainPulse's meter in ``metrics_data`` as a Datadog-style entry."""
    out: list[dict[str, Any]] = []
    for resource_metrics in metrics_data.resource_metrics if metrics_data else ():
        base = resource_tags(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            if scope_metrics.scope.name == METER_NAME:
                for metric in scope_metrics.metrics:
                    out.extend(_points(metric, base))
    return out


def resource_tags(attributes: Mapping[str, Any]) -> list[str]:
    """The unified service tags the resource provides (the newer ``env`` key wins)."""
    tags: dict[str, str] = {}
    for key, tag in RESOURCE_TAGS.items():
        if key in attributes and tag not in tags:
            tags[tag] = str(attributes[key])
    return [f"{tag}:{value}" for tag, value in tags.items()]


def point_tags(attributes: Mapping[str, Any] | None) -> list[str]:
    """A point's attributes as ``key:value`` tags."""
    return [f"{ATTRIBUTE_TAGS.get(key, key.replace('.', '_'))}:{value}" for key, value in (attributes or {}).items()]


def _points(metric: Metric, base: list[str]) -> Iterable[dict[str, Any]]:
    data = metric.data
    for point in data.data_points:
        tags = base + point_tags(point.attributes)
        if isinstance(data, Histogram) and isinstance(point, HistogramDataPoint):
            yield _entry(f"{metric.name}.count", point.count, RATE, tags)
            yield _entry(f"{metric.name}.sum", point.sum, RATE, tags)
        elif isinstance(data, Sum) and data.is_monotonic:
            yield _entry(metric.name, point.value, RATE, tags)
        elif isinstance(data, (Gauge, Sum)):
            yield _entry(metric.name, point.value, GAUGE, tags)


def _entry(name: str, value: float, kind: str, tags: list[str]) -> dict[str, Any]:
    return {"metric": name, "value": value, "type": kind, "tags": tags}
