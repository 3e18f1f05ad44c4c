"""``trainpulse daemon -actions …`` end to end: a real sim daemon on loopback raises a fault and runs a real command
with the signal's JSON and ``TRAINPULSE_*``, logs it and counts it in ``/metrics``; with ``-actions-dry-run`` the
same daemon runs nothing and says what it would."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.actions.probe import probe, told
from tests.cli.daemons import SimDaemon
from tests.exports.receivers import wait_until

pytestmark = pytest.mark.e2e

#: The fault begins 2 s after a 20 s virtual-time warm-up; throughput_collapse is raised ~3 s after it.
FAULT = ("-scenario", "throughput_collapse", "-warmup", "20s", "-onset", "22s", "-interval", "0.5s")


def daemon_with(tmp_path, *flags: str) -> tuple[SimDaemon, object]:
    argv, out = probe(tmp_path)
    action = [{"on": {"signal": "throughput_collapse"}, "run": argv, "name": "probe", "timeout": "10s"}]
    return SimDaemon(*FAULT, "-actions", json.dumps(action), *flags), out


def test_the_daemon_runs_a_command_when_the_fault_is_raised(tmp_path):
    daemon, out = daemon_with(tmp_path)
    try:
        assert wait_until(lambda: told(out), timeout=30), daemon.lines
        [run] = told(out)
        assert run["env"]["TRAINPULSE_SIGNAL"] == "throughput_collapse" and run["env"]["TRAINPULSE_SEVERITY"]
        assert run["env"]["TRAINPULSE_CAUSE"] and run["stdin"]["cause"]["cause"] == run["env"]["TRAINPULSE_CAUSE"]
        assert run["stdin"]["evidence"]["baseline_tokens_per_sec"] > run["stdin"]["evidence"]["tokens_per_sec"]
        assert wait_until(lambda: daemon.logged("action probe signal=throughput_collapse"), timeout=10)
        with urllib.request.urlopen(daemon.url + "/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
        assert 'trainpulse_actions_total{action="probe",outcome="ok"} 1.0' in metrics
    finally:
        daemon.stop()


def test_dry_run_runs_nothing_and_logs_what_it_would(tmp_path):
    daemon, out = daemon_with(tmp_path, "-actions-dry-run")
    try:
        assert wait_until(lambda: daemon.logged("outcome=dry_run"), timeout=30), daemon.lines
        assert not out.exists()
        [line] = [line for line in daemon.lines if "outcome=dry_run" in line]
        assert "action probe signal=throughput_collapse" in line and "would run" in line and "probe.py" in line
    finally:
        daemon.stop()
