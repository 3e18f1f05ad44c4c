"""The REST destination against real waitress servers: a TrainPulse daemon, a down one, a slow one."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from tests.integrations.monitor.fakes import Recorder
from trainpulse_otel import TrainingMonitor
from trainpulse_otel.integrations.monitor.sender import RestSender

pytestmark = pytest.mark.e2e


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_monitor_reports_reach_the_daemon_and_its_diagnosis(served):
    monitor = TrainingMonitor(model_name="rest", endpoint=served.url, interval=0.05, hardware="none")
    try:
        for _ in range(5):
            with monitor.step(tokens=64, samples=2):
                time.sleep(0.002)
        monitor.flush()
        served.engine.tick()
        _, snapshot = served.get_json("/v1/snapshot")
        assert snapshot["training"]["model_name"] == "rest" and snapshot["training"]["global_step"] == 5
        assert set(monitor.diagnosis()) == {"health", "signals", "root_causes", "goodput"}
    finally:
        monitor.close()
    assert monitor.stats["sent"] >= 1 and monitor.stats["dropped"] == 0


def test_bearer_token_from_the_environment(monkeypatch):
    monkeypatch.setenv("TRAINPULSE_AUTH_TOKEN", "s3cret")
    with Recorder(lambda r: ("202 Accepted", b"{}")) as daemon:
        monkeypatch.setenv("TRAINPULSE_ENDPOINT", daemon.url)
        monitor = TrainingMonitor(interval=3600, hardware="none")
        with monitor.step(tokens=1):
            pass
        monitor.close()
        assert monitor.endpoint == daemon.url
        assert [r["path"] for r in daemon.requests] == ["/v1/training", "/v1/training"]
        assert all(r["auth"] == "Bearer s3cret" for r in daemon.requests)
        heartbeat, report = sorted(daemon.requests, key=lambda r: "global_step" in r["json"])
        assert report["json"]["global_step"] == 1
        # closing sends the rank's last heartbeat: done with step 1, idle
        (rank,) = heartbeat["json"]["ranks"]
        assert (rank["rank"], rank["global_step"], rank["phase"]) == (0, 1, "idle") and rank["pid"] > 0


def test_daemon_down_the_loop_carries_on_and_drops_are_counted():
    monitor = TrainingMonitor(
        endpoint=f"http://127.0.0.1:{closed_port()}", interval=0.01, hardware="none", queue_size=4, timeout_s=0.5
    )
    start = time.perf_counter()
    for _ in range(30):
        with monitor.step(tokens=1):
            time.sleep(0.005)
    loop_s = time.perf_counter() - start
    assert wait_for(lambda: monitor.stats["dropped"] > 0)  # reports kept coming; the queue holds 4
    monitor.close()
    stats = monitor.stats
    assert stats["sent"] == 0 and stats["send_errors"] >= 1 and stats["queued"] == 0
    assert stats["dropped"] >= 1
    assert loop_s < 30 * 0.005 + 0.5  # no step waited for the dead endpoint


def test_slow_daemon_never_blocks_submit():
    release = threading.Event()

    def slow(_request):
        release.wait(5)
        return "202 Accepted", b"{}"

    with Recorder(slow) as daemon:
        sender = RestSender(daemon.url, queue_size=2, timeout_s=5)
        try:
            start = time.perf_counter()
            for i in range(10):
                sender.submit({"step_time_ms": float(i)})
            submit_s = time.perf_counter() - start
            assert sender.stats["dropped"] >= 7  # at most one in flight and two queued
        finally:
            release.set()
        assert submit_s < 1.0  # blocking would take the daemon's 5 s: well apart from a loaded machine's jitter
        assert sender.wait_idle(5)
        sender.close()
        sent = [r["json"]["step_time_ms"] for r in daemon.requests]
        assert sent[-2:] == [8.0, 9.0]  # the newest survive
        assert sender.stats["sent"] + sender.stats["dropped"] == 10


def test_rejected_reports_are_counted_not_retried(served):
    sender = RestSender(served.url)
    sender.submit({"step_time_ms": -5})
    sender.submit({"step_time_ms": 5})
    assert sender.wait_idle(5)
    sender.close()
    assert sender.stats["rejected"] == 1 and sender.stats["sent"] == 1 and sender.stats["send_errors"] == 0


def test_a_daemon_that_comes_back_gets_the_queued_reports():
    failing = {"left": 2}

    def flaky(_request):
        if failing["left"]:
            failing["left"] -= 1
            return "503 Service Unavailable", b"{}"
        return "202 Accepted", b"{}"

    with Recorder(flaky) as daemon:
        sender = RestSender(daemon.url)
        sender.submit({"step_time_ms": 1.0})
        assert wait_for(lambda: sender.stats["sent"] == 1, timeout=5)  # after two retries with backoff
        sender.close()
        assert sender.stats["send_errors"] == 2 and len(daemon.requests) == 3


def test_bad_endpoint_is_a_configuration_error():
    with pytest.raises(ValueError, match="endpoint"):
        RestSender("ftp://example")
