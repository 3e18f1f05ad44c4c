"""The step-time budget and goodput: losses measured against the job's own best pace, attributed to causes."""

from __future__ import annotations

import random

import pytest

from trainpulse_otel.diagnose.budget import (
    COMPONENTS,
    WARMUP_REPORTS,
    BudgetBuilder,
    StepCounter,
    all_reduce_ms,
    saved_ms,
)
from trainpulse_otel.diagnose.goodput import UNATTRIBUTED, GoodputAccount
from trainpulse_otel.diagnose.types import RootCause
from trainpulse_otel.samples import RankSample, TrainingSample

T0 = 1_764_400_000.0
STEP_MS = 1000.0


def report(step: int, rng: random.Random, **fields: float) -> TrainingSample:
    """One step of a healthy job: ~1 s, of which 5 ms data, 1 ms tokenizer, 8 ms sync, 60 ms all-reduce."""
    base = {
        "step_time_ms": STEP_MS * rng.uniform(0.99, 1.01),
        "data_wait_ms": 5.0 * rng.uniform(0.9, 1.1),
        "tokenizer_wait_ms": 1.0,
        "sync_wait_ms": 8.0 * rng.uniform(0.9, 1.1),
        "all_reduce_wait_ms": 60.0,
    }
    base.update(fields)
    return TrainingSample(global_step=step, **base)


def run(steps: int, fault=None, causes=(), straggler=0.0, seed=0):
    """Feed ``steps`` one-second steps (``fault(step)`` gives changed fields); the budget and the account."""
    rng, builder, account = random.Random(seed), BudgetBuilder(), GoodputAccount()
    ts = T0
    for step in range(steps):
        fields = fault(step) if fault else {}
        r = report(step, rng, **fields)
        ts += r.step_time_ms / 1000.0
        budget = builder.add(ts, r)
        account.add(ts, r, budget, builder.ideal_ms, list(causes), straggler)
    return builder, account, ts


def test_the_ideal_step_is_the_jobs_healthy_pace_and_a_healthy_job_loses_little():
    builder, account, ts = run(600)
    assert builder.ideal_ms == pytest.approx(STEP_MS, rel=0.01)
    goodput = account.goodput(ts)
    assert goodput.ratio > 0.98 and goodput.window_ratio > 0.98
    assert sum(goodput.badput_s.values()) < 0.02 * (ts - T0)


def test_nothing_is_known_before_the_warm_up_and_a_report_without_step_time_has_no_budget():
    builder, account = BudgetBuilder(), GoodputAccount()
    rng = random.Random(0)
    budgets = [builder.add(T0 + i, report(i, rng)) for i in range(WARMUP_REPORTS)]
    assert budgets == [None] * WARMUP_REPORTS and account.goodput(T0 + 10) is None
    assert builder.add(T0 + 11, TrainingSample(global_step=11, tokens_per_sec=5.0)) is None
    assert set(builder.add(T0 + 12, report(12, rng)).lost_ms) == set(COMPONENTS)


def test_a_ramping_fault_never_becomes_the_ideal():
    builder, _, _ = run(
        900,
        fault=lambda s: (
            {} if s < 100 else {"data_wait_ms": 5.0 + 2.0 * (s - 100), "step_time_ms": STEP_MS + 2.0 * (s - 100)}
        ),
    )
    assert builder.ideal_ms == pytest.approx(STEP_MS, rel=0.01)


def test_checkpoint_seconds_are_the_saves_own_time_counted_once():
    saves = {100: 20_000.0, 400: 35_000.0}  # the step that ended each save reports how long it took
    _, account, ts = run(
        600, fault=lambda s: {"checkpoint_ms": saves[s], "step_time_ms": STEP_MS + saves[s]} if s in saves else {}
    )
    assert account.goodput(ts).badput_s["checkpoint_io_bound"] == pytest.approx(55.0, rel=0.01)


def test_a_save_before_the_ideal_step_is_known_is_still_the_saves_time():
    # a job that saves early (the real gloo run's first save lands before the ideal step is learned)
    saves = {3: 20_000.0, 400: 35_000.0}
    _, account, ts = run(
        600, fault=lambda s: {"checkpoint_ms": saves[s], "step_time_ms": STEP_MS + saves[s]} if s in saves else {}
    )
    assert account.goodput(ts).badput_s["checkpoint_io_bound"] == pytest.approx(55.0, rel=0.01)


