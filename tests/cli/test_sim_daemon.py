"""``trainpulse daemon -mode sim`` as a user runs it: a real process on loopback, spoken to over HTTP.

Two promises of the simulator, end to end: a real training report wins over
the simulated one (the simulated GPUs go on), and ``-onset`` sets when the
scenario's fault begins — counted from the start of the simulated run, which
the daemon's virtual-time warm-up puts before its first answer.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest

from tests.cli.daemons import SimDaemon

pytestmark = pytest.mark.e2e


REAL_REPORT = {
    "model_name": "my-real-model",
    "framework": "pytorch",
    "step_time_ms": 1234.5,
    "global_step": 7,
    "tokens_per_sec": 5000.0,
}


def test_a_real_training_report_wins_over_the_simulated_one_until_it_goes_stale(start):
    daemon = start("-interval", "250ms", "-warmup", "20s", "-stale-after", "2s")
    assert daemon.get("/v1/snapshot")["training"]["model_name"] == "llama-3-8b"  # the simulated job, before
    assert daemon.post("/v1/training", REAL_REPORT) == 202
    first = daemon.snapshot_when(lambda s: s["training"]["model_name"] == "my-real-model")
    assert first["training"]["step_time_ms"] == 1234.5
    later = daemon.snapshot_when(lambda s: s["timestamp"] >= first["timestamp"] + 0.75)  # three ticks on
    assert later["training"]["model_name"] == "my-real-model"  # the simulator no longer overwrites it
    assert later["training"]["step_time_ms"] == 1234.5
    assert [g["name"] for g in later["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8  # its GPUs still simulated
    assert later["gpus"] != first["gpus"]  # and still moving
    assert daemon.logged("the simulated training loop stands down")
    resumed = daemon.snapshot_when(lambda s: s["training"]["model_name"] == "llama-3-8b")  # 2s without reports
    assert resumed["timestamp"] >= first["timestamp"] + 1.5
    assert daemon.logged("no real training report for 2s: the simulated training loop resumes")


def _fault_timing(daemon: SimDaemon) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    """The run's start (its first frame), the first snapshot's rank_straggler signal, and the frames."""
    snap = daemon.snapshot_when(lambda s: any(g["name"] == "rank_straggler" for g in s["diagnosis"]["signals"]))
    frames = daemon.get("/v1/history")["frames"]
    signal_ = next(g for g in snap["diagnosis"]["signals"] if g["name"] == "rank_straggler")
    return frames[0]["timestamp"], signal_, frames


def _step_ms(frames: list[dict[str, Any]], start: float, lo: float, hi: float) -> float:
    return statistics.median(
        f["training"]["step_time_ms"] for f in frames if f["training"] and lo <= f["timestamp"] - start < hi
    )


@pytest.mark.parametrize(("flags", "onset"), [((), 90.0), (("-onset", "30s"), 30.0)])
def test_the_fault_begins_at_its_onset_and_is_diagnosed_at_the_first_answer(start, flags, onset):
    started = time.monotonic()
    daemon = start("-scenario", "rank_straggler", *flags)
    run_start, straggler, frames = _fault_timing(daemon)
    assert time.monotonic() - started < 30  # the 3-minute warm-up runs in virtual time
    assert straggler["subject"]["rank"] == 5
    assert onset <= straggler["since"] - run_start <= onset + 30  # raised after the onset, soon after
    healthy, slow = _step_ms(frames, run_start, 0, onset), _step_ms(frames, run_start, onset + 30, 1e9)
    assert 1600 < healthy < 1900 and slow > 2100  # no straggler before the onset; rank 5 holds everyone up after
