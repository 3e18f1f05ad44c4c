"""``trainpulse daemon -follow`` as a user runs it: a real daemon on loopback following real files.

Each test appends real lines (tests/fixtures/logs, their sources in SOURCES.md) to files the daemon follows
and reads the diagnosis back over HTTP, timing what the issue promises: within 5 s of the line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.cli.daemons import PROMISED_S, FollowDaemon
from tests.collect.follow_lines import MEGATRON, NAN_ITERATIONS, WATCHDOG

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
#: The old form of NCCL's watchdog line, rank 3 of eight V100s (tests/fixtures/logs/SOURCES.md).
OLD_WATCHDOG = (FIXTURES / "failures" / "2022_old_form_eight_v100.txt").read_text().splitlines()[1]


@pytest.fixture
def follow_daemon():
    started: list[FollowDaemon] = []

    def start(*patterns: Path | str, flags: tuple[str, ...] = ()) -> FollowDaemon:
        started.append(FollowDaemon(*patterns, flags=flags))
        return started[-1]

    yield start
    for daemon in started:
        daemon.close()


def append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_a_nan_iteration_appended_is_nonfinite_loss_within_five_seconds(tmp_path, follow_daemon):
    log = tmp_path / "train.log"
    log.write_text(NAN_ITERATIONS[0] + "\n")  # history: read from the end, so this NaN is not news
    daemon = follow_daemon(log)
    daemon.reading(log)
    time.sleep(2.5)
    assert not any(s["name"] == "nonfinite_loss" for s in daemon.get("/v1/snapshot")["diagnosis"]["signals"])
    append(log, NAN_ITERATIONS[1] + "\n")
    signal, took = daemon.signal_within("nonfinite_loss")
    assert took < PROMISED_S and signal["evidence"]["field"] == "loss", signal
    snap = daemon.get("/v1/snapshot")
    assert snap["mode"] == "none" and snap["collectors"] == ["follow"] and snap["training"]["global_step"] == 5427
    metrics = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
    assert 'trainpulse_logs_records_total{kind="report",source="follow"} 1.0' in metrics


@pytest.mark.parametrize("rotation", ["rename", "copytruncate"])
def test_after_a_rotation_a_watchdog_timeout_in_the_new_file_is_collective_timeout_naming_the_rank(
    tmp_path, follow_daemon, rotation
):
    log = tmp_path / "train.log"
    log.write_text("")
    daemon = follow_daemon(log)
    daemon.reading(log)
    append(log, "\n".join(MEGATRON[:3]) + "\n")
    daemon.snapshot_when(lambda s: (s["training"] or {}).get("global_step") == 45, timeout=10)
    if rotation == "rename":
        os.rename(log, tmp_path / "train.log.1")  # logrotate's default: the job reopens its file
        log.write_text("")
    else:
        with log.open("r+") as fh:  # logrotate's copytruncate: the job writes on to the same file
            fh.truncate(0)
    append(log, WATCHDOG + "\n")
    signal, took = daemon.signal_within("collective_timeout")
    assert took < PROMISED_S
    assert signal["subject"] == {"ranks": [1]}
    assert signal["evidence"]["lines"] == [f"{log}:1"] and "SeqNum=808" in signal["evidence"]["line"]


def test_a_file_that_appears_after_start_up_is_read_and_a_missing_one_is_logged_once(tmp_path, follow_daemon):
    logs = tmp_path / "logs"
    daemon = follow_daemon(logs / "rank*.log", tmp_path / "never.log", flags=("-interval", "250ms"))
    time.sleep(3.0)  # several looks at the patterns
    assert daemon.get("/healthz")["status"] == "ok"
    logs.mkdir()
    rank3 = logs / "rank3.log"
    append(rank3, "NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n" + OLD_WATCHDOG + "\n")
    signal, _ = daemon.signal_within("collective_timeout")
    assert signal["subject"] == {"ranks": [3]} and signal["evidence"]["lines"] == [f"{rank3}:2"]
    missing = [line for line in daemon.lines if "matches no file" in line]
    assert len(missing) == 2 and any(str(tmp_path / "never.log") in line for line in missing)
    assert daemon.get("/healthz")["status"] == "ok" and daemon.proc.poll() is None


def test_a_half_written_line_waits_for_its_end(tmp_path, follow_daemon):
    log = tmp_path / "rank1.log"
    log.write_text("")
    daemon = follow_daemon(log, flags=("-interval", "250ms"))
    daemon.reading(log)
    half = len(WATCHDOG) // 2
    append(log, WATCHDOG[:half])
    time.sleep(0.5)  # two ticks read the half; less than the quiet second that would take it as it is
    append(log, WATCHDOG[half:] + "\n")
    signal, _ = daemon.signal_within("collective_timeout")
    assert signal["evidence"]["line"] == WATCHDOG and signal["evidence"]["count"] == 1  # one line, whole


def test_a_bad_follow_value_is_one_line_and_exit_2():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "trainpulse_otel", "daemon", "-mode", "none", "-follow", "a.log,,b.log"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("trainpulse: config error: follow: must be paths or globs")
