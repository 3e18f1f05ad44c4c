"""A real gloo job on the CPU, its console output in a file a real daemon follows: its loss diverges → nonfinite_loss.

The job (``megatron_job.py``: two ranks, gradients all-reduced, the last rank printing Megatron-LM's iteration
line each step, both ranks' output in one file as ``torchrun … > train.log 2>&1`` leaves it) really diverges:
from step ``DIVERGE_AT`` its learning rate is 1e12, its loss overflows to ``INF`` and then NaN, which Megatron's
line shows by leaving ``lm loss`` out. The daemon (``-mode none -follow train.log``) is told nothing else.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.daemons import PROMISED_S, FollowDaemon
from tests.exports.receivers import wait_until

pytest.importorskip("torch")  # the job's, in its own processes

#: A real two-process job timed against the promise: run alone, after the parallel pass (scripts/test).
pytestmark = [pytest.mark.serial, pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("megatron_job.py")
WORLD, STEPS, DIVERGE_AT, STEP_S = 2, 80, 40, 0.25


def nonfinite(line: str) -> bool:
    """Whether a printed iteration line has a loss that is not a number: ``INF``, or none at all (NaN)."""
    return " iteration " in line and ("lm loss: INF" in line or "lm loss:" not in line)


def test_a_real_job_whose_loss_diverges_is_nonfinite_loss_from_its_console_log(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    daemon = FollowDaemon(log)
    ranks: list[subprocess.Popen] = []
    try:
        daemon.reading(log)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINPULSE_", "OTEL_"))}
        argv = [str(tmp_path / "store"), "--steps", str(STEPS), "--diverge-at", str(DIVERGE_AT), "--step-s"]
        with log.open("a") as out:
            ranks = [
                subprocess.Popen(
                    [sys.executable, str(JOB), str(rank), str(WORLD), *argv, str(STEP_S)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
                for rank in range(WORLD)
            ]
        healthy = daemon.snapshot_when(lambda s: (s["training"] or {}).get("global_step", 0) >= 5, timeout=60)
        assert math.isfinite(healthy["training"]["loss"]) and healthy["training"]["step_time_ms"] >= STEP_S * 1000
        assert not any(s["name"] == "nonfinite_loss" for s in healthy["diagnosis"]["signals"])
        assert wait_until(lambda: any(nonfinite(line) for line in log.read_text().splitlines()), timeout=60)
        signal, took = daemon.signal_within("nonfinite_loss")
        assert took < PROMISED_S and signal["evidence"]["field"] == "loss"
        step = daemon.get("/v1/snapshot")["training"]["global_step"]
        assert DIVERGE_AT < step <= STEPS
        for rank in ranks:
            assert rank.wait(timeout=60) == 0
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
        daemon.close()
    lines = log.read_text().splitlines()
    assert len([line for line in lines if " iteration " in line]) == STEPS  # one line a step, the last rank's only
    assert not any(nonfinite(line) for line in lines[:DIVERGE_AT]) and nonfinite(lines[-1])
