"""Per-rank step budgets: a late rank's own loss is its compute or its loader's wait; the others' is the wait for it."""

from __future__ import annotations

import random

import pytest

from tests.diagnose.builders import job
from trainpulse_otel.diagnose.budget import BudgetBuilder
from trainpulse_otel.diagnose.rank_budget import MAX_RANKS, RankBudgets
from trainpulse_otel.runtime import build_pipeline, discover
from trainpulse_otel.samples import RankSample, TrainingSample

T0 = 1_764_400_000.0
COMPUTE_MS = 1000.0
ALL_REDUCE_MS = 20.0
BARRIER_MS = 8.5  # the collective's own cost: every rank pays it, every step
OVERHEAD_MS = 5.0


def step(
    i: int,
    n: int,
    rng: random.Random,
    compute: dict[int, float],
    loader: dict[int, float],
    compute_ms: float = COMPUTE_MS,
) -> TrainingSample:
    """One synchronous step of ``n`` ranks (own-busy convention, as the simulator reports): rank r computes
    ``compute[r]`` × ``compute_ms`` and waits ``loader[r]`` ms more for its batch; everyone waits for the last."""
    data = [5.0 * rng.uniform(0.8, 1.2) + loader.get(r, 0.0) for r in range(n)]
    work = [compute_ms * compute.get(r, 1.0) * rng.uniform(0.99, 1.01) for r in range(n)]
    arrivals = [d + c for d, c in zip(data, work, strict=True)]
    last = max(arrivals)
    sync = [last - a + BARRIER_MS * rng.uniform(0.95, 1.05) for a in arrivals]
    ranks = tuple(
        RankSample(
            rank=r,
            gpu_index=r % 8,
            hostname=f"node-{r // 8:03d}",
            step_time_ms=work[r] + ALL_REDUCE_MS,
            data_wait_ms=data[r],
            sync_wait_ms=sync[r],
            all_reduce_wait_ms=ALL_REDUCE_MS * rng.uniform(0.99, 1.01),
        )
        for r in range(n)
    )
    return TrainingSample(
        global_step=i,
        step_time_ms=last + ALL_REDUCE_MS + BARRIER_MS + OVERHEAD_MS,
        data_wait_ms=sum(data) / n,
        sync_wait_ms=sum(sync) / n,
        all_reduce_wait_ms=ALL_REDUCE_MS,
        ranks=ranks,
    )


def run(
    n: int, steps: int = 500, onset: int = 60, compute=None, loader=None, compute_ms: float = COMPUTE_MS
) -> RankBudgets:
    """``steps`` steps of ``n`` ranks, the fault (``compute``/``loader`` per rank) from step ``onset`` on."""
    rng, builder, ranks = random.Random(0), BudgetBuilder(), RankBudgets()
    ts = T0
    for i in range(steps):
        fault = i >= onset
        r = step(i, n, rng, (compute or {}) if fault else {}, (loader or {}) if fault else {}, compute_ms)
        ts += r.step_time_ms / 1000.0
        ranks.add(ts, r, builder.add(ts, r))
    return ranks


def test_a_collective_every_rank_pays_equally_is_no_ranks_loss():
    ranks = run(8)
    assert ranks.worst() == ()
    for r in range(8):
        budget = ranks.of(r)
        assert budget is not None and sum(budget.values()) < 0.02 * COMPUTE_MS


@pytest.mark.parametrize("n", [2, 4, 8])
def test_a_slower_rank_loses_its_compute_excess_and_the_others_wait_for_it(n: int):
    ranks = run(n, compute={1: 1.35})
    excess = 0.35 * COMPUTE_MS
    late = ranks.of(1)
    assert late["compute"] == pytest.approx(excess, rel=0.15)
    assert late["data"] < 0.05 * excess and late["sync"] < 0.05 * excess
    for other in set(range(n)) - {1}:
        budget = ranks.of(other)
        assert budget["sync"] == pytest.approx(excess, rel=0.15)
        assert budget["compute"] + budget["data"] < 0.1 * excess
    (worst,) = ranks.worst()
    assert (worst.rank, worst.hostname, worst.gpu_index) == (1, "node-000", 1)
    assert worst.lost_ms_per_step == pytest.approx(excess, rel=0.15)
    assert worst.lost_ms["compute"] == pytest.approx(excess, rel=0.15) and worst.waited_ms_per_step < 0.05 * excess


