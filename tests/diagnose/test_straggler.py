"""rank_straggler: one slow rank told from uniformly slow communication and from data-dependent imbalance,
at 8 and at 4,096 ranks, for both per-rank step-time conventions."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from tests.diagnose.builders import T0, Harness
from tests.diagnose.frames import ALLREDUCE_MS, healthy, report, slow
from trainpulse_otel.diagnose.detectors import RankStraggler
from trainpulse_otel.samples import Frame, RankSample, TrainingSample


@pytest.mark.parametrize("convention", ["own_busy", "wall"])
def test_one_slow_rank_is_found_with_its_gpu_and_scores(convention):
    det = RankStraggler()
    h = Harness(det).run(range(120), lambda t: report(t, 8, slow(5, 1.35, 60, t), convention))
    raised = h.raised("rank_straggler")
    assert [dict(x.subject) for x in raised][:1] == [{"rank": 5, "gpu_index": 5, "hostname": "node-000"}]
    assert 60 < raised[0].ts - T0 <= 66
    assert det.convention == convention
    signal = h.active()[0]
    assert signal.severity == "critical"
    assert signal.evidence["relative_score"] == pytest.approx(1 / 1.35, abs=0.03)
    assert signal.evidence["individual_score"] < 0.8
    assert 500 < signal.evidence["peers_wait_ms"] < 700
    assert "rank 5 is 3" in signal.message and "slower than the median rank" in signal.message
    scores = det.scores()
    assert min(scores, key=lambda r: scores[r][0]) == 5
    assert all(0.0 <= rel <= 1.0 and 0.0 <= ind <= 1.0 for rel, ind in scores.values())


def test_one_slow_rank_among_4096():
    h = Harness(RankStraggler()).run(range(40), lambda t: report(t, 4096, slow(1234, 1.3, 10, t)))
    assert {(x.subject["rank"], x.subject["gpu_index"]) for x in h.raised()} == {(1234, 1234 % 8)}
    assert h.active()[0].evidence["hostname"] == "node-154"


def test_4096_healthy_ranks_raise_nothing():
    h = Harness(RankStraggler()).run(range(60), lambda t: report(t, 4096, healthy))
    assert h.raised() == []


def test_uniformly_slow_communication_is_not_a_straggler():
    h = Harness(RankStraggler()).run(
        range(120), lambda t: report(t, 8, healthy, allreduce_ms=ALLREDUCE_MS * (4.5 if t >= 60 else 1.0))
    )
    assert h.raised() == []


def test_data_dependent_imbalance_is_not_a_straggler():
    def imbalanced(r, rng):
        return healthy(r, rng) * max(0.4, 1.0 + 0.25 * rng.gauss(0.0, 1.0))

    for seed in range(3):
        h = Harness(RankStraggler()).run(range(400), lambda t, seed=seed: report(t + 1000 * seed, 8, imbalanced))
        assert h.raised() == []


def test_a_straggler_inside_data_dependent_imbalance_is_found_by_the_long_average():
    # every rank's work scatters 25 % step to step, and rank 5 does 35 % more on average: the 3-report average
    # cannot tell it from chance, the ~40-report one can; the evidence says how widely the others scatter
    def imbalanced_and_slow(r, rng):
        return healthy(r, rng) * max(0.4, 1.0 + 0.25 * rng.gauss(0.0, 1.0)) * (1.35 if r == 5 else 1.0)

    h = Harness(RankStraggler()).run(range(300), lambda t: report(t, 8, imbalanced_and_slow))
    assert {t.subject["rank"] for t in h.raised("rank_straggler")} == {5}
    assert h.first_raise_s("rank_straggler") <= 90
    evidence = h.active()[0].evidence
    assert evidence["others_scatter"] > 0.1
    # how far after the median the last of the other 7 arrives, as the reports show it: the wait they would still
    # pay without rank 5 (what load_imbalance explains beside the straggler)
    excess = []
    for t in range(300):
        ranks = report(t, 8, imbalanced_and_slow).training.ranks
        late = [r.data_wait_ms + r.step_time_ms - r.all_reduce_wait_ms for r in ranks]
        median = statistics.median(late)
        excess.append((max(late[:5] + late[6:]) - median) / median)
    assert evidence["others_last_excess"] == pytest.approx(statistics.fmean(excess), rel=0.1)


def test_a_gc_pause_on_one_step_is_not_a_straggler():
    def pause(t):
        return lambda r, rng: healthy(r, rng) + (600.0 if r == 3 and t == 50 else 0.0)

    h = Harness(RankStraggler()).run(range(120), lambda t: report(t, 8, pause(t)))
    assert h.raised() == []


def test_recovery_clears_the_straggler():
    h = Harness(RankStraggler()).run(range(200), lambda t: report(t, 8, slow(2, 1.4, 30, t) if t < 90 else healthy))
    assert len(h.raised()) >= 1 and len(h.cleared()) == 1 and h.active() == []


def test_ranks_reporting_only_tokens_per_second():
    def frame(t):
        f = report(t, 8, slow(6, 1.3, 20, t))
        ranks = tuple(
            RankSample(rank=r.rank, gpu_index=r.gpu_index, tokens_per_sec=16384 / (r.step_time_ms / 1000))
            for r in f.training.ranks
        )
        return Frame(ts=f.ts, training=TrainingSample(timestamp=f.ts, ranks=ranks))

    h = Harness(RankStraggler()).run(range(60), frame)
    assert h.raised()[0].subject["rank"] == 6
    assert "peers_wait_ms" not in h.active()[0].evidence


def test_two_ranks_the_slower_one_against_the_other():
    h = Harness(RankStraggler()).run(range(40), lambda t: report(t, 2, slow(1, 1.3, 10, t)))
    assert [x.subject["rank"] for x in h.raised()][:1] == [1]
    assert "slower than the other rank" in h.active()[0].message
    assert h.active()[0].evidence["relative_score"] == pytest.approx(1 / 1.3, abs=0.03)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_a_few_ranks_one_slow_is_found_and_never_before_it_slows(n):
    # at 4 ranks the upper quartile of all ranks is the straggler itself: its own scatter must not count
    h = Harness(RankStraggler()).run(range(90), lambda t: report(t, n, slow(n - 2, 1.35, 40, t)))
    raised = h.raised()
    assert [x.subject["rank"] for x in raised][:1] == [n - 2]
    assert 40 < raised[0].ts - T0 <= 48
    assert {x.subject["rank"] for x in raised} == {n - 2}


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("factor", [0.6, 1.8])
def test_a_job_wide_change_of_speed_makes_no_rank_a_straggler(n, factor):
    # every rank speeds up (or slows down) at once: each rank's lagged median against the lagged medians
    def frame(t):
        return report(t, n, lambda r, rng: healthy(r, rng) * (factor if t >= 30 else 1.0))

    assert Harness(RankStraggler()).run(range(60), frame).raised() == []


def test_two_ranks_taking_turns_are_not_a_straggler():
    def imbalanced(r, rng):
        return healthy(r, rng) * max(0.4, 1.0 + 0.25 * rng.gauss(0.0, 1.0))

    h = Harness(RankStraggler()).run(range(300), lambda t: report(t, 2, imbalanced))
    assert h.raised() == []


def test_a_rank_that_sat_out_a_stall_is_not_made_a_straggler_by_it():
    """After a hang, the gathered step of the hung rank holds the whole stall (60 s): that is training_stalled's,
    and repeating it over a few reports (the gather holds it) must not raise rank_straggler."""

    def frame(t: float) -> Frame:
        hung = 60.0 <= t < 66.0
        return report(t, 4, lambda r, rng: healthy(r, rng) + (60_000.0 if hung and r == 3 else 0.0))

    h = Harness(RankStraggler()).run(range(120), frame)
    assert h.raised("rank_straggler") == []
    h = Harness(RankStraggler()).run(range(120), lambda t: report(t, 4, slow(3, 1.35, 60, t)))
    assert [x.subject["rank"] for x in h.raised("rank_straggler")][:1] == [3]  # a slower pace still is one


def test_a_fresh_jobs_warm_up_is_not_judged():
    # a job seen from step 0, reporting every 0.1 s: rank 1 lags its first steps (lazy init), as a real 3-rank
    # gloo job's did at step 19; nothing is judged before 50 steps and 10 s
    def fresh(t: float) -> Frame:
        frame = report(t, 4, lambda r, rng: healthy(r, rng) * (1.5 if r == 1 and t < 8 else 1.0))
        return replace(frame, training=replace(frame.training, global_step=int(10 * t)))

    h = Harness(RankStraggler()).run([i / 10 for i in range(400)], fresh)
    assert h.raised() == []
