"""OTel providers: one MeterProvider and one LoggerProvider with a proper Resource.

The in-process :class:`FrameReader` is always attached; exporters (Prometheus,
OTLP) are further readers and log processors on the same providers, so every
destination sees the same instruments.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from opentelemetry._logs import Logger
from opentelemetry.metrics import Meter
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import OTELResourceDetector, Resource

from ..version import __version__
from .instruments import DEFAULT_NAMESPACE, METER_NAME
from .reader import FrameReader
from .resilience import run_bounded

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "trainpulse"
#: How long shutdown (and an explicit flush) may wait for exporters: SIGTERM must end promptly.
SHUTDOWN_TIMEOUT_S = 3.0


def build_resource(extra: Mapping[str, str] | None = None) -> Resource:
    """SDK defaults + ``OTEL_RESOURCE_ATTRIBUTES``/``OTEL_SERVICE_NAME`` + TrainPulse's own.

    The standard variables win over TrainPulse's defaults: a user who sets
    ``host.name`` or ``service.name`` there gets what they set.
    """
    from_env = OTELResourceDetector().detect().attributes
    ours: dict[str, str] = {
        "service.name": DEFAULT_SERVICE_NAME,
        "service.version": __version__,
        "host.name": socket.gethostname(),
        **(extra or {}),
    }
    if os.environ.get("OTEL_SERVICE_NAME"):
        ours.pop("service.name")
    return Resource.create({k: v for k, v in ours.items() if k not in from_env})


@dataclass
class Telemetry:
    """The providers, the meter and logger TrainPulse uses, and the frame reader."""

    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    frame_reader: FrameReader
    namespace: str = DEFAULT_NAMESPACE
    extra_readers: Sequence[MetricReader] = field(default_factory=tuple)
    _closed: bool = field(default=False, repr=False)

    @property
    def meter(self) -> Meter:
        """The ``trainpulse_otel`` meter."""
        return self.meter_provider.get_meter(METER_NAME, __version__)

    @property
    def logger(self) -> Logger:  # the API's Logger: OTel's logs API lives under opentelemetry._logs
        """The ``trainpulse_otel`` logger, for events."""
        return self.logger_provider.get_logger(METER_NAME, __version__)

    def flush(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Push what exporters hold; give up after ``timeout_s`` (a dead collector must not hang us)."""
        return self._bounded(
            "flush",
            {
                "metrics-flush": lambda: self.meter_provider.force_flush(int(timeout_s * 1000)),
                "events-flush": lambda: self.logger_provider.force_flush(int(timeout_s * 1000)),
            },
            timeout_s,
        )

    def shutdown(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Export what is pending and close every reader and processor, within ``timeout_s``.

        Shutting down exports a last time (the periodic reader collects once
        more, the batch processor drains its queue), so no separate flush is
        needed. Metrics and events shut down side by side, each with the whole
        budget; whatever is still stuck on a collector then is dropped.
        """
        if self._closed:
            return True
        self._closed = True
        return self._bounded(
            "shutdown",
            {
                "metrics-shutdown": lambda: self.meter_provider.shutdown(timeout_millis=timeout_s * 1000),
                "events-shutdown": self.logger_provider.shutdown,
            },
            timeout_s,
        )

    @staticmethod
    def _bounded(what: str, steps: Mapping[str, Callable[[], object]], timeout_s: float) -> bool:
        late = run_bounded(steps, timeout_s)
        if late:
            log.warning(
                "telemetry %s did not finish within %gs (%s; collector down or slow?); unsent telemetry is dropped",
                what,
                timeout_s,
                ", ".join(late),
            )
        return not late


def build_telemetry(
    namespace: str = DEFAULT_NAMESPACE,
    readers: Sequence[MetricReader] = (),
    log_processors: Sequence[LogRecordProcessor] = (),
    resource: Resource | None = None,
) -> Telemetry:
    """Wire the providers: the frame reader plus any exporter readers and log processors."""
    resource = resource or build_resource()
    frame_reader = FrameReader(namespace=namespace)
    # No traces run in the daemon, so exemplars would always be empty; skipping them saves ~10% of a collection.
    meter_provider = MeterProvider(
        metric_readers=[frame_reader, *readers],
        resource=resource,
        shutdown_on_exit=False,
        exemplar_filter=AlwaysOffExemplarFilter(),
    )
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    for processor in log_processors:
        logger_provider.add_log_record_processor(processor)
    return Telemetry(meter_provider, logger_provider, frame_reader, namespace, tuple(readers))
