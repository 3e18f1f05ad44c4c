"""The frame in what an OTel SDK reader collected: how tests hold the diagnosis to what the exporters see."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import MetricsData, NumberDataPoint

from trainpulse_otel.samples import Frame
from trainpulse_otel.telemetry.conversion import FrameAssembler
from trainpulse_otel.telemetry.instruments import METER_NAME


def sdk_frame(metrics_data: MetricsData | None, ts: float, prefix: str = "trainpulse.") -> Frame:
    """The frame in what an SDK reader collected: the catalogue instruments of TrainPulse's meter only."""
    assembler = FrameAssembler()
    for resource_metrics in metrics_data.resource_metrics if metrics_data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            if scope_metrics.scope.name != METER_NAME:
                continue
            for metric in scope_metrics.metrics:
                if metric.name.startswith(prefix):
                    for point in metric.data.data_points:
                        if isinstance(point, NumberDataPoint):
                            assembler.add(metric.name[len(prefix) :], point.attributes or {}, point.value)
    return assembler.frame(ts)
