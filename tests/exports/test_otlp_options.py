"""Resolving OTLP export from the config's ``otlp`` block and the standard OTEL_* variables."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import AggregationTemporality, PeriodicExportingMetricReader

from trainpulse_otel.config import ConfigError, load_settings
from trainpulse_otel.telemetry.otlp import OtlpOptions, build_otlp, resolve_otlp
from trainpulse_otel.telemetry.resilience import RateLimitFilter

DELTA, CUMULATIVE = AggregationTemporality.DELTA, AggregationTemporality.CUMULATIVE


def test_nothing_configured_means_no_push():
    assert resolve_otlp(None, {}) is None


def test_an_empty_block_pushes_both_signals_with_the_specification_defaults():
    options = resolve_otlp({}, {})
    assert (options.metrics, options.logs) == (True, True)
    assert options.metrics_protocol == options.logs_protocol == "http/protobuf"
    assert options.signal_endpoint("metrics") == "http://localhost:4318/v1/metrics"
    assert options.signal_endpoint("logs") == "http://localhost:4318/v1/logs"
    assert (options.export_interval_s, options.temporality, options.profile) == (10.0, "cumulative", "default")


@pytest.mark.parametrize(
    ("env", "metrics", "logs"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True, True),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, True, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "none"}, False, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_LOGS_EXPORTER": "none"}, True, False),
        ({"OTEL_METRICS_EXPORTER": "otlp"}, True, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, None, None),
    ],
)
def test_standard_variables_turn_signals_on_and_off(env, metrics, logs):
    options = resolve_otlp(None, env)
    assert ((options.metrics, options.logs) if options else (None, None)) == (metrics, logs)


def test_the_block_turns_events_off_and_none_turns_metrics_off():
    options = resolve_otlp({"logs": False}, {"OTEL_METRICS_EXPORTER": "none"})
    assert options is None


def test_protocol_precedence_block_then_signal_variable_then_generic(caplog):
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"}
    options = resolve_otlp({}, env)
    assert (options.metrics_protocol, options.logs_protocol) == ("grpc", "http/protobuf")
    assert resolve_otlp({"protocol": "http/protobuf"}, env).metrics_protocol == "http/protobuf"
    assert resolve_otlp({}, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}).metrics_protocol == "http/protobuf"
    assert "http/json" in caplog.text and "not supported" in caplog.text


def test_endpoints_follow_the_specification():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9/custom"}
    options = resolve_otlp(None, env)
    assert options.signal_endpoint("metrics") == "http://m:9/custom"  # a signal's own URL is used as is
    assert options.signal_endpoint("logs") == "http://c:4318/v1/logs"  # the base URL gets the signal path
    grpc = resolve_otlp({"endpoint": "http://c:4317", "protocol": "grpc"}, env)
    assert grpc.signal_endpoint("metrics") == "http://c:4317"  # the block wins; gRPC has no path
    assert resolve_otlp({"protocol": "grpc"}, {}).signal_endpoint("logs") == "http://localhost:4317"


@pytest.mark.parametrize(
    ("block", "env", "expected"),
    [
        ({"profile": "datadog"}, {}, "delta"),
        ({"profile": "datadog"}, {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "cumulative"}, "delta"),
        ({"profile": "datadog", "temporality": "cumulative"}, {}, "cumulative"),
        ({}, {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "DELTA"}, "delta"),
        ({}, {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "LowMemory"}, "lowmemory"),
        ({}, {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "sideways"}, "cumulative"),
    ],
)
def test_temporality_comes_from_the_block_the_profile_or_the_standard_variable(block, env, expected):
    assert resolve_otlp(block, env).temporality == expected


def test_export_interval_from_the_block_or_the_standard_variable(caplog):
    assert resolve_otlp({"export_interval": 2.5}, {"OTEL_METRIC_EXPORT_INTERVAL": "60000"}).export_interval_s == 2.5
    assert resolve_otlp({}, {"OTEL_METRIC_EXPORT_INTERVAL": "30000"}).export_interval_s == 30.0
    assert resolve_otlp({}, {"OTEL_METRIC_EXPORT_INTERVAL": "soon"}).export_interval_s == 10.0
    assert "OTEL_METRIC_EXPORT_INTERVAL" in caplog.text


@pytest.mark.parametrize(
    ("temporality", "expected"),
    [
        (
            "delta",
            {
                Counter: DELTA,
                Histogram: DELTA,
                ObservableCounter: DELTA,
                UpDownCounter: CUMULATIVE,
                ObservableUpDownCounter: CUMULATIVE,
                ObservableGauge: CUMULATIVE,
            },
        ),
        (
            "lowmemory",
            {
                Counter: DELTA,
                Histogram: DELTA,
                ObservableCounter: CUMULATIVE,
                UpDownCounter: CUMULATIVE,
                ObservableUpDownCounter: CUMULATIVE,
                ObservableGauge: CUMULATIVE,
            },
        ),
    ],
)
def test_the_reader_asks_the_sdk_for_that_temporality(temporality, expected):
    export = build_otlp(OtlpOptions(temporality=temporality, endpoint="http://127.0.0.1:9", logs=False))
    [reader] = export.readers
    try:
        assert isinstance(reader, PeriodicExportingMetricReader)
        preferred = reader._exporter._preferred_temporality  # what the reader passes on to the SDK
        assert {kind: preferred[kind] for kind in expected} == expected
        assert export.descriptions == [
            (f"OTLP metrics → http://127.0.0.1:9/v1/metrics (http/protobuf, every 10s, {temporality} temporality)")
        ]
    finally:
        reader.shutdown(timeout_millis=1000)


def test_build_otlp_without_options_builds_nothing():
    export = build_otlp(None)
    assert (export.readers, export.log_processors) == ([], [])


def test_bad_otlp_config_values_name_the_key():
    with pytest.raises(ConfigError, match=r"otlp: compression: must be one of none, gzip"):
        load_settings(flags={"otlp": '{"compression": "brotli"}'}, environ={})
    with pytest.raises(ConfigError, match=r"otlp: unknown key 'endpont'"):
        load_settings(flags={"otlp": '{"endpont": "http://c:4318"}'}, environ={})


def test_sdk_export_loggers_are_rate_limited_once_exporters_exist():
    build_otlp(OtlpOptions(endpoint="http://127.0.0.1:9", metrics=False)).log_processors[0].shutdown()
    exporter_logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http._log_exporter")
    assert any(isinstance(f, RateLimitFilter) for f in exporter_logger.filters)
