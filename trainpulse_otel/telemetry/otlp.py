"""OTLP push: a metric reader and an event (log) processor from settings and the standard variables.

The config's ``otlp`` block wins where it sets a key; everything it leaves out
keeps its standard ``OTEL_*`` meaning. Endpoints
(``OTEL_EXPORTER_OTLP_[METRICS_|LOGS_]ENDPOINT``), protocols
(``OTEL_EXPORTER_OTLP_[METRICS_|LOGS_]PROTOCOL``), the export interval
(``OTEL_METRIC_EXPORT_INTERVAL``) and temporality
(``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``) are resolved here; the
SDK's exporters read the rest themselves (headers, timeout, compression,
certificates). Export is on when the ``otlp`` block is present, an OTLP
endpoint variable is set, or ``OTEL_METRICS_EXPORTER``/``OTEL_LOGS_EXPORTER``
says ``otlp``; ``none`` there (or ``OTEL_SDK_DISABLED=true``) turns it off.

The Datadog profile asks for delta temporality for Counter, Histogram and
ObservableCounter and keeps UpDownCounters cumulative, as Datadog's OTLP
ingest expects (cumulative sums would be turned into deltas by the per-host
Agent, and the first point of each series dropped). :func:`build_otlp` is what
both the daemon and the in-process monitor call.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import AggregationTemporality, MetricReader, PeriodicExportingMetricReader

from .instruments import DEFAULT_MAX_SERIES
from .resilience import ExportStatus, ReportingLogExporter, ReportingMetricExporter, quiet_sdk_export_logs

log = logging.getLogger(__name__)

GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"
PROTOCOLS = (GRPC, HTTP_PROTOBUF)
DEFAULT_PROTOCOL = HTTP_PROTOBUF  # the specification's default
DEFAULT_EXPORT_INTERVAL_S = 10.0
DATADOG = "datadog"

_DELTA, _CUMULATIVE = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE
_INSTRUMENTS = (Counter, UpDownCounter, Histogram, ObservableCounter, ObservableUpDownCounter, ObservableGauge)
#: Per-instrument temporality for each ``temporality`` value (as the SDK defines the standard preference).
TEMPORALITIES: dict[str, dict[type, AggregationTemporality]] = {
    "cumulative": dict.fromkeys(_INSTRUMENTS, _CUMULATIVE),
    "delta": {
        **dict.fromkeys(_INSTRUMENTS, _CUMULATIVE),
        Counter: _DELTA,
        Histogram: _DELTA,
        ObservableCounter: _DELTA,
    },
    "lowmemory": {**dict.fromkeys(_INSTRUMENTS, _CUMULATIVE), Counter: _DELTA, Histogram: _DELTA},
}
PROFILE_TEMPORALITY = {DATADOG: "delta"}


@dataclass(frozen=True)
class OtlpOptions:
    """Resolved OTLP settings.

    Endpoints, protocols, interval and temporality are resolved here (config,
    then ``environ``); ``None`` fields (headers, timeout, compression,
    insecure) are left to the SDK's exporters, which read ``OTEL_*`` from
    ``os.environ`` — as do certificates.
    """

    metrics: bool = True
    logs: bool = True
    metrics_protocol: str = DEFAULT_PROTOCOL
    logs_protocol: str = DEFAULT_PROTOCOL
    endpoint: str | None = None
    headers: dict[str, str] | None = None
    insecure: bool | None = None
    timeout_s: float | None = None
    compression: str | None = None
    export_interval_s: float = DEFAULT_EXPORT_INTERVAL_S
    temporality: str = "cumulative"
    profile: str = "default"
    max_series: int = DEFAULT_MAX_SERIES
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)

    def signal_endpoint(self, signal: str) -> str:
        """Where ``signal`` (``metrics`` or ``logs``) goes: the gRPC target, or the full OTLP/HTTP URL."""
        protocol = self.metrics_protocol if signal == "metrics" else self.logs_protocol
        base = self.endpoint
        if base is None:
            specific = self.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
            if specific:
                return specific
            base = self.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or (
                "http://localhost:4317" if protocol == GRPC else "http://localhost:4318"
            )
        return base if protocol == GRPC else f"{base.rstrip('/')}/v1/{signal}"


@dataclass
class OtlpExport:
    """What :func:`build_otlp` made: readers and processors to attach, and what they do, in words."""

    readers: list[MetricReader] = field(default_factory=list)
    log_processors: list[LogRecordProcessor] = field(default_factory=list)
    descriptions: list[str] = field(default_factory=list)


# ----------------------------------------------------------------- resolving


def resolve_otlp(config: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> OtlpOptions | None:
    """The OTLP options for the config's ``otlp`` block and the environment; ``None`` when export is off."""
    env = dict(os.environ if environ is None else environ)
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    block = dict(config or {})
    metrics = _signal_wanted("metrics", config is not None, env)
    logs = block.get("logs", True) and _signal_wanted("logs", config is not None, env)
    if not (metrics or logs):
        return None
    profile = block.get("profile", "default")
    return OtlpOptions(
        metrics=metrics,
        logs=logs,
        metrics_protocol=_protocol(block, "METRICS", env),
        logs_protocol=_protocol(block, "LOGS", env),
        endpoint=block.get("endpoint"),
        headers=block.get("headers"),
        insecure=block.get("insecure"),
        timeout_s=block.get("timeout"),
        compression=block.get("compression"),
        export_interval_s=block.get("export_interval") or _interval_from_env(env),
        temporality=block.get("temporality") or PROFILE_TEMPORALITY.get(profile) or _temporality_from_env(env),
        profile=profile,
        environ=env,
    )