def test_a_wait_every_rank_pays_is_baseline_and_its_growth_is_the_loss():
    _, account, ts = run(
        600, fault=lambda s: {"all_reduce_wait_ms": 260.0, "step_time_ms": STEP_MS + 200.0} if s >= 300 else {}
    )
    badput = account.goodput(ts).badput_s
    assert badput["communication_bound"] == pytest.approx(300 * 0.2, rel=0.1)
    assert badput.get(UNATTRIBUTED, 0.0) < 5.0


def test_tokenization_inside_the_loaders_wait_explains_that_part_of_it():
    _, account, ts = run(
        400,
        fault=lambda s: (
            {"data_wait_ms": 305.0, "tokenizer_wait_ms": 251.0, "step_time_ms": STEP_MS + 300.0} if s >= 200 else {}
        ),
    )
    badput = account.goodput(ts).badput_s
    assert badput["tokenizer_bound"] == pytest.approx(200 * 0.25, rel=0.1)
    assert badput["input_pipeline_bound"] == pytest.approx(200 * 0.05, rel=0.25)


def test_sync_waits_go_to_what_makes_the_straggler_late_else_to_imbalance():
    def slow(s: int) -> dict:
        return {"sync_wait_ms": 308.0, "step_time_ms": STEP_MS + 300.0} if s >= 300 else {}

    thermal = RootCause("gpu_thermal_throttling", 0.9, "GPU 5 throttles")
    _, account, ts = run(600, fault=slow, causes=[thermal, RootCause("straggler_rank", 0.8, "rank 5")], straggler=1.0)
    assert account.goodput(ts).badput_s["gpu_thermal_throttling"] == pytest.approx(90.0, rel=0.1)
    _, account, ts = run(600, fault=slow)
    assert account.goodput(ts).badput_s["load_imbalance"] == pytest.approx(90.0, rel=0.1)
    # a straggler among ranks that also scatter adds 60 % of the wait: the rest is the others' imbalance
    _, account, ts = run(600, fault=slow, causes=[RootCause("straggler_rank", 0.5, "rank 5")], straggler=0.6)
    badput = account.goodput(ts).badput_s
    assert badput["straggler_rank"] == pytest.approx(54.0, rel=0.1)
    assert badput["load_imbalance"] == pytest.approx(36.0, rel=0.1)


def test_slower_compute_goes_to_the_top_deeper_cause_or_stays_unattributed():
    def slow(s: int) -> dict:
        return {"step_time_ms": STEP_MS * 1.3} if s >= 300 else {}

    power = RootCause("gpu_power_throttling", 0.8, "capped")
    _, account, ts = run(600, fault=slow, causes=[RootCause("communication_bound", 0.9, "slow"), power])
    assert account.goodput(ts).badput_s["gpu_power_throttling"] == pytest.approx(90.0, rel=0.1)
    _, account, ts = run(600, fault=slow)
    assert account.goodput(ts).badput_s[UNATTRIBUTED] == pytest.approx(90.0, rel=0.15)


def test_time_without_steps_is_unattributed_badput_and_the_window_forgets_it():
    rng, builder, account = random.Random(0), BudgetBuilder(), GoodputAccount(window_s=600.0)
    ts = T0
    for step in range(300):
        if step == 150:
            ts += 120.0  # two minutes in which no step finished
        ts += 1.0
        r = report(step, rng, step_time_ms=1000.0)
        account.add(ts, r, builder.add(ts, r), builder.ideal_ms, [], 0.0)
    goodput = account.goodput(ts)
    assert goodput.badput_s[UNATTRIBUTED] == pytest.approx(120.0, abs=2.0)
    assert goodput.ratio == pytest.approx(300 / 420, rel=0.01)
    later = ts
    for step in range(300, 1000):
        later += 1.0
        r = report(step, rng, step_time_ms=1000.0)
        account.add(later, r, builder.add(later, r), builder.ideal_ms, [], 0.0)
    assert account.goodput(later).window_ratio == pytest.approx(1.0, abs=0.01)
    assert account.goodput(later).badput_s[UNATTRIBUTED] >= goodput.badput_s[UNATTRIBUTED]  # counters only grow


