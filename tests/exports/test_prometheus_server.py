"""A real Prometheus server scrapes a running daemon in sim mode and loads the alert rules."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.exports.receivers import free_port
from tests.exports.servers import poll, ready, wait_for_line
from trainpulse_otel.diagnose import SIGNALS

PROMETHEUS = shutil.which("prometheus")
RULES = Path(__file__).resolve().parents[2] / "collector_config" / "prometheus" / "alerts.yml"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="prometheus not installed (CI installs Debian's prometheus package through .ci/run)"
    ),
]


@pytest.fixture
def daemon() -> Iterator[str]:
    """``trainpulse daemon -mode sim`` on an ephemeral loopback port; yields its URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRAINPULSE_"))}
    proc = subprocess.Popen(
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
            "250ms",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield wait_for_line(proc, r"API listening on (http://\S+)")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def prometheus(tmp_path: Path, daemon: str) -> Iterator[str]:
    """Prometheus scraping the daemon every second, with collector_config's alert rules; yields its URL."""
    target = urllib.parse.urlparse(daemon).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{json.dumps(str(RULES))}]\n"
        "scrape_configs:\n"
        f"  - job_name: trainpulse\n    static_configs: [{{targets: [{json.dumps(target)}]}}]\n",
        encoding="utf-8",
    )
    address = f"127.0.0.1:{free_port()}"
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address={address}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    url = f"http://{address}"
    try:
        assert poll(lambda: ready(url), timeout=60), (tmp_path / "prometheus.log").read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_prometheus_scrapes_health_and_all_eight_gpus(prometheus):
    health = poll(lambda: _query(prometheus, "trainpulse_health_score"), timeout=60)
    assert health, "Prometheus never stored trainpulse_health_score"
    [series] = health
    assert series["metric"]["job"] == "trainpulse" and 0 <= float(series["value"][1]) <= 100
    assert series["metric"]["status"] in ("healthy", "degraded", "critical")
    gpus = poll(lambda: _nonempty_if(_query(prometheus, "trainpulse_gpu_utilization_percent"), 8), timeout=30)
    assert sorted(int(s["metric"]["gpu_index"]) for s in gpus) == list(range(8))
    assert all(0 <= float(s["value"][1]) <= 100 for s in gpus)
    signals = _query(prometheus, "trainpulse_signal_active")
    assert {s["metric"]["severity"] for s in signals} == {"warning", "critical"} and len(signals) == 2 * len(SIGNALS)
    [target] = _api(prometheus, "/api/v1/targets")["activeTargets"]
    assert target["health"] == "up" and target["lastError"] == ""


def test_prometheus_loads_and_evaluates_the_alert_rules(prometheus):
    def evaluated() -> list[dict[str, Any]]:
        groups = _api(prometheus, "/api/v1/rules")["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        return rules if rules and all(rule.get("lastEvaluation", "").startswith("2") for rule in rules) else []

    rules = poll(evaluated, timeout=30)
    assert {rule["name"] for rule in rules} >= {
        "TrainPulseSignalCritical",
        "TrainPulseSignalActive",
        "TrainPulseHealthDegraded",
        "TrainPulseHealthCritical",
    }
    assert all(rule["health"] == "ok" for rule in rules), [r.get("lastError") for r in rules]


# ------------------------------------------------------------------ helpers


def _api(url: str, path: str) -> Any:
    with urllib.request.urlopen(url + path, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]


def _query(url: str, promql: str) -> list[dict[str, Any]]:
    data = _api(url, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    return data["result"]


def _nonempty_if(result: list, size: int) -> list:
    return result if len(result) == size else []
