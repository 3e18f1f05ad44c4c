"""Every destination of TrainPulse's telemetry, as readers and processors for one set of providers.

- Prometheus ``/metrics`` (:mod:`.prometheus`) when ``prometheus.enabled``;
- Datadog-style JSON ``/v1/metrics`` (:mod:`.datadog`), always;
- OTLP push of metrics and events (:mod:`.otlp`) when configured — the
  daemon asks for it; ``snapshot`` and ``top`` do not push.

All are readers on the same MeterProvider as the diagnostic reader, so every
destination sees the same numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.metrics.export import MetricReader

from ..config import ConfigError, Settings
from .datadog import DatadogJson
from .otlp import OtlpExport, build_otlp, resolve_otlp
from .prometheus import PrometheusExposition

log = logging.getLogger(__name__)


@dataclass
class Exports:
    """The pull endpoints' readers and the OTLP push, ready for :func:`~.providers.build_telemetry`."""

    datadog: DatadogJson
    prometheus: PrometheusExposition | None = None
    otlp: OtlpExport = field(default_factory=OtlpExport)

    @property
    def readers(self) -> list[MetricReader]:
        pull = [self.datadog.reader] + ([self.prometheus.reader] if self.prometheus else [])
        return pull + self.otlp.readers

    @property
    def log_processors(self) -> list[LogRecordProcessor]:
        return list(self.otlp.log_processors)


def build_exports(settings: Settings, push: bool = True, environ: Mapping[str, str] | None = None) -> Exports:
    """Readers for ``settings``; with ``push`` also the OTLP exporters the config and ``OTEL_*`` ask for."""
    prometheus = PrometheusExposition() if settings.prometheus.get("enabled", True) else None
    otlp = OtlpExport()
    if push:
        try:
            otlp = build_otlp(resolve_otlp(settings.otlp, environ))
        except (ValueError, RuntimeError) as exc:  # the SDK's exporters reject bad OTEL_* values this way
            raise ConfigError("otlp", str(exc)) from None
        for line in otlp.descriptions:
            log.info("exporting %s", line)
    return Exports(DatadogJson(), prometheus, otlp)
