"""The in-process metric reader that feeds the diagnostic window.

:class:`FrameReader` is an OTel ``MetricReader`` pulled once per tick: the SDK
runs every observable callback, hands back ``MetricsData``, and the reader turns
the catalogue's points into a :class:`~trainpulse_otel.samples.Frame` for the
engine's step. This is the diagnostic stage's only view of the
world, so Prometheus, OTLP and the diagnosis all see the same numbers.
Instruments outside the catalogue — notably the diagnosis TrainPulse publishes
itself — are ignored, so outputs never loop back into inputs.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import ObservableCounter, ObservableGauge
from opentelemetry.sdk.metrics.export import MetricReader, MetricsData, NumberDataPoint

from ..samples import Frame
from .assembly import FrameAssembler
from .instruments import DEFAULT_MAX_SERIES, DEFAULT_NAMESPACE, METER_NAME


class FrameReader(MetricReader):
    """A MetricReader that builds one Frame per collection."""

    def __init__(self, namespace: str = DEFAULT_NAMESPACE, max_series: int = DEFAULT_MAX_SERIES) -> None:
        super().__init__(cardinality_limits={ObservableGauge: max_series, ObservableCounter: max_series})
        self._prefix = namespace + "."
        self._ts = 0.0
        self._frame: Frame | None = None

    def read(self, ts: float) -> Frame:
        """Collect now and return the frame, stamped ``ts`` (the tick's time)."""
        self._ts = ts
        self._frame = None
        self.collect()
        return self._frame if self._frame is not None else Frame(ts=ts)

    def _receive_metrics(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> None:
        self._frame = frame_from_metrics(metrics_data, self._ts, self._prefix)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        """Nothing to release: each frame is returned by the read that built it."""


def frame_from_metrics(metrics_data: MetricsData | None, ts: float, prefix: str = DEFAULT_NAMESPACE + ".") -> Frame:
    """Turn collected MetricsData into a Frame (catalogue instruments of TrainPulse's meter only)."""
    assembler = FrameAssembler()
    for resource_metrics in metrics_data.resource_metrics if metrics_data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            if scope_metrics.scope.name != METER_NAME:
                continue
            for metric in scope_metrics.metrics:
                if not metric.name.startswith(prefix):
                    continue
                suffix = metric.name[len(prefix) :]
                for point in metric.data.data_points:
                    if isinstance(point, NumberDataPoint):
                        assembler.add(suffix, point.attributes or {}, point.value)
    return assembler.frame(ts)
