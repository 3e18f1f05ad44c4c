"""Two real gloo processes on CPU: both ranks' step times reach rank 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

WORKER = Path(__file__).with_name("gloo_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def run_job(tmp_path: Path, slow_rank: int, world: int = 2) -> dict:
    out = tmp_path / "rank0.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(rank), str(world), str(tmp_path / "store"), str(out), str(slow_rank)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for rank in range(world)
    ]
    logs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def slow_rank_one(tmp_path_factory) -> dict:
    return run_job(tmp_path_factory.mktemp("gloo"), slow_rank=1)


def test_both_ranks_step_times_reach_rank_zero(slow_rank_one):
    training = slow_rank_one["training"]
    ranks = {r["rank"]: r for r in training["ranks"]}
    assert set(ranks) == {0, 1}
    assert training["world_size"] == 2 and training["model_name"] == "gloo-mlp"
    for rank, entry in ranks.items():
        assert entry["gpu_index"] == rank  # LOCAL_RANK
        assert entry["hostname"] and entry["step_time_ms"] > 0 and entry["tokens_per_sec"] > 0
        assert {"data_wait_ms", "sync_wait_ms", "all_reduce_wait_ms"} <= set(entry)
    assert slow_rank_one["stats"]["gathers"] == 40 // 2  # every 2 steps


def test_the_slow_rank_is_busy_longer_and_the_fast_one_waits(slow_rank_one):
    ranks = {r["rank"]: r for r in slow_rank_one["training"]["ranks"]}
    assert ranks[1]["step_time_ms"] - ranks[0]["step_time_ms"] > 10  # 20 ms of extra work per step
    assert ranks[0]["sync_wait_ms"] - ranks[1]["sync_wait_ms"] > 10  # rank 0 waits for it at the barrier
    assert ranks[1]["tokens_per_sec"] < ranks[0]["tokens_per_sec"]


def test_the_slow_rank_is_diagnosed_as_a_straggler(slow_rank_one):
    diagnosis = slow_rank_one["diagnosis"]
    stragglers = [s for s in diagnosis["signals"] if s["name"] == "rank_straggler"]
    assert [s["subject"]["rank"] for s in stragglers] == [1]
    assert stragglers[0]["subject"]["gpu_index"] == 1
