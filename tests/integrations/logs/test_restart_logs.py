"""A real torchrun job restarted from its checkpoint, seen three ways — its console log followed live by a daemon,
the same log replayed, and its SDK reports to another daemon: each is two attempts, the steps done again are lost
progress and the gap a restart, as long as the job's own stamps say, and goodput adds up.

Three gloo ranks on the CPU (``restart_job.py``): steps of 0.5 s, a checkpoint every 10, rank 1 killed after
step 39 of the first attempt, torchrun's restart, the new group loading step 30's checkpoint and going on to 50:
about 4.5 s of steps done again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.cli.daemons import FollowDaemon, SimDaemon
from tests.exports.receivers import wait_until

pytest.importorskip("torch")  # the job's, in its own processes

#: A real three-process job, started twice by torchrun: run alone, after the parallel pass (scripts/test).
pytestmark = [pytest.mark.serial, pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("restart_job.py")
STEP_S = 0.5  # restart_job.py's step
STEP = re.compile(r"^\[(?P<at>[\d-]+ [\d:,]+)\] step (?P<step>\d+) \|")


def run_job(tmp_path: Path, endpoint: str) -> Path:
    log, state = tmp_path / "job.log", tmp_path / "ckpt"
    state.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
    env.update(CKPT_DIR=str(state), OMP_NUM_THREADS="1", LOGLEVEL="INFO", TRAINPULSE_ENDPOINT=endpoint)
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "3", "--max-restarts", "1"]
    argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29761", str(JOB)]
    with log.open("w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=240)
    assert done.returncode == 0, log.read_text()[-3000:]
    return log


def stamped_steps(log: Path) -> list[tuple[int, float]]:
    """(step, time) of every step line, in order, by the job's own clock."""
    out = []
    for line in log.read_text().splitlines():
        if (m := STEP.match(line)) is not None:
            when = datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f").astimezone()
            out.append((int(m["step"]), when.timestamp()))
    return out


def watched_job(tmp_path: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The job run with a daemon following its log and another taking its SDK reports; the log, and each
    daemon's goodput once the job is done."""
    log = tmp_path / "job.log"
    log.touch()
    sdk = SimDaemon("-interval", "250ms", mode="none")
    follow = FollowDaemon(log, flags=("-interval", "250ms"))
    try:
        follow.reading(log)
        run_job(tmp_path, sdk.url)
        views = {"sdk": sdk, "follow": follow}
        assert wait_until(lambda: all(attempts(d) == 2 for d in views.values()), timeout=15), {
            name: d.get("/v1/snapshot")["diagnosis"]["goodput"] for name, d in views.items()
        }
        time.sleep(1.0)  # the last reports and lines
        return log, {name: d.get("/v1/snapshot")["diagnosis"]["goodput"] for name, d in views.items()}
    finally:
        sdk.stop()
        follow.close()


def attempts(daemon: SimDaemon) -> int:
    goodput = daemon.get("/v1/snapshot")["diagnosis"].get("goodput") or {}
    return len((goodput.get("job") or {}).get("attempts", ()))


def test_a_restarted_job_is_two_attempts_with_its_lost_progress_and_restart_measured(tmp_path):
    log, views = watched_job(tmp_path)
    steps = stamped_steps(log)
    back = next(i for i in range(1, len(steps)) if steps[i][0] < steps[i - 1][0])  # the new attempt's first
    first, second = steps[:back], steps[back:]
    resumed = second[0][0] - 1
    redone_s = first[-1][1] - next(t for s, t in first if s == resumed)  # the first attempt's time past it
    gap_s = second[0][1] - STEP_S - first[-1][1]  # to the new attempt's first step's start: that step is work
    out = subprocess.run(
        [sys.executable, "-m", "trainpulse_otel", "replay", str(log), "-json", "-interval", "250ms"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    views["replay"] = json.loads(out.stdout)["diagnosis"]["goodput"]
    print(f"measured: steps done again {redone_s:.3f} s, gap {gap_s:.3f} s")
    for name, goodput in views.items():
        print(name, json.dumps({k: goodput[k] for k in ("badput_s", "ratio", "wall_s", "job")}))
        # the SDK's last report before the kill may not have left: its view may end a step early
        check(goodput, first, second, redone_s, gap_s, lag=1 if name == "sdk" else 0)


def check(
    goodput: dict[str, Any],
    first: list[tuple[int, float]],
    second: list[tuple[int, float]],
    redone_s: float,
    gap_s: float,
    lag: int,
) -> None:
    """One view's goodput against what the job's own stamps say (``lag``: the steps its last report may miss)."""
    job = goodput["job"]
    (one, two) = [(a["first_step"], a["last_step"], a["end_reason"]) for a in job["attempts"]]
    assert one[0] == first[0][0] and first[-1][0] - lag <= one[1] <= first[-1][0] and one[2] == "failure"
    assert two == (second[0][0], second[-1][0], None)
    assert job["interruptions"] == 1
    badput = goodput["badput_s"]
    assert badput["lost_progress"] == pytest.approx(redone_s, abs=max(1.0, 0.1 * redone_s))
    restart = badput.get("restart", 0.0) + badput.get("checkpoint_load", 0.0)
    assert restart == pytest.approx(gap_s, abs=max(1.0, 0.1 * gap_s))
    assert sum(badput.values()) == pytest.approx((1 - goodput["ratio"]) * goodput["wall_s"], rel=0.01)