def test_a_rank_waiting_for_its_own_loader_loses_data_not_compute():
    ranks = run(8, loader={5: 300.0})
    own = ranks.of(5)
    assert own["data"] == pytest.approx(300.0, rel=0.15) and own["compute"] < 0.1 * 300.0
    assert all(ranks.of(r)["sync"] == pytest.approx(300.0, rel=0.15) for r in range(8) if r != 5)
    assert [w.rank for w in ranks.worst()] == [5]


def test_the_worst_ranks_are_listed_worst_first_and_bounded():
    slow = {r: 1.1 + 0.02 * r for r in range(MAX_RANKS + 2)}  # ten slower ranks, the last the slowest
    ranks = run(16, compute=slow)
    worst = ranks.worst()
    assert [w.rank for w in worst[:3]] == [MAX_RANKS + 1, MAX_RANKS, MAX_RANKS - 1] and len(worst) == MAX_RANKS
    assert [w.lost_ms_per_step for w in worst] == sorted((w.lost_ms_per_step for w in worst), reverse=True)
    for w in worst:  # the list is ranked by the same split a rank's own budget has
        own = ranks.of(w.rank)
        assert w.lost_ms_per_step == pytest.approx(own["compute"] + own["data"])
        assert w.waited_ms_per_step == pytest.approx(own["sync"])


def test_a_job_reporting_ten_times_a_second_is_sampled_and_still_finds_the_late_rank():
    ranks = run(16, steps=6000, onset=600, compute={7: 1.35}, compute_ms=100.0)
    assert ranks.of(7)["compute"] == pytest.approx(35.0, rel=0.15)
    assert ranks.worst()[0].rank == 7 and all(ranks.of(r)["sync"] == pytest.approx(35.0, rel=0.15) for r in (0, 15))


def test_a_new_set_of_ranks_starts_afresh_and_an_unknown_rank_has_no_budget():
    ranks = run(4, compute={1: 1.35})
    assert ranks.of(9) is None and ranks.of(1)["compute"] > 300.0
    rng, builder = random.Random(1), BudgetBuilder()
    for i in range(40):  # the job restarts on six ranks, rank 1 as fast as the others
        r = step(i, 6, rng, {}, {})
        ranks.add(T0 + 10_000.0 + i, r, builder.add(T0 + 10_000.0 + i, r))
    assert ranks.of(5) is not None and ranks.of(1)["compute"] < 10.0 and ranks.worst() == ()


def diagnose(rank_changes: dict[int, dict[str, float]], seconds: int = 300, onset: int = 60):
    """The real pipeline over a healthy 8-rank job (``builders.job``) whose ranks change at ``onset``."""
    pipeline = build_pipeline(discover(autoload=False))
    for t in range(seconds):
        result = pipeline.update(job(float(t), rank_changes=rank_changes if t >= onset else None))
    return result.diagnosis


def test_a_straggler_late_for_its_own_loader_is_explained_as_its_loader():
    d = diagnose({3: {"data_wait_ms": 604.0}})
    top = d.root_causes[0]
    assert (top.cause, top.subject["rank"]) == ("straggler_rank", 3)
    assert "its lateness is its own data loader" in top.summary and "waits for its own data loader" in top.remediation
    (worst,) = d.goodput.ranks
    assert worst.rank == 3 and worst.lost_ms["data"] == pytest.approx(600.0, rel=0.15)


def test_a_straggler_with_more_compute_is_explained_as_its_compute():
    d = diagnose({3: {"step_time_ms": 1.35 * 1700.0}})
    top = d.root_causes[0]
    assert (top.cause, top.subject["rank"]) == ("straggler_rank", 3)
    assert "its lateness is its own compute" in top.summary and "waits for its own data loader" not in top.remediation
    (worst,) = d.goodput.ranks
    assert worst.rank == 3 and worst.lost_ms["compute"] == pytest.approx(0.35 * 1700.0, rel=0.15)


def test_a_job_back_from_a_pause_forgets_what_its_ranks_lost_before_it():
    rng, builder, ranks, ts = random.Random(0), BudgetBuilder(), RankBudgets(), T0
    for i in range(330):
        if i == 300:
            ts += 600.0  # ten minutes without a report; rank 1 is as fast as the others since
        r = step(i, 4, rng, {1: 1.35} if 60 <= i < 300 else {}, {})
        ts += r.step_time_ms / 1000.0
        ranks.add(ts, r, builder.add(ts, r))
        if i == 299:
            assert ranks.of(1)["compute"] > 300.0
    assert ranks.of(1)["compute"] < 10.0 and ranks.worst() == ()
