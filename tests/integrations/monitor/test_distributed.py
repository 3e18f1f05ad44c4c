"""Two real gloo processes on CPU: both ranks' step times reach rank 0."""

from __future__ import annotations

import pytest

from tests.integrations.monitor.gloo_job import run_job

#: A real multi-process job whose timing is what is judged: run alone, after the parallel pass (scripts/test).
pytestmark = pytest.mark.serial

pytest.importorskip("torch")

#: Steps of the job: the straggler needs a few dozen gathers to be judged.
STEPS = 160  # past the warm-up (50 steps and 10 s) with room for the straggler to be judged


@pytest.fixture(scope="module")
def slow_rank_one(tmp_path_factory) -> dict:
    """Rank 1 does 35 % more work and sleeps 40 ms more each step: slower whatever else the two cores run
    (rank 0's own monitor ticking every 50 ms can slow rank 0's compute by as much as the extra work)."""
    return run_job(tmp_path_factory.mktemp("gloo"), world=2, steps=STEPS, interval=0.05, slow_rank=1, sleep_ms=40)


def test_both_ranks_step_times_reach_rank_zero(slow_rank_one):
    training = slow_rank_one["training"]
    ranks = {r["rank"]: r for r in training["ranks"]}
    assert set(ranks) == {0, 1}
    assert training["world_size"] == 2 and training["model_name"] == "gloo-mlp"
    for rank, entry in ranks.items():
        assert entry["gpu_index"] == rank  # LOCAL_RANK
        assert entry["hostname"] and entry["step_time_ms"] > 0 and entry["tokens_per_sec"] > 0
        assert {"data_wait_ms", "sync_wait_ms", "all_reduce_wait_ms"} <= set(entry)
    assert slow_rank_one["stats"]["gathers"] == STEPS // 2  # every 2 steps


def test_the_slow_rank_is_busy_longer_and_the_fast_one_waits(slow_rank_one):
    ranks = {r["rank"]: r for r in slow_rank_one["training"]["ranks"]}
    assert ranks[1]["step_time_ms"] > 1.1 * ranks[0]["step_time_ms"]  # the extra work and sleep, one noisy gather
    assert ranks[0]["sync_wait_ms"] - ranks[1]["sync_wait_ms"] > 3  # rank 0 waits for it at the barrier
    assert ranks[1]["tokens_per_sec"] < ranks[0]["tokens_per_sec"]


def test_the_slow_rank_is_diagnosed_as_a_straggler(slow_rank_one):
    diagnosis = slow_rank_one["diagnosis"]
    stragglers = [s for s in diagnosis["signals"] if s["name"] == "rank_straggler"]
    assert [s["subject"]["rank"] for s in stragglers] == [1]
    assert stragglers[0]["subject"]["gpu_index"] == 1