def test_steps_are_counted_from_the_global_step_so_a_report_of_many_steps_counts_them_all():
    rng, builder, account, counter = random.Random(0), BudgetBuilder(), GoodputAccount(), StepCounter()
    ts = T0
    for i in range(120):
        ts += 10.0  # one report every 10 s, each for the 10 steps of that interval
        r = report(10 * i, rng, step_time_ms=1000.0)
        steps = counter.advance(r)
        account.add(ts, r, builder.add(ts, r, steps), builder.ideal_ms, [], False, steps)
    assert account.goodput(ts).ratio == pytest.approx(1.0, abs=0.02)


def test_a_save_inside_a_report_of_many_steps_counts_whole_and_only_once():
    """The in-process monitor's report: the mean of the interval's steps, one of which ended a save."""
    rng, builder, account, counter = random.Random(0), BudgetBuilder(), GoodputAccount(), StepCounter()
    ts, saved_s = T0, 0.0
    for i in range(200):
        saving = i % 20 == 19
        ts += 4.0 + (3.0 if saving else 0.0)  # 4 steps of 1 s, and a 3 s save every 20th interval
        fields = {"step_time_ms": (4000.0 + 3000.0) / 4, "checkpoint_ms": 3000.0} if saving else {}
        r = report(4 * i, rng, **fields)
        steps = counter.advance(r)
        account.add(ts, r, builder.add(ts, r, steps), builder.ideal_ms, [], False, steps)
        saved_s += 3.0 if saving and i >= WARMUP_REPORTS else 0.0
    goodput = account.goodput(ts)
    assert goodput.badput_s["checkpoint_io_bound"] == pytest.approx(saved_s, rel=0.01)
    assert builder.ideal_ms == pytest.approx(STEP_MS, rel=0.02)  # the save never became part of the pace


def test_a_replayed_run_charges_its_checkpoints_the_seconds_the_saves_took():
    from tests import parts
    from trainpulse_otel.collect.sim.scenarios import SCENARIOS
    from trainpulse_otel.evaluation.sim_replay import sim_records
    from trainpulse_otel.runtime.replay import replay

    records = list(sim_records(SCENARIOS["checkpoint_stall"], 0, 600))
    saves_s = sum((r.payload.checkpoint_ms or 0.0) / 1000.0 for r in records if r.kind == "training")
    diagnosis = replay(iter(records), parts.stepper()).diagnosis
    assert saves_s > 200.0
    assert diagnosis.goodput.badput_s["checkpoint_io_bound"] == pytest.approx(saves_s, rel=0.02)
    assert diagnosis.root_causes[0].cause == "checkpoint_io_bound"


def _all_reduce_report(waits) -> TrainingSample:
    return TrainingSample(ranks=tuple(RankSample(rank=r, all_reduce_wait_ms=w) for r, w in enumerate(waits)))


def test_the_all_reduce_time_is_each_reports_own_however_the_reports_are_asked_about():
    # the 10th percentile of the ranks' all-reduce times, worked out afresh for each report
    fast = _all_reduce_report([10.0 + r for r in range(20)])
    slow = _all_reduce_report([90.0 + r for r in range(20)])
    same_as_fast = _all_reduce_report([10.0 + r for r in range(20)])
    assert [all_reduce_ms(r) for r in (fast, fast, slow, fast, same_as_fast, slow)] == [
        12.0,
        12.0,
        92.0,
        12.0,
        12.0,
        92.0,
    ]
    assert all_reduce_ms(TrainingSample(all_reduce_wait_ms=7.0)) == 7.0  # no rank reports it: the job's


def test_a_report_whose_step_went_back_stands_for_one_step_and_the_count_goes_on_from_it():
    counter = StepCounter()
    steps = [counter.advance(TrainingSample(global_step=g)) for g in (100, 110, 40, 41, 45)]
    assert steps == [1, 10, 1, 1, 4]  # a resume from step 39's checkpoint: its steps are counted again


def test_a_log_s_line_that_only_says_how_long_a_save_took_is_the_save_and_no_step():
    counter = StepCounter()
    counter.advance(TrainingSample(global_step=20, step_time_ms=1000.0))
    save = TrainingSample(checkpoint_ms=2000.0)  # torchtitan's "Finished saving the checkpoint in 2.00 seconds."
    assert counter.advance(save) == 0 and saved_ms(save, 0) == 2000.0
    assert saved_ms(TrainingSample(step_time_ms=1500.0, checkpoint_ms=2000.0)) == 1500.0  # the SDK's: within its step
