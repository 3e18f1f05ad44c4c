"""The page recipe of docs/actions.md, for real: a command action running ``python -m
trainpulse_otel.actions.alertmanager`` sends the raised signal to a real Alertmanager, which routes it to a webhook
receiver (this test) — the alert names the signal, the host, the rank and the cause."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from tests.actions.runs import raised, runner
from tests.exports.receivers import free_port
from tests.exports.servers import ALERTMANAGER, Webhook, poll, ready, start

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        ALERTMANAGER is None and not os.environ.get("CI"),
        reason="Debian's prometheus-alertmanager is not installed (.ci/run installs it)",
    ),
]


def test_a_command_action_pages_through_real_alertmanager(tmp_path):
    webhook = Webhook()
    routes = tmp_path / "alertmanager.yml"
    routes.write_text(
        "route: {receiver: test, group_by: [alertname, signal, hostname], group_wait: 0s, group_interval: 1s,"
        " repeat_interval: 1h}\n"
        f'receivers: [{{name: test, webhook_configs: [{{url: "{webhook.url}"}}]}}]\n'
    )
    address = f"127.0.0.1:{free_port()}"
    alertmanager = start(
        [ALERTMANAGER, f"--config.file={routes}", f"--storage.path={tmp_path / 'am'}",
         f"--web.listen-address={address}", "--cluster.listen-address=", "--log.level=warn"],
        tmp_path / "alertmanager.log", tmp_path,
    )  # fmt: skip
    try:
        assert poll(lambda: ready(f"http://{address}"), timeout=30), (tmp_path / "alertmanager.log").read_text()
        page = [sys.executable, "-m", "trainpulse_otel.actions.alertmanager", f"http://{address}"]
        run, counts = runner({"on": {"signal": "*", "severity": "critical"}, "run": page, "name": "page"})
        run.offer(raised(1_764_400_000.0, rank=3, severity="critical"), 1_764_400_000.0)
        run.close(timeout_s=20)
        assert counts == [("page", "ok")]

        def paged() -> list[dict[str, Any]]:
            return [a for a in webhook.alerts() if a["labels"]["alertname"] == "TrainPulseSignalRaised"]

        alerts = poll(paged, timeout=30)
        assert alerts, (tmp_path / "alertmanager.log").read_text()
        labels = alerts[0]["labels"]
        assert labels == {
            "alertname": "TrainPulseSignalRaised",
            "signal": "training_stalled",
            "severity": "critical",
            "hostname": "node-7",
            "rank": "3",
            "gpu_index": "3",
            "cause": "rank_hang",
        }
        assert alerts[0]["status"] == "firing" and "rank 3" in alerts[0]["annotations"]["summary"]
        assert "py-spy" in alerts[0]["annotations"]["description"]
    finally:
        alertmanager.terminate()
        alertmanager.wait(timeout=20)
        webhook.server.shutdown()


def test_alertmanager_refusing_the_alert_fails_the_action(tmp_path):
    page = [sys.executable, "-m", "trainpulse_otel.actions.alertmanager", f"http://127.0.0.1:{free_port()}"]
    run, counts = runner({"on": {"signal": "*"}, "run": page, "name": "page"})
    run.offer(raised(10.0, rank=3), 10.0)
    run.close(timeout_s=20)
    assert counts == [("page", "failed")]
