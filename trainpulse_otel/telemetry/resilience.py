"""Exports that fail quietly and never hold anything up.

A collector that is down, refusing or hanging must not stall a tick, an API
request or shutdown, and must not flood the log. The SDK already exports from
its own threads (the periodic metric reader, the batch log processor); what it
lacks is said here:

- :class:`ExportStatus` logs an exporter's failures with exponential backoff
  (the first failure, then after 1 min, 2 min, 4 min … up to 1 h) and its
  recovery once, instead of once per export;
- :class:`ReportingMetricExporter` and :class:`ReportingLogExporter` wrap the
  OTLP exporters to feed it, and never let an exception escape;
- :func:`quiet_sdk_export_logs` rate-limits the SDK's own exporter chatter (a
  retry warning per attempt, an error per export) to one line per message per
  five minutes, so the reason (``UNAVAILABLE``, ``401``) is still seen once;
- :func:`run_bounded` runs shutdown and flush steps in their own daemon
  threads and gives up on them at a deadline, so ``SIGTERM`` ends in seconds
  even when an export is stuck on a dead socket.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData

log = logging.getLogger(__name__)

Clock = Callable[[], float]

FIRST_REPORT_AFTER_S = 60.0
MAX_REPORT_INTERVAL_S = 3600.0
SDK_LOG_WINDOW_S = 300.0


class ExportStatus:
    """Tracks one exporter's health and logs changes with backoff.

    ``record(False)`` on the first failure logs a warning; while failures
    continue, a reminder is logged after 1 min, then 2, 4, … (at most hourly).
    ``record(True)`` after failures logs the recovery once.
    """

    def __init__(self, what: str, clock: Clock = time.monotonic, logger: logging.Logger = log) -> None:
        self.what = what
        self.failures = 0
        self._clock = clock
        self._log = logger
        self._failing_since = 0.0
        self._next_report = 0.0
        self._backoff = FIRST_REPORT_AFTER_S

    @property
    def healthy(self) -> bool:
        """False while the latest export failed."""
        return self.failures == 0

    def record(self, ok: bool) -> None:
        """Note one export's outcome."""
        now = self._clock()
        if ok:
            if self.failures:
                self._log.info(
                    "%s recovered after %d failed export(s) over %.0fs",
                    self.what,
                    self.failures,
                    now - self._failing_since,
                )
            self.failures = 0
            self._backoff = FIRST_REPORT_AFTER_S
            return
        self.failures += 1
        if self.failures == 1:
            self._failing_since = now
            self._next_report = now + self._backoff
            self._log.warning(
                "%s failed (collector down, refusing or slow?); collection and the API carry on, "
                "exports are retried every interval and failures are logged with backoff",
                self.what,
            )
        elif now >= self._next_report:
            self._backoff = min(self._backoff * 2, MAX_REPORT_INTERVAL_S)
            self._next_report = now + self._backoff
            self._log.warning(
                "%s still failing: %d failed export(s) over %.0fs; next report in %.0fs",
                self.what,
                self.failures,
                now - self._failing_since,
                self._backoff,
            )


class ReportingMetricExporter(MetricExporter):
    """Delegates to an OTLP metric exporter and reports each outcome to an :class:`ExportStatus`.

    It keeps the inner exporter's temporality and aggregation preferences, so
    the periodic reader built around it asks the SDK for exactly those.
    """

    def __init__(self, inner: MetricExporter, status: ExportStatus) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality, preferred_aggregation=inner._preferred_aggregation
        )
        self.inner = inner
        self.status = status

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:  # an exporter bug must not kill the reader thread
            log.debug("metric export raised", exc_info=True)
            result = MetricExportResult.FAILURE
        self.status.record(result is MetricExportResult.SUCCESS)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        """Close the inner exporter (its shutdown aborts a pending retry wait)."""
        self.inner.shutdown()


class ReportingLogExporter(LogRecordExporter):
    """Delegates to an OTLP log exporter and reports each outcome to an :class:`ExportStatus`."""

    def __init__(self, inner: LogRecordExporter, status: ExportStatus) -> None:
        self.inner = inner
        self.status = status

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            result = self.inner.export(batch)
        except Exception:  # an exporter bug must not kill the export thread
            log.debug("log export raised", exc_info=True)
            result = LogRecordExportResult.FAILURE
        self.status.record(result is LogRecordExportResult.SUCCESS)
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        """Close the inner exporter (its shutdown aborts a pending retry wait)."""
        self.inner.shutdown()


# ------------------------------------------------------------- SDK log noise


class RateLimitFilter(logging.Filter):
    """Lets each message template of a logger through at most once per window (WARNING and above)."""

    def __init__(self, window_s: float = SDK_LOG_WINDOW_S, clock: Clock = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._last: dict[tuple[str, int, str], float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.window_s:
                return False
            self._last[key] = now
        return True


#: Loggers of the SDK's export path: exporters, the periodic reader, the batch processor.
SDK_EXPORT_LOGGER_PREFIXES = (
    "opentelemetry.exporter.otlp",
    "opentelemetry.exporter.http",
    "opentelemetry.sdk.metrics._internal.export",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk._logs._internal.export",
)
_QUIET_FILTER = RateLimitFilter()


def quiet_sdk_export_logs() -> None:
    """Rate-limit the export-path loggers that exist now (call after importing the exporters).

    Idempotent. Logger filters see only records logged on that very logger, so
    each existing logger under the prefixes gets the shared filter.
    """
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(SDK_EXPORT_LOGGER_PREFIXES):
            logger = logging.getLogger(name)
            if _QUIET_FILTER not in logger.filters:
                logger.addFilter(_QUIET_FILTER)


# ------------------------------------------------------------ bounded steps


def run_bounded(steps: Mapping[str, Callable[[], object]], timeout_s: float) -> list[str]:
    """Run each step in its own daemon thread; return the names of those not done by the deadline.

    A step stuck on a dead collector is left behind (its thread is a daemon and
    ends when its own export timeout passes, or with the process).
    """
    finished: dict[str, threading.Event] = {}
    for name, step in steps.items():
        done = finished[name] = threading.Event()
        threading.Thread(target=_guarded, args=(name, step, done), name=f"trainpulse-{name}", daemon=True).start()
    deadline = time.monotonic() + timeout_s
    for done in finished.values():
        done.wait(max(0.0, deadline - time.monotonic()))
    return [name for name, done in finished.items() if not done.is_set()]


def _guarded(name: str, step: Callable[[], object], done: threading.Event) -> None:
    try:
        step()
    except Exception:  # a failing exporter must not break shutdown
        log.warning("%s failed", name, exc_info=True)
    finally:
        done.set()
