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

from ..samples import NodeReport
from .megatron import MegatronMetrics
from .own import OwnInstruments
from .points import HOST_NAME, ResourcePoints, resources
from .series import SeriesState
from .tally import Decoded, Tally

DEFAULT_NAMESPACE = "trainpulse"


def decode_request(
    request: ExportMetricsServiceRequest, series: SeriesState, namespace: str = DEFAULT_NAMESPACE
) -> Decoded:
    """The nodes' reports in ``request``; ``series`` carries delta totals and previous exports between requests."""
    tally = Tally()
    reports = []
    for resource in resources(request):
        if resource.hostname is None:
            if resource.points:
                tally.reject(
                    f"a resource without the {HOST_NAME} attribute names no node of the job: its "
                    f"{len(resource.points)} points were rejected (set {HOST_NAME}, e.g. in OTEL_RESOURCE_ATTRIBUTES)",
                    len(resource.points),
                )
            continue
        report = node_report(resource, resource.hostname, series, namespace, tally)
        if report is not None:
            reports.append(report)
    return tally.decoded(reports)


def node_report(
    resource: ResourcePoints, hostname: str, series: SeriesState, namespace: str, tally: Tally
) -> NodeReport | None:
    """What one resource says of its node: its own instruments' samples, Megatron's training report."""
    own = OwnInstruments(hostname, namespace, series, tally)
    megatron = MegatronMetrics(hostname, resource.attributes, series, tally)
    for point in resource.points:
        if own.understands(point):
            own.add(point)
        elif megatron.understands(point):
            megatron.add(point)
        else:
            tally.ignore(point.metric)
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
        self._lock = threading.Lock()

    def decode(self, request: ExportMetricsServiceRequest) -> Decoded:
        """Decode one request (requests are taken one at a time: their delta totals add up in order)."""
        with self._lock:
            return decode_request(request, self._series, self.namespace)
