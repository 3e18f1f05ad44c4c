"""``-state-dir``: a real daemon stopped and started again mid-job continues the job's life (attempts, goodput,
ETTR) with nothing counted twice; a state file of another job, or a damaged one, is set aside, never fatal."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.daemons import SimDaemon
from trainpulse_otel.diagnose.goodput import CARRY_STEPS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STEP_S = 0.1


def at_most(steps: int, ideal_s: float) -> float:
    """The most productive time ``steps`` may show: the open wall time no report has claimed yet (at most
    :data:`CARRY_STEPS` ideal steps) counts as productive till one does, and ``ratio`` is rounded to 4 places."""
    return (steps + CARRY_STEPS) * ideal_s * 1.001


def run_steps(daemon: SimDaemon, steps: range) -> None:
    """Report ``steps`` as a training loop does, one every :data:`STEP_S` (100 ms steps)."""
    for step in steps:
        body = {"timestamp": time.time(), "global_step": step, "step_time_ms": 1000 * STEP_S, "world_size": 1}
        assert daemon.post("/v1/training", body) == 202
        time.sleep(STEP_S)


def job_block(daemon: SimDaemon, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The snapshot's goodput, once its ``job`` block is ``ready``."""
    snap = daemon.snapshot_when(
        lambda s: bool((s["diagnosis"].get("goodput") or {}).get("job")) and ready(s["diagnosis"]["goodput"])
    )
    return snap["diagnosis"]["goodput"]


def daemon_keeping(start: Callable[..., SimDaemon], state_dir: Path, job_id: str = "job-7") -> SimDaemon:
    return start("-interval", "200ms", "-state-dir", str(state_dir), "-job-id", job_id, mode="none")


def test_a_daemon_restarted_mid_job_continues_the_life_with_nothing_counted_twice(start, tmp_path):
    first = daemon_keeping(start, tmp_path)
    run_steps(first, range(1, 41))
    before = job_block(first, lambda g: g["job"]["attempts"][0]["last_step"] == 40)
    first.stop()  # SIGTERM: the state written once more as it stops
    envelope = json.loads((tmp_path / "trainpulse-state.json").read_text())
    assert (envelope["format"], envelope["version"], envelope["job_id"]) == ("trainpulse.job-life", 1, "job-7")
    assert not [p.name for p in tmp_path.iterdir() if p.name != "trainpulse-state.json"]  # no temporary left

    down_s = 2.0  # the job goes on while no daemon watches: steps 41-60 are never reported
    time.sleep(down_s)
    second = daemon_keeping(start, tmp_path)
    assert second.logged("job life continued from")
    run_steps(second, range(61, 101))
    after = job_block(second, lambda g: g["job"]["attempts"][0]["last_step"] == 100)

    (attempt,) = after["job"]["attempts"]  # one attempt: the daemon's restart is not the job's
    began = before["job"]["attempts"][0]
    assert (attempt["first_step"], attempt["start"]) == (began["first_step"], began["start"])
    assert after["job"]["interruptions"] == 0
    ideal_s = after["ideal_step_time_ms"] / 1000.0
    productive = after["ratio"] * after["wall_s"]
    assert after["wall_s"] > before["wall_s"] + down_s  # the wall time runs on from the first daemon's first report
    assert productive <= at_most(100, ideal_s)  # no step counted twice …
    assert productive >= 0.8 * 100 * ideal_s  # … and the steps nobody saw reported are not lost
    assert sum(after["badput_s"].values()) == pytest.approx(after["wall_s"] - productive, rel=0.01, abs=0.05)
    assert after["job"]["ettr"] == pytest.approx(productive / after["wall_s"], abs=0.05)


def test_another_job_s_state_is_set_aside_and_the_daemon_starts_a_fresh_life(start, tmp_path):
    first = daemon_keeping(start, tmp_path, "job-7")
    run_steps(first, range(1, 21))
    job_block(first, lambda g: g["job"]["attempts"][0]["last_step"] == 20)
    first.stop()
    other = daemon_keeping(start, tmp_path, "job-8")
    assert other.logged("set aside as trainpulse-state.json.foreign-") and other.logged("not 'job-8'")
    run_steps(other, range(500, 520))
    fresh = job_block(other, lambda g: g["job"]["attempts"][0]["last_step"] == 519)
    assert fresh["job"]["attempts"][0]["first_step"] in (500, 501) and fresh["wall_s"] < 10  # not job-7's steps
    assert any(p.name.startswith("trainpulse-state.json.foreign-") for p in tmp_path.iterdir())


def test_a_damaged_state_file_is_set_aside_with_a_clear_message(start, tmp_path):
    (tmp_path / "trainpulse-state.json").write_text('{"format": "trainpulse.job-life", "version": 1, "life": {')
    daemon = daemon_keeping(start, tmp_path)
    assert daemon.logged("set aside as trainpulse-state.json.corrupt-") and daemon.logged("it is not JSON")
    run_steps(daemon, range(1, 21))
    assert job_block(daemon, lambda g: g["job"]["attempts"][0]["last_step"] == 20)["job"]["interruptions"] == 0


def test_a_daemon_killed_outright_continues_from_its_last_write(start, tmp_path):
    """SIGKILL: no last write as it stops; the next daemon continues from the periodic one (every 10 s), and the
    steps reported since it count once, with the next report."""
    first = daemon_keeping(start, tmp_path)
    state = tmp_path / "trainpulse-state.json"
    run_steps(first, range(1, 121))  # 12 s of steps: at least one periodic write
    assert state.is_file()
    saved = json.loads(state.read_text())["life"]["life"]["attempts"]["attempts"][0]["last_step"]
    first.proc.kill()
    first.proc.wait()
    second = daemon_keeping(start, tmp_path)
    assert second.logged("job life continued from")
    run_steps(second, range(121, 161))
    after = job_block(second, lambda g: g["job"]["attempts"][0]["last_step"] == 160)
    (attempt,) = after["job"]["attempts"]
    assert attempt["first_step"] <= 2 and 0 < saved <= 120
    productive = after["ratio"] * after["wall_s"]
    assert productive <= at_most(160, after["ideal_step_time_ms"] / 1000.0)  # nothing counted twice
    assert sum(after["badput_s"].values()) == pytest.approx(after["wall_s"] - productive, rel=0.01, abs=0.05)
