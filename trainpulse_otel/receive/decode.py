"""One OTLP request into one :class:`NodeReport` per node, and the account of its points.

Each resource is one node, named by its ``host.name``; a resource without one
cannot be placed in the job, so its points are rejected, and the answer says
so. A resource's points go to whoever understands them — TrainPulse's own
instruments (:mod:`.own`), Megatron-LM's (:mod:`.megatron`) — and the rest
are counted as ignored, by metric name. Pure: no I/O, no clock; the running
totals that delta temporality needs are handed in (:class:`SeriesState`) and
kept, across requests, by :class:`OtlpReceiver`.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import ResourceMetrics

from ..samples import NodeReport
from .attributes import AttributeSets
from .megatron import MegatronMetrics
from .own import NodeLayout, OwnInstruments
from .points import HOST_NAME, Attributes, metric_points, point_count, resource_node, scoped_metrics
from .series import SeriesState
from .tally import Decoded, Tally

DEFAULT_NAMESPACE = "trainpulse"


def decode_request(
    request: ExportMetricsServiceRequest,
    series: SeriesState,
    namespace: str = DEFAULT_NAMESPACE,
    attribute_sets: AttributeSets[NodeLayout] | None = None,
) -> Decoded:
    """The nodes' reports in ``request``; ``series`` carries delta totals and previous exports between requests,
    ``attribute_sets`` the attribute sets already read.

    ``request`` is read through: its points' times and values are zeroed as
    they are read (see :mod:`.attributes`), so hand it a request of its own —
    the transports parse a fresh one for every call, and copying 30 kB of
    points cost as much as parsing them.
    """
    tally = Tally()
    reports = []
    sets = attribute_sets if attribute_sets is not None else AttributeSets()
    for resource_metrics in request.resource_metrics:
        hostname, attributes = resource_node(resource_metrics)
        if hostname is None:
            points = sum(point_count(metric) for _, metric in scoped_metrics(resource_metrics))
            if points:
                tally.reject(
                    f"a resource without the {HOST_NAME} attribute names no node of the job: its "
                    f"{points} points were rejected (set {HOST_NAME}, e.g. in OTEL_RESOURCE_ATTRIBUTES)",
                    points,
                )
            continue
        report = node_report(resource_metrics, hostname, attributes, series, namespace, tally, sets)
        if report is not None:
            reports.append(report)
    return tally.decoded(reports)


def node_report(
    resource_metrics: ResourceMetrics,
    hostname: str,
    attributes: Attributes,
    series: SeriesState,
    namespace: str,
    tally: Tally,
    attribute_sets: AttributeSets[NodeLayout],
) -> NodeReport | None:
    """What one resource says of its node: its own instruments' samples, Megatron's training report.

    Each metric goes, whole, to whoever understands its name (and scope).
    """
    own = OwnInstruments(hostname, namespace, series, tally, attribute_sets)
    megatron = MegatronMetrics(hostname, attributes, series, tally)
    for scope_metrics in resource_metrics.scope_metrics:
        if own.add_scope(scope_metrics):  # a node daemon's export: all of it TrainPulse's own
            continue
        scope = scope_metrics.scope.name
        for metric in scope_metrics.metrics:
            if own.understands(scope, metric.name):
                own.add_metric(metric)
            elif megatron.understands(metric.name):
                for point in metric_points(metric, scope):
                    megatron.add(point)
            else:
                points = point_count(metric)
                if points:
                    tally.ignore(metric.name, points)
    report = own.report()
    training = megatron.sample()
    if training is None:
        return report
    if report is None:
        return NodeReport(hostname, training=training)
    return report if report.training is not None else replace(report, training=training)


class OtlpReceiver:
    """The receiving side's memory across requests, shared by the HTTP and gRPC receivers (thread-safe)."""

    def __init__(self, namespace: str = DEFAULT_NAMESPACE, series: SeriesState | None = None) -> None:
        self.namespace = namespace
        self._series = series or SeriesState()
        self._attribute_sets: AttributeSets[NodeLayout] = AttributeSets()
        self._lock = threading.Lock()

    def decode(self, request: ExportMetricsServiceRequest) -> Decoded:
        """Decode one request, read through (see :func:`decode_request`); requests are taken one at a time:
        their delta totals add up in order."""
        with self._lock:
            return decode_request(request, self._series, self.namespace, self._attribute_sets)
