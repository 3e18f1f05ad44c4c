"""Actions run for real: a command gets the signal's JSON and ``TRAINPULSE_*`` once per cooldown per subject, a
webhook gets the JSON by POST, dry-run runs nothing, and a hanging command's whole process group is killed."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tests.actions.probe import probe, told
from tests.actions.runs import HANG, raised, runner


def test_a_command_is_told_once_per_cooldown_per_signal_and_subject(tmp_path):
    argv, out = probe(tmp_path)
    run, counts = runner({"on": {"signal": HANG}, "run": argv, "cooldown": "10m", "name": "dump"})
    run.offer(raised(1000.0, rank=3), 1000.0)
    run.offer(raised(1060.0, rank=3, severity="critical"), 1060.0)  # escalated within the cooldown
    run.offer(raised(1300.0, rank=3), 1300.0)  # raised again within the cooldown
    run.offer(raised(1310.0, rank=5, pid=5151), 1310.0)  # another subject: its own cooldown
    run.offer(raised(1601.0, rank=3), 1601.0)  # the cooldown is over
    run.close()
    runs = told(out)
    assert [r["env"]["TRAINPULSE_RANK"] for r in runs] == ["3", "5", "3"]
    first = runs[0]
    assert first["env"] == {
        "TRAINPULSE_SIGNAL": HANG,
        "TRAINPULSE_SEVERITY": "warning",
        "TRAINPULSE_CAUSE": "rank_hang",
        "TRAINPULSE_HOSTNAME": "node-7",
        "TRAINPULSE_RANK": "3",
        "TRAINPULSE_GPU_INDEX": "3",
        "TRAINPULSE_PID": "4242",  # the stuck rank's, from the evidence
    }
    assert first["stdin"]["signal"] == HANG and first["stdin"]["subject"] == {"rank": 3, "hostname": "node-7"}
    assert first["stdin"]["cause"]["cause"] == "rank_hang" and first["stdin"]["pid"] == "4242"
    assert first["stdin"]["evidence"]["lagging"][0]["phase"] == "data" and first["stdin"]["action"] == "dump"
    assert runs[1]["env"]["TRAINPULSE_PID"] == "5151"
    assert sorted(counts) == [("dump", "cooldown")] * 2 + [("dump", "ok")] * 3


def test_severity_critical_waits_for_the_escalation(tmp_path):
    argv, out = probe(tmp_path)
    run, counts = runner({"on": {"signal": "*", "severity": "critical"}, "run": argv})
    run.offer(raised(10.0, rank=1), 10.0)
    run.offer(raised(12.0, rank=1, severity="critical"), 12.0)
    run.close()
    assert [r["env"]["TRAINPULSE_SEVERITY"] for r in told(out)] == ["critical"]
    assert len(counts) == 1


def test_a_cause_filter_runs_only_for_that_cause(tmp_path):
    argv, out = probe(tmp_path)
    run, _ = runner(
        {"on": {"signal": HANG, "cause": "rank_hang"}, "run": argv},
        {"on": {"signal": HANG, "cause": "checkpoint_io_bound"}, "run": [*argv[:-1], str(tmp_path / "other")]},
    )
    run.offer(raised(10.0, rank=1), 10.0)
    run.close()
    assert len(told(out)) == 1 and not (tmp_path / "other").exists()


class Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, dict]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Hook.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def hook():
    Hook.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_webhook_gets_the_same_json_by_post(hook):
    run, counts = runner({"on": {"signal": HANG}, "webhook": hook + "/alert?team=ml"})
    run.offer(raised(10.0, rank=2), 10.0)
    run.close()
    [(path, kind, body)] = Hook.received
    assert path == "/alert?team=ml" and kind == "application/json"
    assert (body["signal"], body["rank"], body["hostname"], body["cause"]["cause"]) == (
        HANG,
        "2",
        "node-7",
        "rank_hang",
    )
    assert counts == [(f"webhook:127.0.0.1:{hook.rpartition(':')[2]}", "ok")]


def test_a_webhook_that_refuses_or_is_not_there_fails(hook):
    dead = "http://127.0.0.1:9/nothing-listens-here"
    run, counts = runner({"on": {"signal": HANG}, "webhook": dead, "name": "dead", "timeout": "2s"})
    run.offer(raised(10.0, rank=2), 10.0)
    run.close()
    assert counts == [("dead", "failed")]


def test_dry_run_runs_nothing_and_logs_what_it_would(tmp_path, caplog):
    argv, out = probe(tmp_path)
    run, counts = runner({"on": {"signal": HANG}, "run": argv, "name": "dump"}, dry_run=True)
    with caplog.at_level(logging.INFO, logger="trainpulse_otel.actions"):
        run.offer(raised(10.0, rank=3), 10.0)
        run.close()
    assert not out.exists() and counts == [("dump", "dry_run")]
    [line] = [r.getMessage() for r in caplog.records if "outcome=dry_run" in r.getMessage()]
    assert f"signal={HANG}" in line and '"rank":3' in line and str(argv[1]) in line  # what would have run


def test_a_failing_command_is_counted_failed_with_its_output(tmp_path, caplog):
    run, counts = runner({"on": {"signal": HANG}, "run": ["sh", "-c", "echo no such node >&2; exit 3"], "name": "x"})
    with caplog.at_level(logging.WARNING, logger="trainpulse_otel.actions"):
        run.offer(raised(10.0, rank=3), 10.0)
        run.close()
    assert counts == [("x", "failed")]
    assert any("exit code 3: no such node" in r.getMessage() for r in caplog.records)


def test_a_command_past_its_timeout_is_killed_with_its_process_group(tmp_path):
    argv, out = probe(tmp_path, sleep_s=60)
    run, counts = runner({"on": {"signal": HANG}, "run": argv, "timeout": "1s", "name": "hang"})
    started = time.monotonic()
    run.offer(raised(10.0, rank=3), 10.0)
    assert time.monotonic() - started < 0.5  # offering never waits for the action
    run.close(timeout_s=15)
    assert counts == [("hang", "timeout")]
    [entry] = told(out)
    for pid in (entry["pid"], entry["child"]):  # the command and the child it started: the whole group
        assert wait_for(lambda pid=pid: not alive(pid), timeout_s=5), pid  # (SIGKILL lands in a moment)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_a_full_queue_drops_the_run_and_counts_it(tmp_path):
    argv, out = probe(tmp_path, sleep_s=60)
    run, counts = runner({"on": {"signal": "*"}, "run": argv, "timeout": "1s", "name": "slow"}, queue_size=1)
    run.offer(raised(10.0, rank=0), 10.0)
    assert wait_for(lambda: told(out))  # the worker hangs in the first run
    for rank in (1, 2):  # the second waits in the queue; no room for the third
        run.offer(raised(11.0, rank=rank), 11.0)
    assert counts == [("slow", "dropped")]
    run.close(timeout_s=15)
    assert sorted(counts) == [("slow", "dropped"), ("slow", "timeout"), ("slow", "timeout")]


def wait_for(ready, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not (done := ready()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return done


def test_closing_kills_a_command_still_running(tmp_path):
    argv, out = probe(tmp_path, sleep_s=60)
    run, _ = runner({"on": {"signal": HANG}, "run": argv, "timeout": "5m"})
    run.offer(raised(10.0, rank=3), 10.0)
    assert wait_for(lambda: told(out))
    run.close(timeout_s=0.5)  # a daemon stopping: it leaves no action behind
    [entry] = told(out)
    assert wait_for(lambda: not alive(entry["pid"]) and not alive(entry["child"]), timeout_s=5)