def _signal_wanted(signal: str, configured: bool, env: Mapping[str, str]) -> bool:
    chosen = [e.strip().lower() for e in env.get(f"OTEL_{signal.upper()}_EXPORTER", "").split(",") if e.strip()]
    if "none" in chosen:
        return False
    has_endpoint = bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    )
    return configured or has_endpoint or "otlp" in chosen


def _protocol(block: Mapping[str, Any], signal: str, env: Mapping[str, str]) -> str:
    if block.get("protocol"):
        return str(block["protocol"])
    value = (env.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "").strip()
    if not value:
        return DEFAULT_PROTOCOL
    if value not in PROTOCOLS:
        log.warning("OTLP protocol %r is not supported (use grpc or http/protobuf); using %s", value, DEFAULT_PROTOCOL)
        return DEFAULT_PROTOCOL
    return value


def _temporality_from_env(env: Mapping[str, str]) -> str:
    value = env.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip().lower() or "cumulative"
    if value not in TEMPORALITIES:
        log.warning(
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=%r is not one of %s; using cumulative",
            value,
            ", ".join(TEMPORALITIES),
        )
        return "cumulative"
    return value


def _interval_from_env(env: Mapping[str, str]) -> float:
    raw = env.get("OTEL_METRIC_EXPORT_INTERVAL")
    if not raw:
        return DEFAULT_EXPORT_INTERVAL_S
    try:
        seconds = float(raw) / 1000.0
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        log.warning(
            "OTEL_METRIC_EXPORT_INTERVAL=%r is not a positive number of milliseconds; using %gs",
            raw,
            DEFAULT_EXPORT_INTERVAL_S,
        )
        return DEFAULT_EXPORT_INTERVAL_S
    return seconds


# ------------------------------------------------------------------ building


def build_otlp(options: OtlpOptions | None) -> OtlpExport:
    """A periodic OTLP metric reader and a batch OTLP log processor, as ``options`` ask.

    Exporters run in the SDK's own threads; each is wrapped so its failures
    are logged with backoff (see :mod:`.resilience`).
    """
    out = OtlpExport()
    if options is None:
        return out
    if options.metrics:
        endpoint = options.signal_endpoint("metrics")
        status = ExportStatus(f"OTLP metrics export to {endpoint}")
        exporter = ReportingMetricExporter(_metric_exporter(options, endpoint), status)
        limits = {ObservableGauge: options.max_series, ObservableCounter: options.max_series}
        out.readers.append(
            PeriodicExportingMetricReader(
                exporter, export_interval_millis=options.export_interval_s * 1000, cardinality_limits=limits
            )
        )
        out.descriptions.append(
            f"OTLP metrics → {endpoint} ({options.metrics_protocol}, every "
            f"{options.export_interval_s:g}s, {_temporality_words(options)})"
        )
    if options.logs:
        endpoint = options.signal_endpoint("logs")
        status = ExportStatus(f"OTLP events export to {endpoint}")
        out.log_processors.append(
            BatchLogRecordProcessor(ReportingLogExporter(_log_exporter(options, endpoint), status))
        )
        out.descriptions.append(f"OTLP events (logs) → {endpoint} ({options.logs_protocol})")
    quiet_sdk_export_logs()
    return out


def _temporality_words(options: OtlpOptions) -> str:
    profile = f", {options.profile} profile" if options.profile != "default" else ""
    return f"{options.temporality} temporality{profile}"


def _exporter_args(options: OtlpOptions) -> dict[str, Any]:
    return {"headers": options.headers, "timeout": options.timeout_s}


def _metric_exporter(options: OtlpOptions, endpoint: str) -> Any:
    temporality = TEMPORALITIES[options.temporality]
    if options.metrics_protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

        return GrpcMetricExporter(
            endpoint=endpoint,
            insecure=options.insecure,
            compression=_grpc_compression(options.compression),
            preferred_temporality=temporality,
            **_exporter_args(options),
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter

    return HttpMetricExporter(
        endpoint=endpoint,
        compression=_http_compression(options.compression),
        preferred_temporality=temporality,
        **_exporter_args(options),
    )


def _log_exporter(options: OtlpOptions, endpoint: str) -> Any:
    if options.logs_protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

        return GrpcLogExporter(
            endpoint=endpoint,
            insecure=options.insecure,
            compression=_grpc_compression(options.compression),
            **_exporter_args(options),
        )
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter

    return HttpLogExporter(
        endpoint=endpoint, compression=_http_compression(options.compression), **_exporter_args(options)
    )


def _grpc_compression(name: str | None) -> Any:
    if name is None:
        return None
    from grpc import Compression

    return Compression.Gzip if name == "gzip" else Compression.NoCompression


def _http_compression(name: str | None) -> Any:
    if name is None:
        return None
    from opentelemetry.exporter.otlp.proto.http import Compression

    return Compression.Gzip if name == "gzip" else Compression.NoCompression
