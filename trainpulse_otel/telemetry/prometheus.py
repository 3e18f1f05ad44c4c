"""Prometheus text exposition by the OTel Prometheus exporter, on a private registry.

The reader is one more ``MetricReader`` on TrainPulse's MeterProvider, so
``/metrics`` shows exactly what the diagnosis and OTLP see. Choices:

- a private ``CollectorRegistry``, not prometheus_client's global one, so
  several pipelines (tests, an in-process monitor next to a daemon) coexist;
- no ``otel_scope_*`` labels: everything comes from one meter
  (``trainpulse_otel``), and the labels are then exactly the attributes
  (``trainpulse_signal_active{signal,severity}``);
- resource attributes only in ``target_info`` (``service_name``,
  ``host_name``, …), the OTel-Prometheus convention: join on it in PromQL,
  while Prometheus's own ``job``/``instance`` identify the target;
- the classic text format (``CONTENT_TYPE_LATEST``).
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import ObservableCounter, ObservableGauge
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from .instruments import DEFAULT_MAX_SERIES


class PrometheusExposition:
    """A PrometheusMetricReader on its own registry, rendered on demand."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, max_series: int = DEFAULT_MAX_SERIES) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.reader = PrometheusMetricReader(
            **_supported_options(
                disable_target_info=False,
                scope_info_enabled=False,
                registry=self.registry,
                cardinality_limits={ObservableGauge: max_series, ObservableCounter: max_series},
            )
        )
        # The exporter queues each collection and drains the queue while rendering:
        # two scrapes at once could each see the other's data, so they take turns.
        self._lock = threading.Lock()

    def render(self) -> bytes:
        """Collect now and return the text exposition."""
        with self._lock:
            return generate_latest(self.registry)


def _supported_options(**options: Any) -> dict[str, Any]:
    """The options this version of the exporter accepts (``scope_info_enabled`` is recent).

    Versions without the option add no scope labels at all, which is what it asks for.
    """
    accepted = inspect.signature(PrometheusMetricReader.__init__).parameters
    return {key: value for key, value in options.items() if key in accepted}
