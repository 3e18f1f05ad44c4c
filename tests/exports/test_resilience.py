"""A collector that is down, refusing, hanging or coming back: logged with backoff, never stalling anything."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from tests.exports.receivers import GrpcReceiver, HangingServer, HttpReceiver, free_port, wait_until
from trainpulse_otel.telemetry.resilience import ExportStatus, RateLimitFilter, run_bounded

RESILIENCE_LOGGER = "trainpulse_otel.telemetry.resilience"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ----------------------------------------------------------------- pure parts


def test_export_status_logs_first_failure_then_with_backoff_then_recovery(caplog):
    clock = FakeClock()
    status = ExportStatus("OTLP metrics export to x", clock=clock)
    caplog.set_level(logging.INFO, logger=RESILIENCE_LOGGER)
    reports = []
    for second in range(400):  # one failed export a second for 400 s
        clock.now = 1000.0 + second
        status.record(False)
        reports.extend(second for r in caplog.records[len(reports) :] if r.levelno == logging.WARNING)
    assert reports == [0, 60, 180]  # first failure, then after 1 min, then 2 min later (next would be at 420)
    assert "still failing: 61 failed export(s) over 60s" in caplog.records[1].getMessage()
    assert not status.healthy
    status.record(True)
    assert caplog.records[-1].levelno == logging.INFO
    assert caplog.records[-1].getMessage() == "OTLP metrics export to x recovered after 400 failed export(s) over 399s"
    assert status.healthy and status.failures == 0


def test_rate_limit_filter_passes_each_message_once_per_window():
    clock = FakeClock()
    quiet = RateLimitFilter(window_s=300, clock=clock)

    def record(msg: str, level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord("opentelemetry.exporter.x", level, __file__, 1, msg, ("arg",), None)

    assert quiet.filter(record("Transient error %s, retrying"))
    assert not quiet.filter(record("Transient error %s, retrying"))
    assert quiet.filter(record("Failed to export %s"))  # a different message still gets through once
    assert quiet.filter(record("debug detail %s", logging.DEBUG)) and quiet.filter(
        record("debug detail %s", logging.DEBUG)
    )
    clock.now += 301
    assert quiet.filter(record("Transient error %s, retrying"))


def test_run_bounded_gives_up_on_a_stuck_step_and_survives_a_failing_one(caplog):
    release = threading.Event()
    done = []
    started = time.monotonic()
    late = run_bounded({"stuck": release.wait, "broken": lambda: 1 / 0, "quick": lambda: done.append(1)}, 0.3)
    assert late == ["stuck"] and done == [1]
    assert time.monotonic() - started < 2.0
    assert any("broken failed" in r.getMessage() for r in caplog.records)
    release.set()


# ------------------------------------------------------------ real failures


def _drive(engine, seconds: float) -> float:
    """Tick for ``seconds`` (as the daemon would, every 50 ms); return the slowest tick."""
    slowest, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        engine.tick()
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.05)
    return slowest


def _failure_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == RESILIENCE_LOGGER and r.levelno == logging.WARNING]


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("collector", ["refusing", "hanging"])
def test_a_dead_collector_stalls_neither_ticks_nor_shutdown(protocol, collector, make_engine, caplog):
    hanging = HangingServer() if collector == "hanging" else None
    endpoint = hanging.endpoint if hanging else f"http://127.0.0.1:{free_port()}"
    try:
        engine = make_engine(
            "sim", otlp={"endpoint": endpoint, "protocol": protocol, "export_interval": 0.1, "timeout": 2}
        )
        slowest = _drive(engine, 2.5)  # past the first export's timeout, so a hang is seen as a failure
        assert slowest < 1.0  # an export stuck for 2 s never shows in a tick
        assert engine.window.latest is not None and engine.ticks >= 10
        started = time.monotonic()
        engine.close()
        assert time.monotonic() - started < 4.5  # shutdown gives up after 3 s
    finally:
        if hanging:
            hanging.close()
    warnings = _failure_warnings(caplog)
    assert len([w for w in warnings if "OTLP metrics export" in w and "failed (collector" in w]) == 1
    assert not [w for w in warnings if "still failing" in w]  # next reminder only after a minute
    sdk_noise = [r for r in caplog.records if r.name.startswith("opentelemetry.") and r.levelno >= logging.WARNING]
    assert len(sdk_noise) <= 6  # one line per distinct SDK message, not one per export or retry


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_collector_that_comes_back_gets_the_data_and_recovery_is_logged(protocol, make_engine, caplog):
    caplog.set_level(logging.INFO, logger=RESILIENCE_LOGGER)
    port = free_port()
    engine = make_engine(
        "sim", otlp={"endpoint": f"http://127.0.0.1:{port}", "protocol": protocol, "export_interval": 0.2, "timeout": 1}
    )
    assert wait_until(lambda: any("failed (collector" in w for w in _failure_warnings(caplog)), timeout=10)
    receiver = GrpcReceiver(port) if protocol == "grpc" else HttpReceiver(port)
    try:
        assert wait_until(lambda: (engine.tick(), bool(receiver.received.metrics))[1], timeout=20, step=0.2)
        assert "trainpulse.gpu.utilization" in receiver.received.metric_names()
        assert wait_until(lambda: any("recovered after" in r.getMessage() for r in caplog.records), timeout=5), [
            (r.name, r.getMessage()) for r in caplog.records
        ]
        engine.close()
    finally:
        receiver.close()


@pytest.mark.e2e
def test_sigterm_ends_the_daemon_promptly_while_the_collector_hangs(tmp_path):
    hanging = HangingServer()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRAINPULSE_"))}
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=hanging.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_METRIC_EXPORT_INTERVAL="200",
        OTEL_EXPORTER_OTLP_TIMEOUT="30",
    )
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainpulse_otel",
            "daemon",
            "-mode",
            "sim",
            "-addr",
            "127.0.0.1:0",
            "-interval",
            "100ms",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = _api_url(daemon)
        time.sleep(1.0)  # a few exports are now stuck on the hanging collector
        for path in ("/healthz", "/metrics", "/v1/metrics"):
            started = time.monotonic()
            with urllib.request.urlopen(url + path, timeout=5) as response:
                assert response.status == 200
            assert time.monotonic() - started < 2.0
        started = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=15) == 0
        assert time.monotonic() - started < 6.0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        hanging.close()


def _api_url(daemon: subprocess.Popen) -> str:
    """Read the daemon's log until it says where the API listens."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = daemon.stderr.readline()
        match = re.search(r"API listening on (http://\S+)", line)
        if match:
            return match.group(1)
        if not line and daemon.poll() is not None:
            break
    raise AssertionError("the daemon did not start its API")
