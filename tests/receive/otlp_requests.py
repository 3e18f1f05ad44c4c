"""OTLP requests as real senders make them: TrainPulse's instruments through the OTel SDK and its OTLP
encoder, and Megatron-LM-style metrics built from ``opentelemetry-proto`` messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from trainpulse_otel.collect.base import Collected
from trainpulse_otel.telemetry.instruments import METER_NAME, register_measurements
from trainpulse_otel.telemetry.latest import LatestSamples
from trainpulse_otel.telemetry.otlp import TEMPORALITIES

DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


class NodeExporter:
    """A node daemon's instruments over its latest samples, collected as its OTLP exporter would send them."""

    def __init__(self, hostname: str, temporality: str = "cumulative") -> None:
        self.latest = LatestSamples()
        self.reader = InMemoryMetricReader(preferred_temporality=TEMPORALITIES[temporality])
        self.provider = MeterProvider(metric_readers=[self.reader], resource=Resource.create({"host.name": hostname}))
        self.meter = self.provider.get_meter(METER_NAME)
        register_measurements(self.meter, self.latest)

    def export(self, collected: Collected | None = None, now: float = 1000.0) -> ExportMetricsServiceRequest:
        """Store ``collected`` as the node's collector would, then collect one export."""
        if collected is not None:
            self.latest.put(collected, now)
        return encode_metrics(self.reader.get_metrics_data())


def attributes(values: Mapping[str, str | int | float]) -> list[KeyValue]:
    out = []
    for key, value in values.items():
        if isinstance(value, str):
            any_value = AnyValue(string_value=value)
        elif isinstance(value, int):
            any_value = AnyValue(int_value=value)
        else:
            any_value = AnyValue(double_value=value)
        out.append(KeyValue(key=key, value=any_value))
    return out


def gauge(name: str, value: float, time_ns: int = 1, **attrs: str | int) -> Metric:
    point = NumberDataPoint(as_double=value, time_unix_nano=time_ns, attributes=attributes(attrs))
    return Metric(name=name, gauge=Gauge(data_points=[point]))


def counter(name: str, value: int, temporality: int = CUMULATIVE, time_ns: int = 1) -> Metric:
    point = NumberDataPoint(as_int=value, time_unix_nano=time_ns)
    return Metric(name=name, sum=Sum(data_points=[point], aggregation_temporality=temporality, is_monotonic=True))


def histogram(name: str, total: float, count: int, temporality: int = DELTA, time_ns: int = 1) -> Metric:
    point = HistogramDataPoint(sum=total, count=count, time_unix_nano=time_ns)
    return Metric(name=name, unit="ms", histogram=Histogram(data_points=[point], aggregation_temporality=temporality))


def request(
    metrics: Sequence[Metric], resource: Mapping[str, str | int] | None = None, scope: str = "megatron"
) -> ExportMetricsServiceRequest:
    """One resource (``resource`` attributes; host.name node-0 unless given) with ``metrics`` in one scope."""
    resource = {"host.name": "node-0"} if resource is None else resource
    resource_metrics = ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=list(metrics))])
    resource_metrics.resource.attributes.extend(attributes(resource))
    resource_metrics.scope_metrics[0].scope.name = scope
    return ExportMetricsServiceRequest(resource_metrics=[resource_metrics])


def megatron_interval(
    step_ms: float = 480.0, steps: int = 10, loss: float = 2.31, tokens_per_sec: float = 85_000.0, time_ns: int = 1
) -> list[Metric]:
    """What Megatron's export rank sends for one log interval (delta temporality)."""
    return [
        histogram("megatron.training.step_duration_ms", step_ms * steps, steps, time_ns=time_ns),
        gauge("megatron.training.loss", loss, time_ns),
        gauge("megatron.training.tokens_per_sec", tokens_per_sec, time_ns),
        gauge("megatron.training.throughput_tflops", 390.5, time_ns),
        gauge("megatron.training.grad_norm", 1.25, time_ns),
        gauge("megatron.training.learning_rate", 3e-4, time_ns),
        gauge("megatron.training.memory_allocated_gb", 61.2, time_ns),
    ]
