"""A real page: a daemon with a fault, real Prometheus evaluating collector_config's alert rules, real Alertmanager
routing the alert to a webhook receiver (this test) — the alert names the signal, the host and the rank."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.exports.receivers import free_port
from tests.exports.servers import ALERTMANAGER, Webhook, poll, ready, start, wait_for_line

PROMETHEUS = shutil.which("prometheus")
CONFIG = Path(__file__).resolve().parents[2] / "collector_config"
RULES = CONFIG / "prometheus" / "alerts.yml"
ROUTES = CONFIG / "alertmanager" / "alertmanager.yml"

pytestmark = [
    pytest.mark.e2e,
    #: Skipped where the binaries are missing, except in CI, which installs them (.ci/run): there it fails.
    pytest.mark.skipif(
        (PROMETHEUS is None or ALERTMANAGER is None) and not os.environ.get("CI"),
        reason="Debian's prometheus and prometheus-alertmanager are not installed (.ci/run installs them)",
    ),
]


def test_the_shipped_routes_pass_amtool():
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip(reason="amtool is not installed (it comes with Debian's prometheus-alertmanager)")
    done = subprocess.run([amtool, "check-config", str(ROUTES)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@pytest.fixture
def straggler_daemon() -> Iterator[str]:
    """``trainpulse daemon -mode sim -scenario rank_straggler``: rank 5 on GPU 5 is critical from the first tick."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRAINPULSE_"))}
    argv = ["daemon", "-mode", "sim", "-scenario", "rank_straggler", "-addr", "127.0.0.1:0", "-interval", "250ms"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainpulse_otel", *argv], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        yield wait_for_line(proc, r"API listening on http://(\S+)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)


def test_a_critical_signal_pages_through_real_alertmanager_naming_signal_host_and_rank(straggler_daemon, tmp_path):
    webhook = Webhook()
    # alerts.yml with each rule's `for:` cut to 1 s (the expressions as shipped), so the test waits seconds
    rules = tmp_path / "alerts.yml"
    rules.write_text(re.sub(r"^(\s+for:) \S+$", r"\1 1s", RULES.read_text(), flags=re.MULTILINE))
    routes = tmp_path / "alertmanager.yml"
    routes.write_text(
        "route: {receiver: test, group_by: [alertname, signal, hostname], group_wait: 1s, group_interval: 1s,"
        " repeat_interval: 1h}\n"
        f"receivers: [{{name: test, webhook_configs: [{{url: {json.dumps(webhook.url)}}}]}}]\n"
    )
    am_address, prom_address = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{json.dumps(str(rules))}]\n"
        f"alerting: {{alertmanagers: [{{static_configs: [{{targets: [{json.dumps(am_address)}]}}]}}]}}\n"
        f"scrape_configs: [{{job_name: trainpulse, static_configs: [{{targets: [{json.dumps(straggler_daemon)}]}}]}}]\n"
    )
    alertmanager = start(
        [ALERTMANAGER, f"--config.file={routes}", f"--storage.path={tmp_path / 'am'}",
         f"--web.listen-address={am_address}", "--cluster.listen-address=", "--log.level=warn"],
        tmp_path / "alertmanager.log", tmp_path,
    )  # fmt: skip
    prometheus = start(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address={prom_address}", "--log.level=warn"],
        tmp_path / "prometheus.log", tmp_path,
    )  # fmt: skip
    try:
        assert poll(lambda: ready(f"http://{am_address}"), timeout=30), (tmp_path / "alertmanager.log").read_text()

        def paged() -> list[dict[str, Any]]:  # the straggler's own alert (sync_imbalance, job-level, pages too)
            return [
                a
                for a in webhook.alerts()
                if a["labels"]["alertname"] == "TrainPulseSubjectCritical" and a["labels"]["signal"] == "rank_straggler"
            ]

        alerts = poll(paged, timeout=60)
        assert alerts, (tmp_path / "prometheus.log").read_text()[-2000:]
        labels = {k: v for k, v in alerts[0]["labels"].items() if k in ("signal", "hostname", "rank", "severity")}
        assert labels == {"signal": "rank_straggler", "hostname": "node-000", "rank": "5", "severity": "critical"}
        assert alerts[0]["status"] == "firing"
        assert alerts[0]["annotations"]["summary"] == "TrainPulse: rank_straggler on node-000 rank 5 GPU 5"
    finally:
        for proc in (prometheus, alertmanager):
            proc.terminate()
            proc.wait(timeout=20)
        webhook.server.shutdown()
